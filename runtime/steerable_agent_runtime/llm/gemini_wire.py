"""LLMMessages and OpenAI-form tools -> a Gemini ``generateContent`` request body.

The conversion (guaranteed, and asserted against the request the google-genai SDK sends):
- system messages become ``systemInstruction`` (several are joined by a blank line);
- user text and images become ``text`` / ``inlineData`` parts (an http(s) image URL becomes
  ``fileData``) in a ``user`` content; assistant messages become ``model`` contents with a
  ``text`` part and one ``functionCall`` part per call (the call's thought signature, when this
  provider saw one, is sent back as Gemini 3 requires);
- a tool result becomes a ``functionResponse`` part ``{name, response: {"result": text}}`` in a
  ``user`` content; its name is the message's ``name`` or, failing that, the name of the call
  with its ``tool_call_id`` earlier in the transcript; consecutive contents of one role are
  merged, so parallel calls' responses travel in one turn as the API requires, except that a
  user content holding function responses holds nothing else: user text or images next to them
  (a steer after the tool results) go in a user content of their own. Gemini 3 answers a
  content mixing the two with 400 "Requests ending with a model turn are not supported";
  Google's docs are silent on it (see docs/providers.md for the reports this rests on);
- with ``sign_current_turn`` (Gemini 3 and later), a step of the current turn (every model
  content after the last user content that holds no function response) whose calls carry no
  kept signature gets :data:`SKIP_SIGNATURE` on its first call, as Google documents for a
  transcript that lost its signatures (a turn resumed from the record, another model's calls);
- tools become one ``{"functionDeclarations": [...]}`` entry with ``parametersJsonSchema``
  (full JSON Schema, as pydantic writes it); tool_choice maps to ``toolConfig`` modes
  AUTO / ANY / NONE (a named function: ANY with ``allowedFunctionNames``); without tools there
  is no ``toolConfig`` (auto and none are left out, required or a named function raise:
  :func:`.transcript.tool_choice_to_send`; the API answers one without function declarations
  with a 400);
- temperature, max_tokens and thinking_budget go to ``generationConfig``.

Raises ProviderConfigError for content or tool calls it cannot convert and a tool result whose
call is unknown (ToolDefinitionError for a tool not in OpenAI function form); nothing is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ProviderConfigError
from .parts import Part, TextPart, parse_parts, text_of
from .tooldefs import function_tools
from .transcript import assistant_tool_calls, tool_call_names, tool_choice_to_send

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import LLMMessage

PROVIDER = "gemini"

#: Google's documented stand-in for a thought signature a transcript does not have: Gemini 3
#: answers a current-turn step without one with 400 "Function call is missing a thought_signature"
SKIP_SIGNATURE = "skip_thought_signature_validator"


def build_body(
    messages: Sequence[LLMMessage],
    *,
    tools: Iterable[dict[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    tool_choice: Any = None,
    signatures: Mapping[str, str] | None = None,
    thinking_budget: int | None = None,
    sign_current_turn: bool = False,
) -> dict[str, Any]:
    """The JSON body of ``POST .../models/{model}:streamGenerateContent?alt=sse``.

    ``thinking_budget`` sets ``thinkingConfig`` (that budget, thoughts included in the stream);
    ``sign_current_turn`` marks the current turn's unsigned steps (see the module docstring).
    """
    body: dict[str, Any] = {"contents": wire_contents(messages, signatures or {})}
    if sign_current_turn:
        _sign_current_turn(body["contents"])
    system = [text_of(m.content, provider=PROVIDER) for m in messages if m.role == "system"]
    if any(system):
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(s for s in system if s)}], "role": "user"}
    declarations = [_declaration(t) for t in function_tools(tools, provider=PROVIDER)]
    if declarations:
        body["tools"] = [{"functionDeclarations": declarations}]
    choice = tool_choice_to_send(tool_choice, tool_names=[d["name"] for d in declarations], provider=PROVIDER)
    if choice is not None:
        body["toolConfig"] = {"functionCallingConfig": _calling_config(*choice)}
    config: dict[str, Any] = {}
    if temperature is not None:
        config["temperature"] = temperature
    if max_tokens is not None:
        config["maxOutputTokens"] = max_tokens
    if thinking_budget is not None:
        config["thinkingConfig"] = {"thinkingBudget": int(thinking_budget), "includeThoughts": True}
    if config:
        body["generationConfig"] = config
    return body


def wire_contents(messages: Sequence[LLMMessage], signatures: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ``contents`` array: user/model turns, consecutive turns of one role merged, except
    that function responses and other user parts never share a content."""
    names = tool_call_names(messages, provider=PROVIDER)
    contents: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        parts = _parts(message, names, signatures)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role and _responses(contents[-1]) == (message.role == "tool"):
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"parts": parts, "role": role})
    return contents


def _responses(content: dict[str, Any]) -> bool:
    """Whether ``content`` is a user content of function responses (which holds nothing else)."""
    return content["role"] == "user" and "functionResponse" in content["parts"][0]


def _parts(message: LLMMessage, names: Mapping[str, str], signatures: Mapping[str, str]) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"functionResponse": {"name": _result_name(message, names), "response": {"result": text_of(message.content, provider=PROVIDER)}}}]
    parts = [_part(p) for p in parse_parts(message.content, provider=PROVIDER) if not isinstance(p, TextPart) or p.text]
    for call in assistant_tool_calls(message, provider=PROVIDER) if message.role == "assistant" else ():
        part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.arguments}}
        if call.id in signatures:
            part["thoughtSignature"] = signatures[call.id]
        parts.append(part)
    return parts


def _sign_current_turn(contents: list[dict[str, Any]]) -> None:
    """Put SKIP_SIGNATURE on the first call of each unsigned step since the user last spoke."""
    for content in reversed(contents):
        parts = content["parts"]
        if content["role"] == "user":
            if not any("functionResponse" in p for p in parts):
                return  # the user's own words: the turn began after them
            continue
        calls = [p for p in parts if "functionCall" in p]
        if calls and not any("thoughtSignature" in p for p in calls):
            calls[0]["thoughtSignature"] = SKIP_SIGNATURE


def _result_name(message: LLMMessage, names: Mapping[str, str]) -> str:
    name = message.name or names.get(message.tool_call_id or "")
    if not name:
        raise ProviderConfigError(f"{PROVIDER}: tool result {message.tool_call_id!r} matches no tool call in the transcript",
                         provider=PROVIDER,
                                  hint="Gemini needs the function name of every tool result: set the message's "
                                       "name, or keep the assistant message with the call before its result")
    return name


def _part(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    if part.url is not None:
        import mimetypes  # only for remote images

        mime = mimetypes.guess_type(part.url.split("?", 1)[0])[0]
        return {"fileData": {"mimeType": mime, "fileUri": part.url} if mime else {"fileUri": part.url}}
    return {"inlineData": {"mimeType": part.mime_type, "data": part.data}}


def _declaration(tool: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        out["description"] = tool["description"]
    out["parametersJsonSchema"] = tool["parameters"]
    return out


def _calling_config(mode: str, name: str | None) -> dict[str, Any]:
    if mode == "function":
        return {"mode": "ANY", "allowedFunctionNames": [name]}
    return {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE"}[mode]}
