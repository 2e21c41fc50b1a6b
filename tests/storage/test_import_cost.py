"""The store's opener stays cheap to import: the pure-Python page reader (sqlitefile's btree,
pages, record, wal) is loaded only by the jobs that read a damaged file, never by a process that
only opens stores (the sidecar's cold start). Not a timing: which modules the import loads."""

from __future__ import annotations

from tests.llm.test_import_cost import loaded_after

READER = {f"steerable_agent_runtime.sqlitefile.{name}" for name in ("btree", "pages", "record", "wal")}


def test_the_store_opener_does_not_load_the_page_reader():
    mods = loaded_after("import steerable_agent_runtime.storage.sqlite, steerable_agent_runtime.sidecar")
    assert "steerable_agent_runtime.sqlitefile.pinned" in mods
    assert not READER & mods, READER & mods


def test_the_page_readers_names_still_resolve_from_the_package():
    mods = loaded_after("from steerable_agent_runtime.sqlitefile import SqliteFile, scan_wal, walk_tree, read_varint\n"
                        "import steerable_agent_runtime.sqlitefile as f\n"
                        "assert f.Cell is f.btree.Cell and f.WalScan is f.wal.WalScan\n"
                        "try:\n    f.nothing\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)")
    assert READER <= mods
