"""A pure-Python reader of the SQLite file format, for damaged files.

A leaf package: it imports nothing else of steerable_agent_runtime. :mod:`.pages` reads the
file (overlaid with the committed frames of its WAL, :mod:`.wal`), :mod:`.btree` walks trees,
the freelist and loose pages, :mod:`.record` decodes varints and cell records.
"""

from importlib import import_module
from typing import Any

_WHERE = {"Cell": "btree", "leaf_cells": "btree", "loose_leaf_pages": "btree", "read_schema": "btree",
          "walk_freelist": "btree", "walk_tree": "btree", "SqliteFile": "pages", "detect_page_size": "pages",
          "decode_record": "record", "read_varint": "record", "WalScan": "wal", "scan_wal": "wal",
          "wal_checksum": "wal"}
"""Each public name's module. They are imported on first use: the store opener needs only
:mod:`.pinned` (a process that never reads a damaged file, the sidecar, skips the reader)."""

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
