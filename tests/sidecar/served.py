"""create_app served by a real uvicorn on 127.0.0.1 (an ephemeral port) in a thread, and an
SSE frame reader for httpx responses."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


class Served:
    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("uvicorn did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)


def sse_frames(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Frames of an SSE body: {"event", "id", "data"} per event, {"comment": text} per comment."""
    frame: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if frame:
                yield frame
                frame = {}
            continue
        if line.startswith(":"):
            yield {"comment": line[1:].strip()}
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        frame[key] = json.loads(value) if key == "data" else value
    if frame:
        yield frame
