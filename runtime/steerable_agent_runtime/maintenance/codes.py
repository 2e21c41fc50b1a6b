"""The stable finding code of every job, with severity, meaning and remedy: one registry.

A code never changes meaning once released; scripts match on it. Codes are kebab-case;
outside check (whose codes the read-only jobs share) they start with their job's name:
``archive-conflict``, ``salvage-unverified-rows``, ``traces-spans-rejected``. ``CODES`` is
the one table: every finding is built through :func:`finding` or :class:`FindingLog`, which
take severity and the default hint from it, and docs/operator.md's code table is generated
from it (:func:`markdown_table`; a test fails when the page drifts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..sqlitefile.damage import BENIGN, DAMAGE
from .report import Finding, Severity


@dataclass(frozen=True)
class Code:
    """One finding code: how bad it is, what it means, what to do."""

    severity: Severity
    meaning: str
    hint: str


_DAMAGE_HINT = "the rows it held were salvaged where readable"


SALVAGE_NAMED = {
    "sqlite_check_failed": "salvage-sqlite-check-failed", "schema_columns_wrong": "salvage-schema-damaged",
    "btree_page_wrong_kind": "salvage-btree-page-wrong-kind", "record_not_of_its_table": "salvage-record-not-of-its-table",
    "cell_pointer_repeated": "salvage-cell-pointers-overlap", "cell_pointers_overlap": "salvage-cell-pointers-overlap",
    "overflow_page_shared": "salvage-overflow-page-shared", "history_seq_gap": "salvage-rows-unaccounted",
}
"""Damage kinds whose finding code is registered under its own name (a loss SQLite's checksums
alone would not show), with its own meaning and remedy below."""


def salvage_code(damage: str) -> str:
    """salvage's finding code for a damage kind it counts: its SALVAGE_NAMED code, else
    ``salvage-<kind with dashes>``."""
    return SALVAGE_NAMED.get(damage) or "salvage-" + damage.replace("_", "-")


_SALVAGE = "run `steerable-maint salvage DB --out rows.jsonl` to export every readable row; restore the row from a backup"

CODES: dict[str, Code] = {
    "sqlite-integrity": Code("error", "PRAGMA integrity_check (quick_check with --quick) reported a problem",
                             "stop the app, back the files up, then run `steerable-maint salvage DB --out rows.jsonl`"),
    "schema-too-new": Code("error", "the schema (user_version) is newer than this build reads; rows were not checked",
                           "upgrade steerable-maint to a build that reads this schema; the file was not modified"),
    "schema-too-old": Code("warning", "the schema version is older than this build's",
                           "open the store once with the app: it upgrades the"
                           " schema in one transaction; until then its checksums do not cover the key columns"),
    "schema-missing-table": Code("error", "a table of the schema is missing",
                                 "the file is not a complete store; export what is there with"
                                 " `steerable-maint salvage DB --out rows.jsonl`"),
    "row-checksum-mismatch": Code("error", "a row's data bytes do not match its CRC-32 (silent corruption)", _SALVAGE),
    "row-json-invalid": Code("error", "a row's data column is not valid JSON", _SALVAGE),
    "row-invalid": Code("error", "a row's JSON does not have the shape of its entity", _SALVAGE),
    "row-column-mismatch": Code("error", "an indexed column disagrees with the row's data JSON",
                                "the data JSON is authoritative; rebuild with"
                                " `steerable-maint salvage DB --out rows.jsonl --rebuild NEW.db`"),
    "record-seq-gap": Code("error", "a history record's seqs are not contiguous from 1 (entries missing)",
                           "restore the missing entries from a backup; resume still works from the newest checkpoint"),
    "record-seq-duplicate": Code("error", "a history record holds two entries with one seq",
                                 "salvage the record and keep one entry per seq (`steerable-maint history DB CHAT`)"),
    "record-newer-version": Code("error", "a history record holds entries written by a newer build (downgrade)",
                                 "upgrade the app to a build that reads this record version; the record is intact"),
    "record-unknown-type": Code("error", "a history entry has a type this build does not know",
                                "upgrade the app to the build that wrote it; the record is intact"),
    "record-legacy-version": Code("info", "a history record holds v1 (legacy) entries; they are read by upgrading in memory",
                                  "nothing to do; v1 entries stay as written"),
    "record-unreadable-entry": Code("error", "history: an entry this build cannot read (the app's read fails closed there)",
                                    "run `steerable-maint check DB` for the triage; the record was not modified"),
    "orphan-message": Code("warning", "a chat message whose chat has no session",
                           "archive or delete the chat, or restore its session from a backup"),
    "orphan-trace": Code("warning", "a trace whose session does not exist",
                         "`steerable-maint compact` prunes old traces; nothing else refers to it"),
    "orphan-span": Code("warning", "a span whose trace does not exist",
                        "`steerable-maint compact` prunes it with old traces; nothing else refers to it"),
    "orphan-event": Code("warning", "an event whose span does not exist",
                         "`steerable-maint compact` prunes it with old traces; nothing else refers to it"),
    "lease-held": Code("info", "a process holds the write lease (the app is running)",
                       "nothing to do for read-only jobs; write jobs wait until it exits"),
    "wal-frames-stop-verifying": Code("error", "the -wal's frames stop verifying before its end: committed"
                                      " transactions after the bad frame are invisible to SQLite and the app",
                                      "stop the app, back the files up, then run `steerable-maint salvage DB --out"
                                      " rows.jsonl`: it reads the committed frames past the bad one"),
    # salvage (its damage codes that name a loss SQLite's checksums alone would not show)
    "salvage-sqlite-check-failed": Code("error", "salvage: SQLite refuses the file or its quick_check fails",
                                        "the rows the page reader could decode are in the JSONL; rows on the"
                                        " pages SQLite names may be lost: restore them from a backup"),
    "salvage-schema-damaged": Code("error", "salvage: an entity table's CREATE statement has other columns",
                                   "the rows were read by the page reader by shape; rebuild with"
                                   " `steerable-maint salvage DB --out rows.jsonl --rebuild NEW.db`"),
    "salvage-btree-page-wrong-kind": Code("error", "salvage: a page of a table's tree is an index page (or the"
                                          " reverse): its root or a child pointer was overwritten",
                                          "the rows that were on it are lost unless a copy was found elsewhere;"
                                          " restore them from a backup"),
    "salvage-record-not-of-its-table": Code("error", "salvage: a table's tree holds records of another shape"
                                            " (its root or a child pointer now reaches another table's page)",
                                            "the rows that were on that page are lost unless a copy was found"
                                            " elsewhere; restore them from a backup"),
    "salvage-cell-pointers-overlap": Code("error", "salvage: cell pointers of a page repeat or overlap, so the"
                                          " rows they used to reach are no longer reachable",
                                          "restore the rows of that page from a backup"),
    "salvage-overflow-page-shared": Code("error", "salvage: an overflow page is reached twice in one walk (by"
                                         " two cells, another tree, or a cycle); it was read once",
                                         "the rows whose payload ran through it are exported unverified or"
                                         " not at all; restore them from a backup"),
    "salvage-rows-unaccounted": Code("error", "salvage: rows are missing between the ones recovered (a history"
                                     " record's seqs have gaps)", "restore the missing entries from a backup"),
    "wal-large": Code("warning", "the -wal file is past the size threshold (checkpoints are not keeping up)",
                      "let the app checkpoint (stop long readers), or restart the app when idle"),
    # archive and restore
    "archive-conflict": Code("error", "a row of a chat is in both the store and the archive with different bytes;"
                             " the chat was not moved", "compare the chat in both files (`steerable-maint history`"
                             " on each); move or delete one copy by hand, then re-run"),
    "restore-already-restored": Code("info", "the chat is not in the archive and is already in the store",
                                     "nothing to do; a previous restore finished"),
    # copy
    "copy-source-damaged": Code("error", "a source row fails its CRC-32 or is not UTF-8; it was not copied",
                                "run `steerable-maint check DB` and `steerable-maint salvage` on the source"),
    "copy-conflict": Code("error", "a row is in the destination with different bytes; it was kept there",
                          "decide which version is right; copy never overwrites a row"),
    "copy-verify-failed": Code("error", "a row read back from the destination is not the row sent",
                               "run `steerable-maint check` on the destination, then copy again"),
    # traces
    "traces-spans-rejected": Code("error", "the collector rejected some spans of a request",
                                  "check the collector's limits (span age, size, attribute count)"),
    "traces-collector-warning": Code("warning", "the collector accepted a request with a warning",
                                     "see the collector's docs"),
    # salvage
    "salvage-unmatched-records": Code("error", "records on damaged pages that match no table",
                                      "their pages are damaged; the JSONL holds every row that could be decoded"),
    "salvage-unverified-rows": Code("error", "rows whose data fails its checksum (exported with verified=false)",
                                    "they are exported with verified=false; do not trust their content"),
    "salvage-unplaced-rows": Code("warning", "rows that could not be placed in the rebuilt store",
                                  "they are listed in the report and exported in the JSONL"),
    "salvage-keys-not-covered": Code("warning", "a schema-1 store: its checksums cover data only, so a damaged key"
                                     " column cannot be detected", "open the store with the app first (it upgrades"
                                     " the schema), then salvage"),
    "salvage-key-collision": Code("error", "keys whose verified copies disagree; rebuild placed neither",
                                  "both copies are in the JSONL; rebuild placed neither: choose one by hand"),
    "salvage-sqlite-read-failed": Code("error", "SQLite refused to read the store; the pages were read directly",
                                       _DAMAGE_HINT),
    "salvage-schema-table-missing": Code("error", "a table of the schema has no readable root page",
                                         _DAMAGE_HINT),
    # repair
    "repair-rows-lost": Code("error", "keys no verified copy of which could be placed in the repaired store",
                             "every copy salvage found is in the backup folder's rows.jsonl; the original files"
                             " are there too"),
    **{salvage_code(name): Code("info" if name in BENIGN else "error", meaning,
                                "nothing to do: nothing committed is lost" if name in BENIGN else _DAMAGE_HINT)
       for name, meaning in DAMAGE.items() if name not in SALVAGE_NAMED},
}


JOB_PREFIXES = ("archive-", "restore-", "copy-", "traces-", "salvage-", "repair-")
"""Codes starting with one of these belong to that job; every other code is check's."""


