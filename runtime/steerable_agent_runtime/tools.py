"""Tools: ToolCall, ToolResult, consent, the ``@tool`` decorator and the ToolRouter.

Guarantees of :meth:`ToolRouter.dispatch` (RUNTIME.md, "Tools"):
- a ``local`` or ``destructive`` tool dispatched with ``consent_granted=False`` (or anything but
  ``True``: consent fails closed) raises :class:`ToolConsentError` naming the tool and its mode,
  and runs nothing;
- every other outcome is a :class:`ToolResult`, never an exception: an unknown tool is a failed
  result naming the closest names; arguments that fail the schema (or were not JSON at all) are a
  failed result naming the argument, and the handler is not called; a handler exception is a
  failed result with its type and message (cut at MAX_ERROR_CHARS; also SystemExit,
  GeneratorExit and a CancelledError the handler raised itself: only KeyboardInterrupt and a real
  cancel of the calling task propagate; a StopIteration is the RuntimeError Python makes of it in
  a coroutine, also from a plain function); a returned ToolResult is kept, a dict is kept as
  ``data``, a pydantic model or a dataclass is dumped (also inside lists and dicts), anything else
  becomes ``data``; data that is not JSON (NaN and infinities included, a model or dataclass that
  cannot be dumped) is a failed result.
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import functools
import inspect
import json
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from .errors import SteerableError, ToolDefinitionError, UsageError
from .models import ToolCall, has_lone_surrogate
from .tooldefs import TOOL_NAME, argument_model, check_definition, check_description, check_name, parameters_schema
from .tooloutcome import MAX_ERROR_CHARS, exception_text, handler_failed, json_data, tool_failure

ToolMode = Literal["read", "safe_write", "destructive", "local", "external"]
TOOL_MODES: tuple[str, ...] = ("read", "safe_write", "destructive", "local", "external")
CONSENT_MODES: frozenset[str] = frozenset({"local", "destructive"})

RAW_ARGUMENTS_KEY = "__raw_arguments__"
"""Key of the one-entry ``arguments`` dict a provider builds when the model's arguments are not
a JSON object (see :func:`decode_arguments`); dispatch answers such a call with a failed result."""

CONTEXT_PARAMETER = "context"
"""A handler parameter of this name is not part of the schema: it receives dispatch's ``context``
(one declared as a model argument, ``context: int = 2``, is refused at registration)."""


def decode_arguments(text: str | None) -> dict[str, Any]:
    """Decode a tool call's argument text into the ``arguments`` dict of a ToolCall.

    Empty text is ``{}``. Text that is not a JSON object comes back as
    ``{RAW_ARGUMENTS_KEY: text}``, so the call still reaches the router, which answers it with a
    failed result the model can read (never an exception in the provider).
    """
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


class ToolResult(BaseModel):
    """The outcome of one tool call, as the model will read it."""

    model_config = ConfigDict(extra="forbid")

    success: bool
    data: Any = None
    error: str | None = None
    needs_followup: bool = False

    @classmethod
    def failed(cls, error: str) -> ToolResult:
        """A failed result carrying ``error`` (what the model reads)."""
        return cls(success=False, error=error)

    def to_content(self) -> str:
        """The tool message content the model reads: compact JSON of success and data or error."""
        body: dict[str, Any] = {"success": self.success}
        if self.success:
            body["data"] = self.data
        else:
            body["error"] = self.error
        if self.needs_followup:
            body["needsFollowup"] = True
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        if has_lone_surrogate(text):  # a surrogateescape'd file name: written as its JSON escape
            text = json.dumps(body, separators=(",", ":"))
        return text


class ToolConsentError(SteerableError):
    """A ``local`` or ``destructive`` tool was dispatched without consent; nothing ran."""

    default_hint = "ask the user for approval and dispatch again with consent_granted=True"


Handler = Callable[..., Any]


@dataclass
class ToolSpec:
    """One registered tool: its handler, mode, and the argument model built from its type hints."""

    name: str
    description: str
    mode: ToolMode
    handler: Handler
    arguments_model: type[BaseModel]
    takes_context: bool
    parameters: dict[str, Any] = field(default_factory=dict)
    call: Handler | None = None
    """What dispatch calls with every argument by keyword: the handler itself, or (when it has
    positional-only parameters) an adapter passing those by position."""

    def __post_init__(self) -> None:
        if not self.parameters:
            self.parameters = _schema(self)
        if self.call is None:
            self.call = self.handler

    def describe(self) -> dict[str, Any]:
        """The tool in OpenAI function form (a fresh copy; the schema is built once)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": copy.deepcopy(self.parameters)}}


