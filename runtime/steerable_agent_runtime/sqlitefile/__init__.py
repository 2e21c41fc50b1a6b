"""A pure-Python reader of the SQLite file format, for damaged files.

A leaf package: it imports nothing else of steerable_agent_runtime. :mod:`.pages` reads the
file (overlaid with the committed frames of its WAL, :mod:`.wal`), :mod:`.btree` walks trees,
the freelist and loose pages, :mod:`.record` decodes varints and cell records.
"""

from .btree import Cell, leaf_cells, loose_leaf_pages, read_schema, walk_freelist, walk_tree
from .pages import SqliteFile, detect_page_size
from .record import decode_record, read_varint
from .wal import WalScan, scan_wal, wal_checksum

__all__ = ["Cell", "SqliteFile", "WalScan", "decode_record", "detect_page_size", "leaf_cells", "loose_leaf_pages",
           "read_schema", "read_varint", "scan_wal", "walk_freelist", "walk_tree", "wal_checksum"]
