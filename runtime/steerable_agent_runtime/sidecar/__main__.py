"""``steerable-sidecar`` / ``python -m steerable_agent_runtime.sidecar``: parse, open, serve, exit.

Exit codes: 0 after a shutdown (system.shutdown, SIGTERM, stdin EOF); 2 bad arguments; 3 the
store cannot be opened (a held lease: the StoreAlreadyOwnedError message on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

READY_MARKER = "__SIDECAR_READY__"
LEVELS = ("debug", "info", "warning", "error")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="steerable-sidecar",
                                     description="The agent runtime as a JSON-RPC 2.0 sidecar on stdin/stdout.")
    parser.add_argument("--storage-path", metavar="PATH",
                        help="a SqliteStorage file (takes its write lease); default: in memory, lost at exit")
    parser.add_argument("--log-level", default="warning", type=str.lower, choices=LEVELS,
                        help="stderr log level (default: warning)")
    return parser.parse_args(argv)


def take_stdout() -> int:
    """Keep the real stdout for the protocol only: return a private copy of fd 1 and point
    fd 1 (and sys.stdout) at stderr, so a stray print or a C library's write cannot
    corrupt the protocol stream."""
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_fd


def open_storage(path: str | None) -> Any:
    if path is None:
        from ..storage.memory import InMemoryStorage

        return InMemoryStorage()
    from ..storage.sqlite import SqliteStorage

    return SqliteStorage(path)


async def serve(storage: Any, proto_fd: int, info: dict[str, Any]) -> None:
    from ..transport.stdio import StdioJsonRpcTransport
    from .app import Sidecar

    transport = StdioJsonRpcTransport(0, proto_fd)
    sidecar = Sidecar(storage, transport, info=info)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, sidecar.stop.set)
    sys.stderr.write(f"{READY_MARKER} {json.dumps(sidecar.info, separators=(',', ':'))}\n")
    sys.stderr.flush()
    await sidecar.serve()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    proto_fd = take_stdout()
    from ..errors import SteerableError

    try:
        storage = open_storage(args.storage_path)
    except SteerableError as exc:
        sys.stderr.write(f"steerable-sidecar: error: {exc.message}\nsteerable-sidecar: hint: {exc.hint}\n")
        return 3
    info = {"protocol": "jsonrpc-2.0", "storage": "sqlite" if args.storage_path else "memory",
            "storagePath": os.path.abspath(args.storage_path) if args.storage_path else None}
    asyncio.run(serve(storage, proto_fd, info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
