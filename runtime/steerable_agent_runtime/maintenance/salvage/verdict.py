"""SQLite's verdict on a store (``PRAGMA quick_check``) taken in a thread beside the export.

On a big healthy store the check and the export each read the whole file; run one after the
other, the check holds one core while the other idles. A parallel export (:mod:`.parallel`)
starts this check in a thread of the parent once its worker processes are forked (never
before: forking copies only the forking thread), so the check shares the two cores with the
workers (the sqlite3 module releases the GIL while the check runs).

Guarantee: :meth:`BesideCheck.wait` is True only when ``quick_check`` answered exactly
``ok``: the same test as spool.Spool.attach_readonly's. A failed or unfinished check (an error,
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


class BesideCheck:
    """``quick_check`` of the store at ``uri`` (SQLite's read-only URI), in a daemon thread."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
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
                    self._sound = lines == ["ok"]
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
