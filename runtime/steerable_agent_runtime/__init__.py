"""steerable-agent-runtime: persist agent runs (sessions, traces, the history record) in SQLite.

The public names are re-exported here; the maintenance toolkit lives in
``steerable_agent_runtime.maintenance`` and its CLI in the separate ``steerable_maint`` package.
"""

import importlib
from typing import Any

from .errors import (
    ConfigValueError,
    DataIntegrityError,
    DatabaseDamagedError,
    ExitCode,
    ExportError,
    ExtraNotInstalledError,
    HistorySeqConflictError,
    HookError,
    NotAStoreError,
    OutputExistsError,
    RecordFormatError,
    RepairInterruptedError,
    SchemaTooNewError,
    SteerableError,
    StoreAccessError,
    StoreAlreadyOwnedError,
    StoreAuthError,
    StoreClosedError,
    StoreConnectionError,
    StoreServerError,
    ToolDefinitionError,
    UsageError,
)

# Public name -> the module defining it, imported on first access (PEP 562): importing a
# subpackage (``steerable_agent_runtime.llm``) must not load the storage half and pydantic.
_LAZY = {
    "RECORD_FORMAT_VERSION": ".history", "CompactionBoundary": ".history", "HistoryItem": ".history",
    "HistoryReader": ".history", "HistorySeed": ".history", "parse_entry": ".history", "resume_transcript": ".history",
    "upgrade_entry_dict": ".history",
    "AgentSession": ".models", "ChatMessage": ".models", "HarnessTrace": ".models", "LLMMessage": ".models",
    "TraceEvent": ".models", "TraceSpan": ".models",
    "StorageAdapter": ".storage", "InMemoryStorage": ".storage.memory", "SCHEMA_VERSION": ".storage.schema",
    "SqliteStorage": ".storage.sqlite", "TraceRecorder": ".tracing",
    "ToolCall": ".tools", "ToolConsentError": ".tools", "ToolResult": ".tools", "ToolRouter": ".tools", "tool": ".tools",
    **{name: ".loop" for name in (
        "CacheDriftMonitor", "ChainHooks", "CoreLoop", "LoopConfig", "LoopContext", "LoopEvent", "LoopHooks",
        "NoopHooks", "PreStepAction", "RetryAction", "RetryHooks", "RewriteRequest")},
}

__version__ = "0.1.0"

__all__ = [
    "AgentSession", "ChatMessage", "CompactionBoundary", "ConfigValueError", "DataIntegrityError",
    "DatabaseDamagedError", "ExitCode", "ExportError", "ExtraNotInstalledError", "HarnessTrace", "HistoryItem",
    "HistoryReader", "HistorySeed", "HistorySeqConflictError", "HookError", "InMemoryStorage", "LLMMessage", "NotAStoreError",
    "OutputExistsError", "RECORD_FORMAT_VERSION", "RecordFormatError", "RepairInterruptedError", "SCHEMA_VERSION",
    "SchemaTooNewError", "SqliteStorage", "SteerableError", "StorageAdapter", "StoreAccessError",
    "StoreAlreadyOwnedError", "StoreAuthError",
    "StoreClosedError", "StoreConnectionError", "StoreServerError", "ToolDefinitionError", "TraceEvent", "TraceRecorder", "TraceSpan",
    "UsageError", "parse_entry", "resume_transcript", "upgrade_entry_dict", "__version__",
]
# The runtime loop and tools (issue 12).
__all__ += [
    "CacheDriftMonitor", "ChainHooks", "CoreLoop", "LoopConfig", "LoopContext", "LoopEvent", "LoopHooks", "NoopHooks",
    "PreStepAction", "RetryAction", "RetryHooks", "RewriteRequest", "ToolCall", "ToolConsentError", "ToolResult",
    "ToolRouter", "tool",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        try:  # a subpackage not imported yet (``steerable_agent_runtime.storage``)
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
