"""``steerable-sidecar`` / ``python -m steerable_agent_runtime.sidecar``: parse, open, serve, exit.

Exit codes: 0 after a shutdown (system.shutdown, SIGTERM or SIGINT, also one that came while it
was starting, stdin EOF, the host closing stdout); 2 bad arguments; 3 the
store cannot be opened (a held lease: the StoreAlreadyOwnedError message on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sys
from pathlib import Path
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
    args = parser.parse_args(argv)
    if args.storage_path is not None and not Path(args.storage_path).name:
        parser.error(f"--storage-path {args.storage_path!r} names no file: pass the database file, e.g. sessions.db")
    return args


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


async def serve(storage: Any, proto_fd: int, info: dict[str, Any], say: Any = None) -> None:
    """Serve on stdin and ``proto_fd`` until a shutdown; ``say(line)`` writes the ready line to
    stderr (default: sys.stderr)."""
    from ..transport.stdio import SHUTDOWN_WRITE_WAIT_S, StdioJsonRpcTransport
    from .app import Sidecar

    transport = StdioJsonRpcTransport(0, proto_fd)
    sidecar = Sidecar(storage, transport, info=info)
    loop = asyncio.get_running_loop()

    def on_signal(signum: int, frame: Any) -> None:
        # a plain handler, not loop.add_signal_handler: it runs even while a write waits for a
        # host that does not read, and bounds that wait so the shutdown goes ahead
        transport.limit_writes(SHUTDOWN_WRITE_WAIT_S)
        loop.call_soon_threadsafe(sidecar.stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    if _EARLY_SIGNALS:  # asked to stop while it was starting: a clean shutdown right away
        sidecar.stop.set()
    ready = f"{READY_MARKER} {json.dumps(sidecar.info, separators=(',', ':'))}"
    if say is not None:
        say(ready)
    else:
        sys.stderr.write(ready + "\n")
        sys.stderr.flush()
    await sidecar.serve()


_EARLY_SIGNALS: list[int] = []


def _remember_signal(signum: int, frame: Any) -> None:
    _EARLY_SIGNALS.append(signum)


def main(argv: list[str] | None = None) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):  # a stop asked for while starting: honoured once up
        signal.signal(sig, _remember_signal)
    args = parse_args(argv)
    from .logsink import StderrSink

    sink = StderrSink(2)  # never blocks: a host may never read stderr
    sink.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[sink])
    try:
        return _run(args, sink)
    finally:
        sink.drain(1.0)  # the last lines out, if anyone reads them
        # The process ends here (main owns it: signals, fd 1). Everything is closed, so the
        # interpreter's final garbage collection frees nothing that matters, and over the
        # objects pydantic and the loop leave it costs ~0.3 s of every exit (a host waiting
        # for the sidecar to stop, a test): leave them to the exit itself.
        gc.freeze()


def _run(args: argparse.Namespace, sink: Any) -> int:
    proto_fd = take_stdout()
    from ..errors import SteerableError

    if args.storage_path is not None:
        # the store is the real file (storagePath reports it; the lease follows it too, lock_path_for)
        args.storage_path = os.path.realpath(args.storage_path)
        try:
            args.storage_path.encode("utf-8")
        except UnicodeEncodeError:  # SQLite opens by a UTF-8 URI: refused before a file is made
            shown = args.storage_path.encode("utf-8", "backslashreplace").decode()
            sys.stderr.write(f"steerable-sidecar: error: {shown}: the store's path is not valid UTF-8\n"
                             "steerable-sidecar: hint: keep the store at a path whose every name is UTF-8"
                             " (rename the file or folder)\n")
            return 3
    try:
        storage = open_storage(args.storage_path)
    except SteerableError as exc:
        sys.stderr.write(f"steerable-sidecar: error: {exc.message}\nsteerable-sidecar: hint: {exc.hint}\n")
        return 3
    except Exception as exc:  # noqa: BLE001 - never a traceback for a store that cannot be opened
        logging.getLogger("steerable.sidecar").debug("opening the store failed", exc_info=exc)
        sys.stderr.write(f"steerable-sidecar: error: {args.storage_path}: cannot open the store ({type(exc).__name__}: {exc})\n"
                         "steerable-sidecar: hint: check the path; if it is right, report this with --log-level debug output\n")
        return 3
    if _EARLY_SIGNALS:  # asked to stop while the store was opening: close it, exit 0
        asyncio.run(storage.close())
        return 0
    info = {"protocol": "jsonrpc-2.0", "storage": "sqlite" if args.storage_path else "memory",
            "storagePath": os.path.abspath(args.storage_path) if args.storage_path else None}
    asyncio.run(serve(storage, proto_fd, info, say=sink.write_line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
