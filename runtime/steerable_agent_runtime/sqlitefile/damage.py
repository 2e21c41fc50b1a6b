"""Every kind of damage the reader counts (``SqliteFile.damage``, ``WalScan.damage``), with
what it means. The reader only counts codes listed here (a test reads the source to prove it);
maintenance/codes.py turns each into salvage's finding code ``salvage-<code with dashes>``."""

from __future__ import annotations

DAMAGE: dict[str, str] = {
    "db_header_damaged": "the 100-byte database header is unreadable or not SQLite's; the page size was inferred",
    "db_header_layout_wrong": "the header's page layout fields are impossible; they were ignored",
    "btree_page_malformed": "a b-tree page whose header or cell area is not a b-tree's",
    "leaf_page_malformed": "a table leaf page whose header or cell area is not a leaf's",
    "pointer_out_of_range": "a child page pointer points past the end of the file",
    "page_reached_twice": "a page is reached twice in one b-tree walk (a cycle or a shared page)",
    "page_missing": "a page a b-tree points to is past the end of the file (truncated)",
    "cell_pointer_out_of_range": "a cell pointer points outside its page",
    "cell_undecodable": "a cell whose record header or payload does not decode",
    "btree_page_wrong_kind": "a page of a table's tree is an index page (or the reverse)",
    "cell_pointer_repeated": "a page's cell pointers repeat",
    "cell_pointers_overlap": "a page's cell pointers overlap",
    "record_not_of_its_table": "a table's tree holds records of another table's shape",
    "overflow_chain_broken": "a row's overflow page chain ends early or points outside the file",
    "overflow_page_shared": "an overflow page is reached twice in one walk (by two cells, another tree, or a"
                            " cycle); it was read once",
    "freelist_trunk_broken": "a freelist trunk page points outside the file or loops",
    "freelist_leaf_invalid": "a freelist leaf page number is outside the file",
    "schema_row_undecodable": "a row of sqlite_schema does not decode",
    "wal_header_unreadable": "the -wal is shorter than its 32-byte header",
    "wal_header_damaged": "the -wal header's magic or checksum is wrong; frames were checked one by one",
    "wal_page_size_mismatch": "the -wal's page size is not the database's; the -wal was ignored",
    "wal_frame_checksum_mismatch": "a -wal frame fails its checksum while a later commit of its generation follows:"
                                   " committed transactions after it are cut off",
    "wal_frame_stale_salt": "-wal frames of an earlier generation (a reused -wal after a checkpoint): not data",
    "wal_torn_tail": "uncommitted -wal frames at the end (a writer died mid-transaction): nothing committed is lost",
}

BENIGN: frozenset[str] = frozenset({"wal_frame_stale_salt", "wal_torn_tail"})
"""Not damage: what a reused -wal holds past its new frames, and a dead writer's uncommitted frames."""

__all__ = ["BENIGN", "DAMAGE"]
