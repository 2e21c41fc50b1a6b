"""The maintenance toolkit: one function per job, each returning a typed report.

Read-only jobs (safe while the app runs; they take no lease and change no byte of the store):
:func:`check`, :func:`inspect_store`, :func:`history`, :func:`search`, :func:`export_traces`,
:func:`salvage` (which writes only its own outputs). Write jobs take the store's write lease and
refuse (:class:`~steerable_agent_runtime.errors.StoreAlreadyOwnedError`) while another process
holds it: :func:`compact`, :func:`archive`, :func:`restore`.

Every job raises a :class:`~steerable_agent_runtime.errors.SteerableError` subclass for an
expected failure (its ``hint`` says what to do, its ``exit_code`` what steerable-maint exits
with) and returns a report whose ``exit_code`` is 0 (clean) or 1 (problems found). Long jobs
take ``progress(phase, done, total)``. The steerable-maint CLI calls exactly these names.

Note: ``check``, ``history``, ``search``, ``compact``, ``archive`` and ``salvage`` are both the
job function (the attribute of this package) and the module or subpackage that implements it;
import implementation details as ``from steerable_agent_runtime.maintenance.check.rows import ...``.
"""

from .archive import CHAT_TABLES, ArchiveReport, RestoreReport, RowCounts, archive, restore
from .check import DEFAULT_WAL_THRESHOLD, CheckReport, check, check_url
from .codes import CODES, Code, FindingLog
from .compact import CompactReport, compact
from .copy import CopyReport, copy_store
from .duration import parse_duration
from .history import EntryView, HistoryReport, history
from .inspect import InspectReport, inspect_store
from .repair import RepairReport, repair
from .report import Finding, JobReport, Progress, Severity, no_progress
from .salvage import SalvageReport, TableTally, UnplacedRow, salvage
from .search import SEARCH_ORDERS, SearchReport, search
from .traces import DEFAULT_BATCH_SPANS, TracesReport, export_traces

__all__ = [
    "CHAT_TABLES", "CODES", "DEFAULT_BATCH_SPANS", "DEFAULT_WAL_THRESHOLD", "ArchiveReport", "CheckReport", "Code",
    "CompactReport", "CopyReport", "EntryView", "Finding", "FindingLog", "HistoryReport", "InspectReport", "JobReport", "Progress",
    "RepairReport", "RestoreReport", "RowCounts", "SEARCH_ORDERS", "SalvageReport", "SearchReport", "Severity", "TableTally", "TracesReport",
    "UnplacedRow", "archive", "check", "check_url", "compact", "copy_store", "export_traces", "history", "inspect_store", "no_progress",
    "parse_duration", "repair", "restore", "salvage", "search",
]