def _schema(spec: ToolSpec) -> dict[str, Any]:
    schema = spec.arguments_model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def build_spec(fn: Handler, *, description: str | None, mode: str, name: str | None = None) -> ToolSpec:
    """Build a ToolSpec from ``fn``'s signature: one schema field per parameter (hint and default).

    Raises UsageError for an unknown mode, a generator function (sync or async: a tool returns its
    result once), a ``*args``/``**kwargs`` parameter, a ``context`` parameter declared as a model
    argument (``context: int = 2``), a parameter without a type hint or with a hint that does not
    resolve, or one the schema cannot carry (a leading underscore, a member of pydantic's
    ``model_`` namespace such as ``model_config``; the old v1 names ``schema``, ``json``, ``copy``,
    ``validate``... are ordinary parameters): the schema could not say what the model must send.
    Raises ToolDefinitionError (a UsageError) for a definition a provider would refuse or that is
    not JSON (:mod:`.tooldefs`): a name not 1-64 of ``A-Za-z0-9_-`` starting with a letter or ``_``
    (a lambda needs ``name=``), a description that is not text or holds a lone surrogate, a default
    that is not JSON, a type with no JSON schema, a parameter sent under a name that is not 1-64 of
    ``A-Za-z0-9_.-`` (Anthropic's rule for property keys) or under another parameter's.
    ``Field(...)`` metadata in ``Annotated`` hints is kept (descriptions, bounds). A
    ``functools.partial`` or a callable object registers from its signature; the arguments a
    partial binds by keyword are not fields (they stay the host's: not in the schema, not settable
    by the model). Positional-only parameters are fields like the others; dispatch passes them by
    position.
    """
    tool_name = check_name(name if name is not None else getattr(fn, "__name__", None))
    if mode not in TOOL_MODES:
        raise UsageError(f"tool {tool_name!r}: unknown mode {mode!r}", hint=f"use one of {', '.join(TOOL_MODES)}")
    doc = check_description(tool_name, description if description is not None else _docstring(fn))
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, functools.partial) \
        else getattr(type(fn), "__call__", fn)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        # its body would never run: each call returns a generator object, which is not JSON
        raise UsageError(f"tool {tool_name!r} is a generator function",
                         hint="return the result (e.g. a list) instead of yielding it")
    fields, takes_context, positional = _fields(fn, tool_name)
    # pydantic refuses a field named like a BaseModel member of its "model_" namespace (raw
    # ValueError) and drops a leading-underscore one; BaseModel's old v1 names (schema, json,
    # copy, validate, ...) are ordinary fields, only shadowing deprecated methods nothing here calls.
    for reserved in [n for n in fields if n.startswith("_") or (n.startswith("model_") and hasattr(BaseModel, n))]:
        raise _not_a_field(tool_name, reserved)
    model = argument_model(tool_name, fields)
    for dropped in [n for n in fields if n not in model.model_fields]:
        raise _not_a_field(tool_name, dropped)
    spec = ToolSpec(tool_name, doc, mode, fn, model, takes_context,  # type: ignore[arg-type]
                    parameters=parameters_schema(tool_name, model, fields),
                    call=_by_position(fn, positional) if positional else fn)
    check_definition(tool_name, spec.describe()["function"])
    return spec


