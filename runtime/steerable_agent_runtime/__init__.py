"""steerable-agent-runtime: persist agent runs (sessions, traces, the history record) in SQLite.

The public names are re-exported here; the maintenance toolkit lives in
``steerable_agent_runtime.maintenance`` and its CLI in the separate ``steerable_maint`` package.
"""

from .errors import (
    DataIntegrityError,
    DatabaseDamagedError,
    HistorySeqConflictError,
    NotAStoreError,
    RecordFormatError,
    SchemaTooNewError,
    SteerableError,
    StoreAlreadyOwnedError,
    UsageError,
)
from .history import (
    RECORD_FORMAT_VERSION,
    CompactionBoundary,
    HistoryItem,
    HistorySeed,
    parse_entry,
    resume_transcript,
    upgrade_entry_dict,
)
from .models import AgentSession, ChatMessage, HarnessTrace, LLMMessage, TraceEvent, TraceSpan
from .storage import StorageAdapter
from .storage.memory import InMemoryStorage
from .storage.schema import SCHEMA_VERSION
from .storage.sqlite import SqliteStorage
from .tools import ToolCall, ToolConsentError, ToolResult, ToolRouter, tool
from .loop import (
    CacheDriftMonitor, ChainHooks, CoreLoop, LoopConfig, LoopContext, LoopEvent, LoopHooks, NoopHooks, PreStepAction,
    RetryAction, RetryHooks, RewriteRequest,
)

__version__ = "0.1.0"

__all__ = [
    "AgentSession", "ChatMessage", "CompactionBoundary", "DataIntegrityError", "DatabaseDamagedError",
    "HarnessTrace", "HistoryItem", "HistorySeed", "HistorySeqConflictError", "InMemoryStorage", "LLMMessage",
    "NotAStoreError", "RECORD_FORMAT_VERSION", "RecordFormatError", "SCHEMA_VERSION", "SchemaTooNewError",
    "SqliteStorage", "SteerableError", "StorageAdapter", "StoreAlreadyOwnedError", "TraceEvent", "TraceSpan",
    "UsageError", "parse_entry", "resume_transcript", "upgrade_entry_dict", "__version__",
]
# The runtime loop and tools (issue 12).
__all__ += [
    "CacheDriftMonitor", "ChainHooks", "CoreLoop", "LoopConfig", "LoopContext", "LoopEvent", "LoopHooks", "NoopHooks",
    "PreStepAction", "RetryAction", "RetryHooks", "RewriteRequest", "ToolCall", "ToolConsentError", "ToolResult",
    "ToolRouter", "tool",
]
