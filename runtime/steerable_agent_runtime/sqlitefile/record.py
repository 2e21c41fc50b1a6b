"""Varints, record serial types and cell payload sizes of the SQLite file format.

Pure functions over ``bytes``; nothing here reads a file. Every decoder is total: on
malformed input it returns ``None`` (or raises nothing), so callers count damage instead of
catching exceptions. Reference: https://www.sqlite.org/fileformat2.html, sections 1.6
(b-tree pages, overflow) and 2.1 (record format).
"""

from __future__ import annotations

import struct
from typing import Any

_FLOAT = struct.Struct(">d")


def read_varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    """Decode the big-endian varint at ``buf[pos]``; return (value, next_pos) or None if cut off.

    A varint is 1-9 bytes: the high bit of the first eight marks continuation, the ninth
    contributes all eight bits. Values are returned as signed 64-bit, as SQLite stores them.
    """
    if pos < len(buf) and buf[pos] < 0x80:  # one byte: most serial types and sizes
        return buf[pos], pos + 1
    value = 0
    for i in range(8):
        if pos + i >= len(buf):
            return None
        byte = buf[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return _signed64(value), pos + i + 1
    if pos + 8 >= len(buf):
        return None
    value = (value << 8) | buf[pos + 8]
    return _signed64(value), pos + 9


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def serial_size(serial: int) -> int | None:
    """Bytes a value of serial type ``serial`` occupies in a record body (None: reserved type)."""
    if serial < 0 or serial in (10, 11):
        return None
    if serial >= 12:
        return (serial - 12) // 2 if serial % 2 == 0 else (serial - 13) // 2
    return (0, 1, 2, 3, 4, 6, 8, 8, 0, 0)[serial]


def decode_value(serial: int, raw: bytes) -> Any:
    """The Python value of one field: None, int, float, bytes (blob) or bytes (text, raw UTF-8).

    Text is returned as raw bytes, tagged by the caller through the serial type, so a
    damaged string is reported as found rather than re-encoded.
    """
    if serial == 0:
        return None
    if 1 <= serial <= 6:
        return int.from_bytes(raw, "big", signed=True)
    if serial == 7:
        return _FLOAT.unpack(raw)[0]
    if serial in (8, 9):
        return serial - 8
    return bytes(raw)


def decode_record(payload: bytes) -> list[tuple[int, Any]] | None:
    """Split a record into (serial type, value) pairs; None if the header or body is inconsistent.

    The header is a varint header size, then one serial-type varint per column; the body
    holds the values in order. A record whose header runs past the payload, declares a
    reserved type, or whose values do not fit the payload exactly is malformed.
    """
    first = read_varint(payload, 0)
    if first is None or first[0] < first[1] or first[0] > len(payload):
        return None
    header_end, pos = first[0], first[1]
    serials: list[int] = []
    while pos < header_end:
        byte = payload[pos]
        if byte < 0x80 and byte not in (10, 11):  # a one-byte serial type (most are)
            serials.append(byte)
            pos += 1
            continue
        item = read_varint(payload, pos)
        if item is None or item[1] > header_end or serial_size(item[0]) is None:
            return None
        serials.append(item[0])
        pos = item[1]
    return _decode_body(payload, header_end, serials)


def _decode_body(payload: bytes, pos: int, serials: list[int]) -> list[tuple[int, Any]] | None:
    fields: list[tuple[int, Any]] = []
    for serial in serials:
        size = serial_size(serial) or 0
        if pos + size > len(payload):
            return None
        fields.append((serial, decode_value(serial, payload[pos:pos + size])))
        pos += size
    return fields if pos == len(payload) else None


def is_text(serial: int) -> bool:
    """Whether a serial type holds text (odd and at least 13)."""
    return serial >= 13 and serial % 2 == 1


def local_payload_size(payload_size: int, usable: int, *, table_leaf: bool) -> int:
    """How many payload bytes a cell keeps on its own page; the rest spills to overflow pages.

    fileformat2 section 1.6: X = U-35 for table leaves, ((U-12)*64/255)-23 for index
    cells; M = ((U-12)*32/255)-23; K = M+((P-M) % (U-4)); local = P if P <= X, else K if
    K <= X, else M.
    """
    max_local = usable - 35 if table_leaf else ((usable - 12) * 64 // 255) - 23
    if payload_size <= max_local:
        return payload_size
    min_local = ((usable - 12) * 32 // 255) - 23
    k = min_local + (payload_size - min_local) % (usable - 4)
    return k if k <= max_local else min_local