def _docstring(fn: Handler) -> str:
    """``fn``'s docstring, a partial's function's (a partial's own is functools.partial's)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.getdoc(fn) or ""


def _not_a_field(tool_name: str, name: str) -> UsageError:
    return UsageError(f"tool {tool_name!r}: parameter {name!r} cannot be a schema field",
                      hint="rename it (no leading underscore, not a pydantic BaseModel member like 'model_config')")


def _fields(fn: Handler, tool_name: str) -> tuple[dict[str, Any], bool, tuple[str, ...]]:
    """The schema fields of ``fn``'s parameters (name -> (hint, default)), whether it takes
    ``context``, and the names of its positional-only parameters (in order)."""
    fields: dict[str, Any] = {}
    takes_context = False
    parameters = inspect.signature(fn).parameters.values()
    positional = tuple(p.name for p in parameters if p.kind is p.POSITIONAL_ONLY)
    # What a partial binds by keyword is the host's (a key, a connection), not the model's: the
    # signature shows it as a default, which would put it in every request and let the model override it.
    bound = fn.keywords if isinstance(fn, functools.partial) else {}
    hints = _hints(fn, tool_name, [p.name for p in parameters if p.name not in bound and p.name != CONTEXT_PARAMETER])
    for param in parameters:
        if param.name in bound:
            continue
        if param.name == CONTEXT_PARAMETER:
            _check_context(fn, tool_name, param, hints)
            takes_context = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UsageError(f"tool {tool_name!r}: parameter {param.name!r} is variadic",
                             hint="declare every argument as a named, typed parameter")
        if param.name not in hints:
            raise UsageError(f"tool {tool_name!r}: parameter {param.name!r} has no type hint",
                             hint="annotate it (the JSON schema is built from the type hints)")
        fields[param.name] = (hints[param.name], ... if param.default is param.empty else param.default)
    return fields, takes_context, positional


_SCALARS = (str, int, float, bool, bytes, Literal)


def _check_context(fn: Handler, tool_name: str, param: inspect.Parameter, hints: dict[str, Any]) -> None:
    """UsageError when the ``context`` parameter is declared as a model argument (``context: int = 2``,
    ``context: str | None``, ``Annotated[..., Field(...)]``): it would silently get dispatch's
    context, never that default or the model's value. An untyped one, or one typed as what a host
    passes as a context (LoopContext, a dict, Any), is fine."""
    hint = hints.get(param.name) if param.name in hints else _resolved(fn, param)
    if (param.default is param.empty or param.default is None) and not _is_data(hint):
        return
    raise UsageError(f"tool {tool_name!r}: parameter 'context' is declared as an argument for the model, but it"
                     " receives dispatch's context (the loop's LoopContext), never its default or the model's value",
                     hint="rename it (e.g. context_lines); keep a parameter named context only to receive the context")


def _resolved(fn: Handler, param: inspect.Parameter) -> Any:
    """``param``'s hint resolved, or None when it has none or it does not resolve."""
    if param.annotation is param.empty:
        return None
    holder = types.SimpleNamespace(__annotations__={param.name: param.annotation})
    try:
        return get_type_hints(holder, globalns=_globals_of(fn), include_extras=True)[param.name]
    except (NameError, TypeError, SyntaxError):
        return None  # e.g. LoopContext imported under TYPE_CHECKING: not JSON data


def _is_data(hint: Any) -> bool:
    """Whether ``hint`` declares a model argument: a scalar (str, int, a Literal...), a union
    holding one, or anything with ``Field(...)`` schema metadata."""
    origin = get_origin(hint)
    if origin is Annotated:
        base, *metadata = get_args(hint)
        return any(isinstance(m, FieldInfo) for m in metadata) or _is_data(base)
    if origin is Union or origin is types.UnionType:
        return any(_is_data(arm) for arm in get_args(hint))
    return hint in _SCALARS or origin in _SCALARS


def _by_position(fn: Handler, names: tuple[str, ...]) -> Handler:
    """``fn`` called with every argument by keyword, those in ``names`` (its positional-only
    parameters, in order) passed by position; async when ``fn`` is, so dispatch runs it alike.
    Built at registration: a handler without positional-only parameters is called directly."""
    if inspect.iscoroutinefunction(fn):
        async def call_async(**arguments: Any) -> Any:
            return await fn(*[arguments.pop(name) for name in names], **arguments)
        return call_async

    def call(**arguments: Any) -> Any:
        return fn(*[arguments.pop(name) for name in names], **arguments)
    return call


