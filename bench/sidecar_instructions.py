"""The relay's user-space CPU instructions per chunk (valgrind callgrind): a figure the machine's load does not move.

    .venv/bin/python bench/sidecar_instructions.py [--chunks 20000] [--out results.json]

The sidecar's path in one process, as ``bench/sidecar_layers.py`` rebuilds it (its ``relay``
layer): StreamManager, CoreLoop with the relay's text sink, OpenAICompatProvider on a shared
httpx client, StdioJsonRpcTransport writing the notification lines to /dev/null; the model is
``python -m tests.replay_server`` in its own process (not under valgrind), replaying a
``--chunks`` chunk stream. Each count runs in a ``valgrind --tool=callgrind --instr-atstart=no``
child that switches counting on (``callgrind_control -i on``) only around the measured streams,
after two warm-up streams; two children, 1 and 3 streams, and half the difference is one stream
(start-up and imports cancel out). Needs valgrind; takes a few minutes. Instructions are not time
and exclude the kernel (the socket reads, the pipe writes): context for the timed bench, which
stays the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOW, HIGH = 1, 3


def child(url: str, streams: int) -> None:
    """Relay ``streams`` streams from ``url`` with callgrind counting only them."""
    from steerable_agent_runtime.sidecar import params
    from steerable_agent_runtime.sidecar.streams import StreamManager
    from steerable_agent_runtime.storage.memory import InMemoryStorage
    from steerable_agent_runtime.transport.stdio import StdioJsonRpcTransport

    async def go() -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        transport = StdioJsonRpcTransport(0, devnull)
        manager = StreamManager(InMemoryStorage(), notify=transport.emit, reverse=transport.request,
                                text_writer=transport.text_chunk_writer)

        async def relay(index: int) -> None:
            args = params.ChatStream.model_validate({
                "chatId": f"c{index}", "messages": [{"role": "user", "content": "go"}],
                "provider": {"kind": "openai_compat", "model": "m", "baseUrl": url + "/v1"}})
            started = await manager.start(args)
            stream = manager.running.get(started["streamId"])
            if stream is not None:
                await stream.done.wait()
            transport.flush()

        for index in range(2):  # warm: imports, the connection, the frame's code paths
            await relay(index)
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL, check=True)
        for index in range(streams):
            await relay(10 + index)
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], stdout=subprocess.DEVNULL, check=True)
        await manager.aclose()
        os.close(devnull)

    asyncio.run(go())


def count(url: str, streams: int) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runtime"), str(ROOT)])}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                           sys.executable, __file__, "--child", url, str(streams)],
                          capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from sidecar_bench import Model

    from tests.sidecar.openai_sse import text_chunks

    with tempfile.TemporaryDirectory() as tmp:
        model = Model(Path(tmp), "model", text_chunks([f"c{i} " for i in range(args.chunks)]))
        try:
            low, high = count(model.url, LOW), count(model.url, HIGH)
        finally:
            model.close()
    per_stream = (high - low) / (HIGH - LOW)
    results = {"chunks": args.chunks, "instructions_per_stream": round(per_stream),
               "instructions_per_chunk": round(per_stream / args.chunks), "counts": {LOW: low, HIGH: high}}
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
