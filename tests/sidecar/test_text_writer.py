"""The relay's hot path writes exactly the bytes the generic notification path writes, over a
real pipe, in order with every other message."""

from __future__ import annotations

import os
import threading

import pytest
from steerable_agent_runtime.transport.base import SSEEvent
from steerable_agent_runtime.transport.jsonrpc import encode, notification_message
from steerable_agent_runtime.transport.stdio import StdioJsonRpcTransport

from tests.helpers import run

TEXTS = ["", "plain", 'quote " and \\ backslash', "tab\tnewline\ncr\r", "\x00\x1f\x7f", "é → 世界 😀",
         "\u2028\u2029", "\ud800 lone surrogate", "</script>", "x" * 70_000]


def drain(read_fd: int) -> bytes:
    os.set_blocking(read_fd, False)
    out = b""
    while True:
        try:
            piece = os.read(read_fd, 1 << 20)
        except BlockingIOError:
            return out
        if not piece:
            return out
        out += piece


@pytest.mark.parametrize("key,wire", [("delta", "delta"), ("reasoningDelta", "reasoningDelta"),
                                      ("content_delta", "delta"), ("reasoning_delta", "reasoningDelta")])
def test_text_chunk_writer_bytes_equal_the_generic_encoding(key, wire):
    """Under the wire key, or the loop's event kind (the writer is the loop's text_sink)."""
    read_fd, write_fd = os.pipe()
    try:
        os.set_blocking(write_fd, True)
        transport = StdioJsonRpcTransport(0, write_fd)
        write = transport.text_chunk_writer("st-0123456789abcdef")
        expected = b""
        for text in TEXTS[:-1]:
            write(key, text)
            expected += encode(notification_message("stream.chunk", {"streamId": "st-0123456789abcdef", wire: text}))
        transport.flush()
        got = drain(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert got == expected
    assert got.count(b"\n") == len(TEXTS) - 1 and got.isascii()


def test_fast_and_generic_notifications_keep_their_order_in_one_write():
    read_fd, write_fd = os.pipe()
    try:
        transport = StdioJsonRpcTransport(0, write_fd)

        async def mixed() -> None:
            write = transport.text_chunk_writer("st-1")
            write("delta", "a")
            await transport.emit(SSEEvent("stream.chunk", {"streamId": "st-1", "toolCall": {"id": "c"}}))
            write("reasoningDelta", TEXTS[-1])  # a long one: the pipe takes it in pieces
            transport.respond(7, {"ok": True})

        got = bytearray()

        def read() -> None:
            while got.count(b"\n") < 4 and (piece := os.read(read_fd, 1 << 20)):
                got.extend(piece)

        reader = threading.Thread(target=read)
        reader.start()
        run(mixed())  # the queued lines go out in one write when the loop iteration ends
        reader.join(30)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert got == b"".join([
        encode(notification_message("stream.chunk", {"streamId": "st-1", "delta": "a"})),
        encode(notification_message("stream.chunk", {"streamId": "st-1", "toolCall": {"id": "c"}})),
        encode(notification_message("stream.chunk", {"streamId": "st-1", "reasoningDelta": TEXTS[-1]})),
        encode({"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}),
    ])


@pytest.mark.parametrize("key", ["delta", "reasoningDelta", "content_delta", "reasoning_delta"])
def test_many_writes_the_bytes_of_one_write_per_text(key):
    """write.many(key, texts): the lines write(key, text) gives for each text, in order."""
    read_fd, write_fd = os.pipe()
    try:
        transport = StdioJsonRpcTransport(0, write_fd)
        write = transport.text_chunk_writer("st-0123456789abcdef")
        for text in TEXTS[:-1]:
            write(key, text)
        transport.flush()
        one_by_one = drain(read_fd)
        write.many(key, TEXTS[:-1])
        write.many(key, [])  # nothing
        write.many(key, ["a"])
        transport.flush()
        in_one_call = drain(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert in_one_call == one_by_one + encode(notification_message(
        "stream.chunk", {"streamId": "st-0123456789abcdef", "delta" if "elta" in key and "reason" not in key
                         else "reasoningDelta": "a"}))