def _hints(fn: Handler, tool_name: str, names: list[str]) -> dict[str, Any]:
    """The resolved type hints of ``fn``'s parameters (from its signature for a partial or an object).

    Only the hints of ``names`` (the schema's parameters) must resolve: a return type or a
    ``context`` hint imported under ``TYPE_CHECKING`` is in no schema. UsageError names the
    parameter whose hint does not resolve.
    """
    try:
        try:
            return get_type_hints(fn, include_extras=True)  # keep Field(...) in Annotated hints
        except TypeError:  # not a function: a functools.partial, a callable object
            parameters = inspect.signature(fn, eval_str=True).parameters.values()
            return {p.name: p.annotation for p in parameters if p.annotation is not p.empty}
    except (NameError, TypeError, SyntaxError):
        pass  # some hint does not resolve: resolve the schema's one by one (registration only)
    raw = {p.name: p.annotation for p in inspect.signature(fn).parameters.values() if p.annotation is not p.empty}
    hints: dict[str, Any] = {}
    for name in names:
        if name not in raw:
            continue
        holder = types.SimpleNamespace(__annotations__={name: raw[name]})
        try:
            hints.update(get_type_hints(holder, globalns=_globals_of(fn), include_extras=True))
        except (NameError, TypeError, SyntaxError) as exc:
            raise UsageError(f"tool {tool_name!r}: the type hint of parameter {name!r} does not resolve ({exc})",
                             hint="import every type its parameters name") from exc
    return hints


def _globals_of(fn: Any) -> dict[str, Any]:
    """The module globals ``fn``'s string annotations are evaluated in (a partial's function's,
    an object's ``__call__``'s, a decorated function's original's)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        fn = getattr(type(fn), "__call__", fn)
    return getattr(inspect.unwrap(fn), "__globals__", {})


class ToolRouter:
    """The registry of tools and the one place a call is validated and run."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._described: list[dict[str, Any]] | None = None

    def register(self, fn: Handler, *, description: str | None = None, mode: str = "read",
                 name: str | None = None) -> ToolSpec:
        """Register ``fn`` (async or plain function) as a tool; raises UsageError for a duplicate name."""
        spec = build_spec(fn, description=description, mode=mode, name=name)
        if spec.name in self._tools:
            raise UsageError(f"tool {spec.name!r} is already registered", hint="give the tool another name")
        self._tools[spec.name] = spec
        self._described = None
        return spec

    @property
    def names(self) -> list[str]:
        """The registered tool names, in registration order."""
        return list(self._tools)

    def get(self, name: str) -> ToolSpec | None:
        """The spec of tool ``name``, or None."""
        return self._tools.get(name)

    def mode_of(self, name: str) -> ToolMode | None:
        """The mode of tool ``name`` (None when unknown)."""
        spec = self._tools.get(name)
        return spec.mode if spec else None

    def describe(self) -> list[dict[str, Any]]:
        """Every tool in OpenAI function form, in registration order.

        The definitions are built once per registration and shared between calls (the loop asks
        for them every request): treat them as read-only; ``spec.describe()`` gives a private copy.
        """
        if self._described is None:
            self._described = [spec.describe() for spec in self._tools.values()]
        return list(self._described)

    async def dispatch(self, call: ToolCall, *, consent_granted: bool = False, context: Any = None) -> ToolResult:
        """Run ``call`` and return its ToolResult (see the module docstring for every outcome).

        Raises ToolConsentError (and runs nothing) for a ``local``/``destructive`` tool without
        consent: anything but ``consent_granted=True`` (a truthy ``"no"`` or ``1`` too) is no consent.
        """
        spec = self._tools.get(call.name)
        if spec is None:
            return ToolResult.failed(self._unknown(call.name))
        if spec.mode in CONSENT_MODES and consent_granted is not True:  # fails closed: a truthy "no" is no
            raise _no_consent(spec, consent_granted)
        arguments = _validate(spec, call.arguments)
        if isinstance(arguments, ToolResult):
            return arguments
        if spec.takes_context:
            arguments[CONTEXT_PARAMETER] = context
        try:
            value = await _invoke(spec.call, arguments)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - a handler's failure is the model's to read, not the loop's
            if not handler_failed(exc):
                raise
            return ToolResult.failed(tool_failure(spec.name, exc))
        return _as_result(spec.name, value)

    async def execute(self, call: ToolCall, ctx: Any = None) -> ToolResult:
        """Run ``call`` with consent already decided by the caller (the loop's tools interface).

        ``ctx`` may carry ``consent_granted``; the consent rule of ``dispatch`` still applies.
        """
        return await self.dispatch(call, consent_granted=getattr(ctx, "consent_granted", False), context=ctx)

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, self._tools, n=3, cutoff=0.5)
        if close:
            return f"unknown tool {name!r}; did you mean {', '.join(close)}?"
        known = ", ".join(self._tools) or "none"
        return f"unknown tool {name!r}; available tools: {known}"


