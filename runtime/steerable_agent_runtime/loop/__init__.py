"""The agent loop: CoreLoop, its config, context, events and hooks."""

from __future__ import annotations

from .hooks import CompactionTrigger, LoopContext, LoopHooks, NoopHooks, PreStepAction, RetryAction, RewriteRequest

__all__ = [
    "CompactionTrigger", "LoopContext", "LoopHooks", "NoopHooks", "PreStepAction", "RetryAction", "RewriteRequest",
]