def job_of(code: str) -> str:
    """The job a code belongs to (``check`` for the shared read-only codes)."""
    return next((p[:-1] for p in JOB_PREFIXES if code.startswith(p)), "check")


def finding(code: str, message: str, *, hint: str | None = None, **where: object) -> Finding:
    """One Finding of a registered ``code``: severity (and the default hint) from CODES.
    Raises KeyError for an unregistered code (a bug: add it to CODES)."""
    spec = CODES[code]
    return Finding(code=code, severity=spec.severity, message=message, hint=hint or spec.hint, **_location(where))


def markdown_table() -> str:
    """The table of every code (job, code, severity, meaning, what to do) as Markdown."""
    lines = ["| job | code | severity | meaning | what to do |", "| --- | --- | --- | --- | --- |"]
    order = ("check", "archive", "restore", "copy", "traces", "salvage", "repair")
    for code, spec in sorted(CODES.items(), key=lambda item: (order.index(job_of(item[0])), item[0])):
        lines.append(f"| {job_of(code)} | `{code}` | {spec.severity} | {spec.meaning} | {spec.hint} |")
    return "\n".join(lines) + "\n"


class FindingLog:
    """Counts every finding per code and keeps the first ``max_per_code`` of each."""

    def __init__(self, max_per_code: int) -> None:
        self.max_per_code = max_per_code
        self.counts: dict[str, int] = {}
        self.findings: list[Finding] = []

    def add(self, code: str, message: str, *, hint: str | None = None, **where: object) -> None:
        """Record one finding of ``code``; its severity (and default hint) come from CODES."""
        seen = self.counts.get(code, 0)
        self.counts[code] = seen + 1
        if seen < self.max_per_code:
            self.findings.append(finding(code, message, hint=hint, **where))

    def merge(self, other: "FindingLog") -> None:
        """Add everything ``other`` counted; keep its listed findings up to ``max_per_code``."""
        listed = {code: min(n, self.max_per_code) for code, n in self.counts.items()}
        for finding in other.findings:
            if listed.get(finding.code, 0) < self.max_per_code:
                self.findings.append(finding)
                listed[finding.code] = listed.get(finding.code, 0) + 1
        for code, count in other.counts.items():
            self.counts[code] = self.counts.get(code, 0) + count


def _location(where: dict[str, object]) -> dict[str, Any]:
    """The location fields as Finding types them: a damaged row may hold an int where a
    text key belongs, or text where the seq belongs; such values are shown as text or left out."""
    out: dict[str, Any] = {}
    for name, value in where.items():
        if name == "seq":
            out[name] = value if type(value) is int else None
        else:
            out[name] = None if value is None else str(value)
    return out
