"""SQLite's verdict on a store (``PRAGMA quick_check``) taken in a thread beside the export.

On a big healthy store the check and the export each read the whole file; run one after the
other, the check holds one core while the other idles. A parallel export (:mod:`.parallel`)
starts this check in a thread of the parent once its worker processes are forked (never
before: forking copies only the forking thread), so the check shares the two cores with the
workers (the sqlite3 module releases the GIL while the check runs).

The check also runs the span query (spool.span_sql: a scan of each table's smallest covering
index) of the tables whose spans the export was split by from seeks (``spans``), and asks
that it gives the same values: the scan stays a test of the file, as where it runs before
the export, but off its critical path (0.16 s on the million-entry store).

Guarantee: :meth:`BesideCheck.wait` is True only when ``quick_check`` answered exactly
``ok`` (the same test as spool.Spool.attach_readonly's) and each span query gave ``spans``. A failed or unfinished check (an error,
an interruption) is False. Nothing read while the check runs is published before it passed
(the caller throws the export away and starts the attempt again the way it did before, with
the check first). Meanwhile the workers read a file SQLite has not yet checked: SQLite
treats its file as untrusted input (a damaged page is an error, SQLITE_CORRUPT, never a
crash), and a single value it reads is bounded by its length limit; the work spent on a
damaged file that way is thrown away.
"""

from __future__ import annotations

import sqlite3
import threading

from .spool import span_sql


class BesideCheck:
    """``quick_check`` of the store at ``uri`` (SQLite's read-only URI), in a daemon thread;
    ``spans``: per table, the (min rowid, max rowid, count) its span query must give."""

    def __init__(self, uri: str, spans: dict[str, tuple[int, int, int]] | None = None) -> None:
        self.uri = uri
        self.spans = dict(spans or {})
        self._done = threading.Event()
        self._sound = False
        self._stopped = False
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the check in its thread (where no thread can be started: run it here, now)."""
        thread = threading.Thread(target=self._check, name="salvage-quick-check", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # "can't start new thread"
            self._check()
        self._thread = thread

    def _check(self) -> None:
        try:
            conn = sqlite3.connect(self.uri, uri=True, check_same_thread=False)
            try:
                with self._lock:
                    self._conn = None if self._stopped else conn
                if self._conn is not None:
                    lines = [row[0] for row in conn.execute("PRAGMA quick_check(1)")]
                    self._sound = lines == ["ok"] and all(_span(conn, table) == span
                                                          for table, span in self.spans.items())
            finally:
                with self._lock:
                    self._conn = None
                conn.close()
        except Exception:  # noqa: BLE001 - any failure to finish the check is "not sound"
            self._sound = False
        finally:
            self._done.set()

    def failed(self) -> bool:
        """True once the check has finished and did not pass (no waiting)."""
        return self._done.is_set() and not self._sound

    def wait(self) -> bool:
        """Wait for the check; True when the store passed it."""
        if self._thread is None:
            self.start()
        self._done.wait()
        return self._sound and not self._stopped

    def stop(self) -> None:
        """Interrupt a running check (it then counts as failed); no waiting."""
        with self._lock:
            self._stopped = True
            if self._conn is not None:
                self._conn.interrupt()


def _span(conn: sqlite3.Connection, table: str) -> tuple[int, int, int]:
    lo, hi, count = conn.execute(span_sql(table)).fetchone()
    return lo or 0, hi or 0, count
