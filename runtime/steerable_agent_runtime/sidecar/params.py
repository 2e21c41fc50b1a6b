"""The params of every sidecar method, as pydantic models with the wire's camelCase names.

Unknown fields are refused (a typo is an error naming the field, not a silent default), and
values must have the field's JSON type (strict: ``"yes"`` or ``1`` is not a boolean, ``"5"`` or
``5.0`` not an integer; an integer is a number).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..models import LLMMessage


class Params(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)


class NoParams(Params):
    pass


class SessionCreate(Params):
    chat_id: str = Field(min_length=1)
    user_id: str = "local"
    session_id: str | None = Field(default=None, min_length=1)
    current_stage: str = "START"
    next_stage: str | None = None
    scenario: str | None = None
    stage_data: dict[str, Any] | None = None
    project_id: str | None = None


class SessionRef(Params):
    session_id: str = Field(min_length=1)


class SessionList(Params):
    user_id: str | None = None
    chat_id: str | None = None
    active_only: bool = False


class SessionUpdate(Params):
    session_id: str = Field(min_length=1)
    current_stage: str | None = None
    next_stage: str | None = None
    stage_data: dict[str, Any] | None = None


class ProviderSpec(Params):
    kind: Literal["openai_compat", "openai_responses", "anthropic", "gemini"]
    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, pattern=r"^https?://[^/\s]+")  # what the providers accept
    api_key_env: str | None = Field(default=None, min_length=1)
    max_tokens: int | None = Field(default=None, gt=0)
    keep_reasoning: bool | None = None  # openai_responses only (providers.build_provider refuses it elsewhere)


class ChatStream(Params):
    chat_id: str = Field(min_length=1)
    session_id: str | None = None
    messages: list[LLMMessage] = []
    provider: ProviderSpec
    tools: list[dict[str, Any]] = []
    resume: bool = False
    max_context_tokens: int | None = Field(default=None, gt=0)
    max_rounds: int | None = Field(default=None, gt=0)
    temperature: float | None = None
    tool_timeout_s: float = Field(default=300.0, gt=0)
    approval_timeout_s: float = Field(default=300.0, gt=0)


class StreamRef(Params):
    stream_id: str = Field(min_length=1)


class ChatSteer(Params):
    stream_id: str = Field(min_length=1)
    content: str = Field(min_length=1)  # an empty user message helps no model


class HistoryGet(Params):
    record_id: str = Field(min_length=1)
    after_seq: int | None = Field(default=None, ge=0, le=2**63 - 1)  # SQLite's integers are 64-bit
    limit: int = Field(default=500, gt=0, le=10_000)


class TraceRef(Params):
    trace_id: str = Field(min_length=1)


class TraceExport(Params):
    trace_id: str = Field(min_length=1)
    endpoint: str = Field(min_length=1)


def check_messages(messages: list[LLMMessage]) -> None:
    """What LLMMessage lets through but no provider can send, refused before a stream starts:
    a tool call not in the neutral ``{id, name, arguments: {...}}`` shape (OpenAI's
    ``{type, function: {arguments: "..."}}`` included), a tool result without ``toolCallId``,
    a content part no provider reads. Raises RpcError -32602 naming the field."""
    from pydantic import ValidationError

    from ..llm.errors import ProviderConfigError
    from ..llm.parts import parse_parts
    from ..models import ToolCall
    from ..transport.jsonrpc import INVALID_PARAMS, RpcError

    def bad(field: str, why: str, hint: str) -> RpcError:
        return RpcError(INVALID_PARAMS, f"invalid params for agent.chat.stream: {field}: {why}", hint=hint,
                        data={"field": field})

    for n, message in enumerate(messages):
        for m, call in enumerate(message.tool_calls or []):
            try:
                ToolCall.model_validate(call)
            except ValidationError as exc:
                loc = ".".join(str(part) for part in exc.errors()[0]["loc"])
                raise bad(f"messages.{n}.toolCalls.{m}" + (f".{loc}" if loc else ""), exc.errors()[0]["msg"],
                          'give each tool call as {"id", "name", "arguments": {...}} (arguments a JSON object)') from None
        if message.role == "tool" and not message.tool_call_id:
            raise bad(f"messages.{n}.toolCallId", "a tool result needs the id of the call it answers",
                      "set toolCallId to the id of the assistant's tool call")
        try:
            parse_parts(message.content, provider="agent.chat.stream")
        except ProviderConfigError as exc:
            raise bad(f"messages.{n}.content", exc.message.split(": ", 1)[-1], exc.hint) from None
