"""The sidecar's stderr logging, which never holds the protocol up.

A host may never read the sidecar's stderr (it waits for ``lifecycle.ready`` on stdout
instead). A plain StreamHandler would then block the event loop in a write once the pipe is
full (~64 KiB of log lines), and with it every answer and even the shutdown.

Guarantees:
- ``emit`` never blocks: lines go to a bounded queue that a daemon thread writes to the
  descriptor; when the queue is full the line is dropped and counted, and the next line that
  gets out says how many were dropped.
- ``drain(timeout)`` waits (at most ``timeout`` seconds) until what is queued was written: the
  sidecar calls it before it exits so its last lines are not lost when stderr is read.
- A closed or broken stderr drops lines silently (nowhere to report them).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time


class StderrSink(logging.Handler):
    """A logging handler writing to ``fd`` (stderr) from its own thread; see the module."""

    def __init__(self, fd: int = 2, *, capacity: int = 2000) -> None:
        super().__init__()
        self._fd = fd
        self._lines: queue.Queue[str] = queue.Queue(maxsize=capacity)
        self._dropped = 0
        threading.Thread(target=self._write_lines, name="stderr-log", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # noqa: BLE001 - a bad log call must not break the caller
            self.handleError(record)
            return
        self.write_line(line)

    def write_line(self, line: str) -> None:
        """Queue one line (without its newline) for stderr; dropped and counted when full."""
        try:
            self._lines.put_nowait(line + "\n")
        except queue.Full:
            self._dropped += 1

    def drain(self, timeout: float) -> bool:
        """Wait until the queued lines were written, at most ``timeout`` s; whether they were."""
        if self._dropped:
            self.write_line("steerable-sidecar: (end of log)")  # carries the count of dropped lines out
        deadline = time.monotonic() + timeout
        while self._lines.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._lines.unfinished_tasks

    def _write_lines(self) -> None:
        while True:
            line = self._lines.get()
            dropped, self._dropped = self._dropped, 0
            if dropped:
                line = f"steerable-sidecar: {dropped} log lines were dropped: nobody read stderr\n" + line
            data = line.encode("utf-8", "backslashreplace")
            try:
                while data:
                    data = data[os.write(self._fd, data):]
            except OSError:
                pass
            finally:
                self._lines.task_done()
