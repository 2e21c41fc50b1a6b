"""Tools: ToolCall, ToolResult, consent, and (issue 12) the ToolRouter."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .errors import SteerableError
from .models import ToolCall

ToolMode = Literal["read", "safe_write", "destructive", "local", "external"]
CONSENT_MODES: frozenset[str] = frozenset({"local", "destructive"})


class ToolResult(BaseModel):
    """The outcome of one tool call, as the model will read it."""

    model_config = ConfigDict(extra="forbid")

    success: bool
    data: Any = None
    error: str | None = None
    needs_followup: bool = False


class ToolConsentError(SteerableError):
    """A ``local`` or ``destructive`` tool was dispatched without consent; nothing ran."""

    default_hint = "ask the user for approval and dispatch again with consent_granted=True"


__all__ = ["CONSENT_MODES", "ToolCall", "ToolConsentError", "ToolMode", "ToolResult"]
