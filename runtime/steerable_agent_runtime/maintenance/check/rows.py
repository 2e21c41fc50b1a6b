"""check's per-row pass: checksum, JSON, shape and indexed columns of every row.

One sequential scan per table (rowid order: the cheapest order SQLite can read). For each
row: the checksum of its key columns and ``CAST(data AS BLOB)`` against ``crc``
(storage/checksum.py, with the rule of the store's schema version); ``json.loads``; the cheap shape of
its entity (shapes.py); each indexed column against the JSON field it duplicates. History
rows also feed :class:`RecordStats` (versions per record), which records.py turns into the
downgrade and legacy findings. A row with a problem is counted and the scan goes on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from pydantic_core import from_json

from ...history import ENTRY_TYPES, RECORD_FORMAT_VERSION
from ...storage.checksum import IDENTITY, batch_checker, row_checker
from ...storage.schema import TableSpec
from ..codes import FindingLog
from .commonrows import COMMON, common_item, common_message
from .shapes import ROLES, SHAPES, entry_shape

Tick = Callable[[int], None]
_TICK_EVERY = 0x3FFF


@dataclass
class RecordStats:
    """What the history scan learned about record versions.

    ``versions``: entries per version; ``newer[record][v] = [count, first_seq]`` for
    versions above RECORD_FORMAT_VERSION; ``legacy[record] = [count, first_seq]`` of v1;
    ``unknown_types[record]``: entries of unknown type.
    """

    versions: Counter[int] = field(default_factory=Counter)
    newer: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    legacy: dict[str, list[int]] = field(default_factory=dict)

    def merge(self, other: "RecordStats") -> None:
        """Add everything ``other`` counted (another rowid range, or quick mode's columns)."""
        self.versions.update(other.versions)
        for record_id, versions in other.newer.items():
            mine = self.newer.setdefault(record_id, {})
            for v, (count, first) in versions.items():
                _add(mine, v, count, first)
        for record_id, (count, first) in other.legacy.items():
            _add(self.legacy, record_id, count, first)

    def note(self, record_id: str, v: int, seq: int) -> None:
        """Count one entry of version ``v`` (only newer and legacy are kept per record)."""
        self.versions[v] += 1
        seq = seq if type(seq) is int else 0  # a damaged seq column; the scan reports the row
        if v > RECORD_FORMAT_VERSION:
            _first(self.newer.setdefault(record_id, {}), v, seq)
        elif v == 1:
            _first(self.legacy, record_id, seq)


def _add(slots: dict[Any, list[int]], key: Any, count: int, first: int) -> None:
    slot = slots.setdefault(key, [0, first])
    slot[0] += count
    slot[1] = min(slot[1], first)


def _first(slots: dict[Any, list[int]], key: Any, seq: int) -> None:
    slot = slots.get(key)
    if slot is None:
        slots[key] = [1, seq]
    else:
        slot[0] += 1
        slot[1] = min(slot[1], seq)


def scan_history(conn: Any, log: FindingLog, stats: RecordStats, tick: Tick, where: str = "",
                 batched: bool = False) -> int:
    """Check every history row (``where``: a rowid range); return how many rows were read.

    The hot loop of a full check: the checksum through storage/checksum.py (rowid order keeps
    a record's rows together, so the record id's part is hashed once per record), then the
    plain-item test: a current-version ``item`` whose columns agree with its data and whose
    message is well-formed. Any other row, and every problem, goes through ``_check_entry``.

    ``batched``: read ``fetchmany`` batches, each checksummed in one call (batch_checker) and
    its common items tested by one validator call each (commonrows.common_item; any row it
    refuses takes the row-by-row test). For a table read to the end it reports what the
    row-by-row loop reports (a property test holds them equal); a read error loses the rows
    of the batch it ends, so a caller scans again row by row after any error (scan_table)."""
    version = _version(conn)
    cursor = conn.execute(f"SELECT record_id, seq, v, type, at, CAST(data AS BLOB), crc FROM history {where}")
    if batched:
        return _history_batches(_batches(cursor), batch_checker("history", version, (0, 1), 5, 6), log, stats, tick)
    return _history_rows(cursor, row_checker("history", version), log, stats, tick)


_BATCH = 128
"""Rows per ``fetchmany`` of a batched scan (~100 KB: a batch is read three times, fetch,
checksum and parse, so it must stay in a core's cache; 2,048 rows cost ~0.9 s more CPU on the
million-entry store than 64-128 beside integrity_check). It divides the tick period, so a
batched scan ticks at the same counts as a row-by-row one."""
assert (_TICK_EVERY + 1) % _BATCH == 0


def _batches(cursor: Any) -> Iterator[list[Any]]:
    return iter(lambda: cursor.fetchmany(_BATCH), [])


def _history_rows(cursor: Iterable[Any], ok: Callable[..., bool], log: FindingLog, stats: RecordStats,
                  tick: Tick) -> int:
    """The row-by-row loop: ``(record_id, seq, v, type, at, data, crc)`` rows."""
    n = plain = 0
    for row in cursor:
        n += 1
        if not n & _TICK_EVERY:
            tick(n)
        plain += _history_row(row, ok(row[0], row[1], row[5], row[6]), log, stats)
    if plain:  # no key for a version no row has (an empty table, or every row damaged)
        stats.versions[RECORD_FORMAT_VERSION] += plain
    return n


def _history_batches(batches: Iterable[list[Any]], check: Callable[[list[Any]], list[bool]], log: FindingLog,
                     stats: RecordStats, tick: Tick) -> int:
    """_history_rows over batches of rows: the common item passed by one validator call."""
    n = plain = 0
    item, current = common_item, RECORD_FORMAT_VERSION
    for rows in batches:
        for row, good in zip(rows, check(rows)):
            if good:
                try:
                    obj = item(row[5])
                except ValueError:
                    pass
                else:
                    seq = row[1]  # (only text equals the validated "at": the at column is text)
                    if (obj["seq"] == seq and obj["at"] == row[4] and row[3] == "item" and row[2] == current
                            and type(seq) is int):
                        plain += 1
                        continue
            plain += _history_row(row, good, log, stats)
        n += len(rows)
        if rows and not n & _TICK_EVERY:
            tick(n)
    if plain:
        stats.versions[RECORD_FORMAT_VERSION] += plain
    return n


def _history_row(row: Any, good: bool, log: FindingLog, stats: RecordStats) -> int:
    """One history row whose checksum test answered ``good``: 1 for a plain item (no finding),
    else 0, its findings added and its version noted."""
    record_id, seq, v_col, type_col, at_col, data, _crc = row
    if not good:
        log.add("row-checksum-mismatch", f"history record {record_id!r} seq {seq}: data bytes do not match"
                " their CRC-32", table="history", record_id=record_id, seq=seq)
        return 0
    try:
        obj = from_json(data, cache_strings="keys")
    except ValueError as exc:
        log.add("row-json-invalid", f"history record {record_id!r} seq {seq}: data is not JSON ({exc})",
                table="history", record_id=record_id, seq=seq)
        return 0
    if (type(obj) is dict and type_col == "item" and v_col == RECORD_FORMAT_VERSION and obj.get("v") == v_col
            and obj.get("type") == "item" and obj.get("seq") == seq and obj.get("at") == at_col
            and type(seq) is int and type(at_col) is str):
        msg = obj.get("message")
        if type(msg) is dict and type(role := msg.get("role")) is str and role in ROLES:
            content = msg.get("content")
            if content is None or type(content) is str or type(content) is list:
                return 1
    _check_entry(obj, (record_id, seq, v_col, type_col, at_col), log, stats)
    return 0


def _check_entry(obj: Any, row: tuple[Any, ...], log: FindingLog, stats: RecordStats) -> None:
    record_id, seq = row[0], row[1]
    where = {"table": "history", "record_id": record_id, "seq": seq}
    v = obj.get("v", 1) if type(obj) is dict else None
    if type(v) is not int or v < 1:
        log.add("row-invalid", f"history record {record_id!r} seq {seq}: not an entry object with a"
                f" positive integer version (v={v!r})", **where)
        return
    if (obj.get("seq"), v, obj.get("type"), obj.get("at")) != row[1:]:
        log.add("row-column-mismatch", f"history record {record_id!r} seq {seq}: {_entry_column_mismatch(obj, v, row)}",
                **where)
    stats.note(record_id, v, seq)
    if v > RECORD_FORMAT_VERSION:
        return
    if type(obj.get("type")) is not str:  # no build writes such a type: damage, not a newer entry
        log.add("row-invalid", f"history record {record_id!r} seq {seq}: entry type {obj.get('type')!r} is not"
                " text", **where)
        return
    if obj.get("type") not in ENTRY_TYPES:
        log.add("record-unknown-type", f"history record {record_id!r} seq {seq}: unknown entry type"
                f" {obj.get('type')!r} (v{v}); the entry is intact", **where)
        return
    problem = entry_shape(obj)
    if problem is not None:
        log.add("row-invalid", f"history record {record_id!r} seq {seq}: {problem}", **where)


def _entry_column_mismatch(obj: dict[str, Any], v: int, row: tuple[Any, ...]) -> str:
    _, seq, v_col, type_col, at_col = row
    for column, stored, in_data in (("seq", seq, obj.get("seq")), ("v", v_col, v),
                                    ("type", type_col, obj.get("type")), ("at", at_col, obj.get("at"))):
        if stored != in_data:
            return f"column {column} = {stored!r} but data says {in_data!r}"
    return "columns disagree with data"


def scan_entities(conn: Any, spec: TableSpec, log: FindingLog, tick: Tick, where: str = "",
                  batched: bool = False) -> int:
    """Check every row of a non-history table (``where``: a rowid range); return how many rows were read.

    Each column is fetched once (the key, the indexed columns and the identity overlap:
    ``messages`` reads id, chat_id, created_at, data, crc), and a row is rebuilt in the
    (key, indexed columns..., data, crc) order of the findings only when it has a problem.
    ``messages`` (as many rows as history) takes :func:`_scan_messages`' loop, with the same
    findings; ``batched`` as scan_history's (for messages: :func:`_message_batches`, for the
    other tables :func:`_entity_batches`)."""
    version = _version(conn)
    row = _EntityRow(spec, log, row_checker(spec.name, version))
    sql = f"SELECT CAST(data AS BLOB), crc, {', '.join(row.selected)} FROM {spec.name} {where}"
    if row.messages_loop:
        cursor = conn.execute(sql)
        if batched:
            return _message_batches(_batches(cursor), batch_checker("messages", version, (2,), 0, 1), row, tick)
        return _scan_messages(cursor, row, tick)
    if batched and spec.name in COMMON:
        identity = (row.first_at,) if row.single else (row.first_at, row.second_at)
        return _entity_batches(_batches(conn.execute(sql)), batch_checker(spec.name, version, identity, 0, 1), row,
                               COMMON[spec.name], tick)
    check, n = row.check, 0
    for whole in conn.execute(sql):
        n += 1
        if not n & _TICK_EVERY:
            tick(n)
        check(whole)
    return n


def _entity_batches(batches: Iterable[list[Any]], check: Callable[[list[Any]], list[bool]], row: "_EntityRow",
                    common: Callable[[Any], dict[str, Any]], tick: Tick) -> int:
    """The general per-row check over batches of rows ``(data, crc, *selected)``: a row whose
    checksum is right, whose JSON ``common`` accepts (commonrows.COMMON: its shape passes) and
    whose duplicated fields equal its columns passes here, as the general check would pass
    it; any other row goes through that check (so the findings are its own)."""
    names, columns, general, n = row.names, row.get_columns, row.check, 0
    for rows in batches:
        for whole, good in zip(rows, check(rows)):
            if good:
                try:
                    obj = common(whole[0])
                except ValueError:
                    pass
                else:
                    if tuple(map(obj.get, names)) == columns(whole):
                        continue
            general(whole)
        n += len(rows)
        if rows and not n & _TICK_EVERY:
            tick(n)
    return n


_MESSAGE_COLUMNS = {"id": "id", "chat_id": "chatId", "created_at": "createdAt"}
"""The messages columns _scan_messages is written for (its identity is ``id`` alone); a spec
that differs takes the general loop."""


def _scan_messages(cursor: Any, row: "_EntityRow", tick: Tick) -> int:
    """messages' rows ``(data, crc, id, chat_id, created_at)``: the usual row (checksum right,
    a JSON object whose id, chatId and createdAt equal the columns, all text, its content text
    and its role a chat role) is passed inline; any other row goes through the general
    per-row check (:class:`_EntityRow`), so the findings are the general loop's."""
    ok, n = row.ok, 0
    for whole in cursor:
        n += 1
        if not n & _TICK_EVERY:
            tick(n)
        _message_row(whole, type(whole[0]) is bytes and type(whole[2]) is str and ok(whole[2], whole[0], whole[1]),
                     row)
    return n


def _message_batches(batches: Iterable[list[Any]], check: Callable[[list[Any]], list[bool]], row: "_EntityRow",
                     tick: Tick) -> int:
    """_scan_messages over batches of rows: the common message passed by one validator call."""
    message, n = common_message, 0
    for rows in batches:
        for whole, good in zip(rows, check(rows)):
            if good:
                try:
                    obj = message(whole[0])
                except ValueError:
                    pass
                else:
                    # (only text equals the validated text: the columns are text)
                    if obj["id"] == whole[2] and obj["chatId"] == whole[3] and obj["createdAt"] == whole[4]:
                        continue
            _message_row(whole, good, row)
        n += len(rows)
        if rows and not n & _TICK_EVERY:
            tick(n)
    return n


def _message_row(whole: Any, good: bool, row: "_EntityRow") -> None:
    """One messages row whose checksum test answered ``good``: the usual row passes inline,
    any other goes through the general check."""
    data, _crc, key, chat_id, created_at = whole
    if good and type(data) is bytes and type(key) is str:
        try:
            obj = from_json(data, cache_strings="keys")
        except ValueError:
            obj = None
        if (type(obj) is dict and obj.get("id") == key and obj.get("chatId") == chat_id
                and obj.get("createdAt") == created_at and type(chat_id) is str and type(created_at) is str
                and type(obj.get("content")) is str and type(role := obj.get("role")) is str and role in ROLES):
            return
    row.check(whole)


class _EntityRow:
    """The general per-row check of a non-history table: checksum, JSON, shape, indexed columns."""

    def __init__(self, spec: TableSpec, log: FindingLog, ok: Callable[..., bool]) -> None:
        pairs = [(c, f) for c, f in spec.columns.items() if f]
        identity, key = IDENTITY[spec.name], spec.key[0]
        self.selected = list(dict.fromkeys([key, *(c for c, _ in pairs), *identity]))
        """The columns fetched after ``CAST(data AS BLOB), crc``, each once."""
        at = {c: i + 2 for i, c in enumerate(self.selected)}  # after data and crc
        self.ok, self.log, self.pairs, self.table = ok, log, pairs, spec.name
        self.names = [f for _, f in pairs]
        self.key_at, self.shape = at[key], SHAPES[spec.name]
        self.get_columns = _columns_of([at[c] for c, _ in pairs])
        self.single = len(identity) == 1
        self.first_at, self.second_at = at[identity[0]], at[identity[-1]]  # IDENTITY has one or two columns
        self.messages_loop = (spec.name == "messages" and self.selected == list(_MESSAGE_COLUMNS)
                              and self.names == list(_MESSAGE_COLUMNS.values()))
        """Whether _scan_messages' loop fits this table's rows."""

    def check(self, whole: tuple[Any, ...]) -> None:
        """Add the findings of one fetched row ``(data, crc, *selected)``."""
        table, log, key_at = self.table, self.log, self.key_at
        if not (self.ok(whole[self.first_at], whole[0], whole[1]) if self.single
                else self.ok(whole[self.first_at], whole[self.second_at], whole[0], whole[1])):
            log.add("row-checksum-mismatch", f"{table} {whole[key_at]!r}: data bytes do not match their CRC-32",
                    table=table, key=str(whole[key_at]))
            return
        try:
            obj = from_json(whole[0], cache_strings="keys")
        except ValueError as exc:
            log.add("row-json-invalid", f"{table} {whole[key_at]!r}: data is not JSON ({exc})",
                    table=table, key=str(whole[key_at]))
            return
        problem = self.shape(obj) if type(obj) is dict else "data is not a JSON object"
        if problem is not None:
            log.add("row-invalid", f"{table} {whole[key_at]!r}: {problem}", table=table, key=str(whole[key_at]))
        elif tuple(map(obj.get, self.names)) != self.get_columns(whole):
            _column_finding(table, (whole[key_at], *self.get_columns(whole)), self.pairs, obj, log)


def _columns_of(indices: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """The values at ``indices`` of a fetched row, as a tuple (operator.itemgetter, in C)."""
    if len(indices) == 1:
        only = indices[0]
        return lambda row: (row[only],)
    return itemgetter(*indices)


def _version(conn: Any) -> int:
    """The store's schema version: its rows' checksum rule (storage/checksum.py)."""
    return conn.execute("PRAGMA user_version").fetchone()[0]


def _column_finding(table: str, row: tuple[Any, ...], pairs: list[tuple[str, str]], obj: dict[str, Any],
                    log: FindingLog) -> None:
    for (column, name), stored in zip(pairs, row[1:]):
        if stored != obj.get(name):
            log.add("row-column-mismatch", f"{table} {row[0]!r}: column {column} = {stored!r} but data"
                    f" says {obj.get(name)!r}", table=table, key=str(row[0]))
            return
