"""The agent loop: CoreLoop, its config, context, events and hooks."""

from __future__ import annotations

from .cache_drift import CacheDriftMonitor
from .config import LoopConfig
from .core import CoreLoop
from .events import EVENT_KINDS, CompletionStatus, EventKind, LoopEvent
from .hooks import (
    ChainHooks,
    CompactionTrigger,
    LoopContext,
    LoopHooks,
    NoopHooks,
    PreStepAction,
    RetryAction,
    RetryHooks,
    RewriteRequest,
)
from .record import INTERRUPTED_ERROR, RecordWriter, repair_dangling
from .toolbatch import Approver
from .turn import MAX_ATTEMPTS_PER_REQUEST

__all__ = [
    "EVENT_KINDS",
    "INTERRUPTED_ERROR",
    "MAX_ATTEMPTS_PER_REQUEST",
    "Approver",
    "CacheDriftMonitor",
    "ChainHooks",
    "CompactionTrigger",
    "CompletionStatus",
    "CoreLoop",
    "EventKind",
    "LoopConfig",
    "LoopContext",
    "LoopEvent",
    "LoopHooks",
    "NoopHooks",
    "PreStepAction",
    "RecordWriter",
    "RetryAction",
    "RetryHooks",
    "RewriteRequest",
    "repair_dangling",
]
