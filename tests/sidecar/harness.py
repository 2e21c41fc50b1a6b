"""A real sidecar child process driven over its pipes (the host side of the protocol).

Every stdout line is parsed as it arrives; a line that is not a JSON-RPC message lands in
``bad_lines`` (tests assert it stays empty). Reverse requests (tool.invoke,
approval.request) are answered by ``on_reverse(method, params) -> result`` in a thread.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

READY = "__SIDECAR_READY__"
ROOT = Path(__file__).resolve().parents[2]


class RpcFailed(AssertionError):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error
        self.code = error.get("code")


class Sidecar:
    """``python -m steerable_agent_runtime.sidecar ARGS`` with pipes on all three streams."""

    def __init__(self, *args: str, env: dict[str, str] | None = None,
                 on_reverse: Callable[[str, dict[str, Any]], Any] | None = None) -> None:
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "steerable_agent_runtime.sidecar", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env, cwd=ROOT)
        self.on_reverse = on_reverse
        self.lines: list[bytes] = []
        self.bad_lines: list[bytes] = []
        self.responses: dict[Any, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.reverse_requests: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self._cond = threading.Condition()
        self._next_id = 0
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # reading ---------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            try:
                msg = json.loads(line)
                assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"
            except (ValueError, AssertionError):
                self.bad_lines.append(line)
                continue
            self._route(msg)
        with self._cond:
            self._cond.notify_all()

    def _route(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            self.reverse_requests.append(msg)
            threading.Thread(target=self._answer, args=(msg,), daemon=True).start()
            return
        with self._cond:
            if "method" in msg:
                self.notifications.append(msg)
            else:
                self.responses[msg.get("id")] = msg
            self._cond.notify_all()

    def _answer(self, msg: dict[str, Any]) -> None:
        if self.on_reverse is None:
            return
        try:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": self.on_reverse(msg["method"], msg["params"])}
        except NoAnswer:
            return
        except Exception as exc:  # noqa: BLE001 - the host's tool failed: an error answer
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32000, "message": str(exc)}}
        self.send(reply)

    def _read_stderr(self) -> None:
        for raw in self.proc.stderr:
            with self._cond:
                self.stderr_lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cond.notify_all()

    def wait(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a condition") -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}; stderr:\n" + "\n".join(self.stderr_lines[-30:]))
                self._cond.wait(min(left, 0.2))

    def wait_ready(self, timeout: float = 20.0) -> dict[str, Any]:
        line = self.wait(lambda: next((l for l in self.stderr_lines if l.startswith(READY)), None), timeout, "ready")
        self.wait(lambda: self.notifications_of("lifecycle.ready"), timeout, "lifecycle.ready")
        return json.loads(line[len(READY):])

    def notifications_of(self, method: str, stream_id: str | None = None) -> list[dict[str, Any]]:
        return [n["params"] for n in list(self.notifications) if n["method"] == method
                and (stream_id is None or n["params"].get("streamId") == stream_id)]

    def wait_done(self, stream_id: str, timeout: float = 30.0) -> dict[str, Any]:
        found = self.wait(lambda: self.notifications_of("stream.done", stream_id), timeout, f"stream.done of {stream_id}")
        return found[0]

    # writing ---------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: Any = None, *, timeout: float = 20.0, rid: Any = None) -> dict[str, Any]:
        if rid is None:
            self._next_id += 1
            rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait(lambda: self.responses.get(rid), timeout, f"the answer to {method}")

    def call(self, method: str, params: Any = None, **kwargs: Any) -> Any:
        response = self.request(method, params, **kwargs)
        if "error" in response:
            raise RpcFailed(response["error"])
        return response["result"]

    # ending ----------------------------------------------------------------------------
    def close_stdin(self) -> None:
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def exit_code(self, timeout: float = 30.0) -> int:
        code = self.proc.wait(timeout)
        self.wait(lambda: True)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class NoAnswer(Exception):
    """Raised by an on_reverse handler that wants the request left unanswered."""