def _no_consent(spec: ToolSpec, granted: Any) -> ToolConsentError:
    odd = "" if granted is False else f" (consent_granted={granted!r} is not True)"
    return ToolConsentError(f"tool {spec.name!r} (mode {spec.mode}) needs consent; nothing ran{odd}",
                            tool=spec.name, mode=spec.mode)


def _validate(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any] | ToolResult:
    if RAW_ARGUMENTS_KEY in arguments:
        raw = str(arguments[RAW_ARGUMENTS_KEY])[:200]
        return ToolResult.failed(f"tool {spec.name!r}: arguments are not a JSON object: {raw!r}")
    try:
        parsed = spec.arguments_model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors()[:5])
        return ToolResult.failed(f"tool {spec.name!r}: invalid arguments: {problems}")
    return dict(parsed.__dict__)


def _problem(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "arguments"
    return f"{where}: {err['msg']}"


async def _invoke(handler: Handler, arguments: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(handler):
        return await handler(**arguments)
    value = await asyncio.to_thread(_call_plain, handler, arguments)
    if inspect.isawaitable(value):
        return await value
    return value


def _call_plain(handler: Handler, arguments: dict[str, Any]) -> Any:
    """Call a plain handler (in the worker thread), a StopIteration it raises made a RuntimeError.

    asyncio refuses to set a StopIteration on the future that carries the thread's outcome back
    (it would end a generator-based coroutine), so the await would never finish; Python does the
    same conversion for a coroutine (PEP 479).
    """
    try:
        return handler(**arguments)
    except StopIteration as exc:
        raise RuntimeError(f"handler raised {exception_text(exc)}") from exc


def _as_result(name: str, value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        result = value
    elif isinstance(value, BaseModel):
        try:
            result = ToolResult(success=True, data=value.model_dump(mode="json", by_alias=True))
        except Exception as exc:  # noqa: BLE001 - a field pydantic cannot encode, a serializer that raises
            return ToolResult.failed(f"tool {name!r} returned data that is not JSON-serialisable: {exception_text(exc)}")
    else:
        result = ToolResult(success=True, data=value)
    data, why = json_data(result.data)
    if why is not None:
        return ToolResult.failed(f"tool {name!r} returned data that is not JSON-serialisable: {why}")
    if data is not result.data:
        result = result.model_copy(update={"data": data})
    return result


def tool(*, router: ToolRouter | None = None, description: str | None = None, mode: str = "read",
         name: str | None = None) -> Callable[[Handler], Handler]:
    """Decorator registering the function as a tool of ``router`` (the function is returned unchanged).

    With ``router=None`` the spec is only built and attached as ``fn.tool_spec`` (validated the
    same way); register it later with ``router.register(fn, ...)``. Raises UsageError as
    :meth:`ToolRouter.register` does.
    """
    def decorate(fn: Handler) -> Handler:
        if router is not None:
            spec = router.register(fn, description=description, mode=mode, name=name)
        else:
            spec = build_spec(fn, description=description, mode=mode, name=name)
        fn.tool_spec = spec  # type: ignore[attr-defined]
        return fn
    return decorate


__all__ = [
    "CONSENT_MODES", "CONTEXT_PARAMETER", "MAX_ERROR_CHARS", "RAW_ARGUMENTS_KEY", "TOOL_MODES", "TOOL_NAME", "ToolCall",
    "ToolConsentError", "ToolDefinitionError", "ToolMode", "ToolResult", "ToolRouter", "ToolSpec", "build_spec", "decode_arguments", "tool",
]
