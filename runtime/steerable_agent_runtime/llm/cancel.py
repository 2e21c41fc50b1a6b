"""Cancelling a provider's stream at once, also while the server sends nothing.

A caller hands ``provider.stream(..., cancel=signal)`` a :class:`CancelSignal`; ``signal.set()``
ends the stream promptly wherever it waits: for the response headers, for the next bytes of a
silent body, for an error body. CoreLoop makes one per turn and sets it in ``cancel()``.

Guarantees (every HTTP provider: they all read through :func:`.http.stream_sse_batches`):
- ``set()`` while the stream waits on the network: the wait is interrupted (the reading task
  is cancelled at that await, as a timeout would, and the cancellation withdrawn), the HTTP
  response and its connection are closed, and the stream raises :class:`StreamCancelled`.
  What it yielded before stands; a tool call whose arguments were still arriving is dropped
  (calls are only yielded whole).
- ``set()`` while the caller holds a chunk (the stream is not waiting): the stream raises
  StreamCancelled instead of reading again. A signal already set when the stream starts
  sends nothing.
- A cancellation of the reading task by anyone else is not swallowed: it propagates as
  ``asyncio.CancelledError`` (also when the signal was set at the same time).
- A signal that is never set costs a stream a few attribute stores per network read, never a
  task or a timer; without a signal the read path is unchanged.
- ``set()`` may be called from any thread, once or many times (only the first acts).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["CancelSignal", "StreamCancelled"]


class StreamCancelled(Exception):
    """Raised out of ``provider.stream`` when its :class:`CancelSignal` was set: the stream
    ended there and its response is closed. Not an error of the request (not an LLMError)."""


class CancelSignal:
    """A one-shot request to stop the streams watching it (see the module docstring)."""

    __slots__ = ("_set", "_watchers", "_lock")

    def __init__(self) -> None:
        self._set = False
        self._watchers: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Stop every stream watching this signal (and every later one). Idempotent; any thread."""
        with self._lock:
            if self._set:
                return
            self._set = True
            watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher()

    def watch(self, watcher: Callable[[], None]) -> bool:
        """Call ``watcher()`` (once) when the signal is set; False, and no call, when it already is."""
        with self._lock:
            if self._set:
                return False
            self._watchers.append(watcher)
            return True

    def unwatch(self, watcher: Callable[[], None]) -> None:
        """Forget ``watcher`` (a stream that ended); nothing when it is not watching."""
        with self._lock:
            try:
                self._watchers.remove(watcher)
            except ValueError:
                pass
