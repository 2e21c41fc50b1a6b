"""The one error hierarchy of steerable-agent-runtime.

Every error the library raises on purpose is a :class:`SteerableError`. Each carries
structured fields (``path``, ``table``, ``record_id``, ``seq``, ``version``) where they
apply, and a ``hint``: the remedy an operator can act on. The CLI catches the base class
in one place and prints ``Error: <message>`` and ``Hint: <hint>``; ``exit_code`` is the
steerable-maint exit code the error maps to (:class:`ExitCode`: 3 cannot run, 2 usage error).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """steerable-maint's exit codes, used by errors, reports and the CLI alike."""

    OK = 0
    """clean: nothing wrong found"""
    PROBLEMS = 1
    """the job ran and found problems (check errors, salvage lost or unverified rows)"""
    USAGE = 2
    """a bad argument: nothing was done"""
    CANNOT_RUN = 3
    """the job could not run (not a store, lease held elsewhere, newer schema, output exists)"""
    INTERNAL = 4
    """a bug: an unexpected exception"""


class SteerableError(Exception):
    """Base of every expected failure: a message, a hint, and where it happened."""

    exit_code: ExitCode = ExitCode.CANNOT_RUN
    default_hint: str = "see the README's symptom -> command table and docs/operator.md"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        path: str | None = None,
        table: str | None = None,
        record_id: str | None = None,
        seq: int | None = None,
        version: int | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint
        self.path = path
        self.table = table
        self.record_id = record_id
        self.seq = seq
        self.version = version
        self.extra = extra

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready dict (used by ``--json`` error output)."""
        out: dict[str, Any] = {"error": type(self).__name__, "message": self.message, "hint": self.hint}
        for key in ("path", "table", "record_id", "seq", "version"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out


class UsageError(SteerableError):
    """A caller passed an argument the job cannot accept (bad duration, bad query)."""

    exit_code = ExitCode.USAGE
    default_hint = "run the command with --help"


class HookError(UsageError):
    """A loop hook raised, or returned something other than its documented type: the turn ends failed."""

    kind = "hook"
    default_hint = "fix the hook: it must return its documented type or None, and not raise"


class ToolDefinitionError(UsageError):
    """A tool definition (name, description, JSON schema) that a provider would refuse or that
    is not JSON: raised when the tool is registered, so no request is ever built from it."""

    default_hint = "give the tool a name, a description and parameters every provider accepts (docs/loop.md, Tools)"


class NotAStoreError(SteerableError):
    """The path is missing, a directory, unreadable, empty, not SQLite, or not our store."""

    default_hint = "pass the path of a steerable store (the app's sessions database)"


class StoreAccessError(NotAStoreError):
    """The store (or its directory) exists but this process may not read or write it, or the
    disk failed (permission denied, read-only file system, I/O error, disk full).

    A NotAStoreError subclass only so that code catching the older, broader class keeps
    working; the file may well be a sound store.
    """

    default_hint = "run as the user that owns the store and its directory, and check the disk"


class DatabaseDamagedError(SteerableError):
    """SQLite refused to read the file as a database (malformed, truncated)."""

    default_hint = "run `steerable-maint salvage DB --out rows.jsonl` to recover what is readable"


class SchemaTooNewError(SteerableError):
    """The database was written by a newer build (user_version above this build's)."""

    default_hint = "upgrade the app (or steerable-maint) to a build that reads this schema; the file was not modified"


class RecordFormatError(SteerableError):
    """A history entry this build cannot read: newer ``v``, unknown ``type``, or malformed.

    Reads fail closed: the whole read is refused, nothing is skipped, nothing is rewritten.
    """

    default_hint = "upgrade the app to a build that reads this record; the record was not modified"


class HistorySeqConflictError(SteerableError):
    """An appended entry carried a seq other than the next one: a second writer raced."""

    default_hint = "re-read the record tail and append again; another writer appended first"


class StoreAlreadyOwnedError(SteerableError):
    """The write lease (the sibling ``.lock`` file) is held by another opener."""

    default_hint = "stop the process holding the lease (the app or another job), or run a read-only job instead"

    def __init__(self, message: str, *, holder_pid: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.holder_pid = holder_pid
        if holder_pid is not None:
            self.extra["holder_pid"] = holder_pid


class RepairInterruptedError(SteerableError):
    """A repair was interrupted while it swapped the store's files (storage/repairmark.py)."""

    default_hint = "run `steerable-maint repair DB` again: it first restores the original files from the backup"


class OutputExistsError(SteerableError):
    """A job would overwrite an existing output file."""

    default_hint = "choose another output path, or pass --force to replace it"


class DataIntegrityError(SteerableError):
    """A stored row's checksum does not match its bytes: silent corruption on disk."""

    default_hint = "run `steerable-maint check DB` to list the damage and `steerable-maint salvage` to recover the rest"


class StoreClosedError(SteerableError):
    """A storage method was called after ``close()``."""

    default_hint = "open a new SqliteStorage; a closed one has released its lease"


class ExportError(SteerableError):
    """The trace exporter gave up (non-retryable status, or the deadline passed)."""

    default_hint = "check the collector endpoint and that it accepts OTLP/HTTP JSON"


class StoreConnectionError(SteerableError):
    """A database server store could not be reached: host, port or socket, a database that
    does not exist, a server that went away mid-call. The URL's password is never shown."""

    default_hint = "check the URL's host, port and database name, and that the server is running"


class StoreAuthError(StoreConnectionError):
    """The database server refused the URL's credentials."""

    default_hint = "check the user name and password in the URL (the password is never shown)"


class StoreServerError(SteerableError):
    """The database server refused a statement for a reason other than the caller's input
    (out of disk, permission on a table, a server-side limit); the SQLSTATE is in ``sqlstate``."""

    default_hint = "see the database server's log for the statement's error"


class ExtraNotInstalledError(SteerableError, ImportError):
    """An optional part was used without its extra installed."""

    default_hint = "pip install 'steerable-agent-runtime[sqlalchemy]'"


class ConfigValueError(UsageError, ValueError):
    """A constructor parameter is out of range (also a ValueError); ``parameter`` names it."""

    default_hint = "pass a value inside the documented range"

    def __init__(self, message: str, *, parameter: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.parameter = parameter
        self.extra["parameter"] = parameter
