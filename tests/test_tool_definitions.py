"""A tool's definition (name, description, JSON schema) is checked when it is registered.

What ``describe()`` returns goes into every request: a value there that is not JSON (NaN, a lone
surrogate, a default pydantic cannot encode), a type with no JSON schema or a name one of the
providers refuses would fail every request of the run, or silently drop part of the schema.
So ``@tool`` / ``register`` refuse it with ToolDefinitionError (a UsageError with a hint) naming
the tool and the part; what registered before still does, and its definition goes through a
real request to a local OpenAI-compatible server unchanged.
"""

from __future__ import annotations

import datetime
import enum
import json
import socket
from collections.abc import Callable
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field
from steerable_agent_runtime import ToolDefinitionError, UsageError
from steerable_agent_runtime.tools import ToolCall, ToolRouter, tool

from tests.helpers import run
from tests.replay_server import Reply, ReplayServer

_SENTINEL = object()


class _Opaque(enum.Enum):
    A = object()


class _Inner(BaseModel):
    ratio: float = float("nan")


def _strict_json(definitions) -> bytes:
    """The bytes a provider is sent: strict JSON (no NaN), valid UTF-8 (no lone surrogate)."""
    return json.dumps(definitions, allow_nan=False, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("name", ["1tool", "-tool", "9"])
def test_a_name_gemini_refuses_is_refused_at_registration(name):
    # Gemini's FunctionDeclaration.name must start with a letter or an underscore; OpenAI and
    # Anthropic take ^[a-zA-Z0-9_-]{1,64}$: the rule is what all of them accept.
    async def fine() -> int:
        return 1

    with pytest.raises(ToolDefinitionError, match="name") as err:
        ToolRouter().register(fine, name=name)
    assert isinstance(err.value, UsageError) and "letter or '_'" in err.value.hint


def _garbage():
    async def nan_default(x: float = float("nan")) -> None: ...
    async def inf_default(x: float = float("-inf")) -> None: ...
    async def sentinel_default(x: int = _SENTINEL) -> None: ...  # type: ignore[assignment]
    async def bytes_default(x: bytes = b"\xff\xfe") -> None: ...
    async def surrogate_default(x: str = "a\udcff") -> None: ...
    async def surrogate_field(x: Annotated[str, Field(description="the \udcff path")]) -> None: ...
    async def surrogate_literal(x: Literal["a\udcff"]) -> None: ...
    async def callable_param(x: Callable[[], int]) -> None: ...
    async def socket_param(x: socket.socket) -> None: ...
    async def opaque_enum(x: _Opaque) -> None: ...
    async def nested_nan(x: _Inner) -> None: ...

    def surrogate_doc(x: int) -> None:
        """Reads \udcff."""

    # Anthropic refuses a request whose input_schema has a property key not ^[a-zA-Z0-9_.-]{1,64}$
    async def unicode_param(größe: int) -> None: ...
    async def bracket_alias(x: Annotated[str, Field(alias="filter[id]")] = "") -> None: ...
    async def spaced_alias(x: Annotated[str, Field(alias="file name")]) -> None: ...
    async def clashing_alias(x: Annotated[str, Field(alias="y")], y: int) -> None: ...
    long_param = _exec_tool("long_param", "p" * 65)

    return [
        (nan_default, {}, "parameter 'x'", "not JSON"), (inf_default, {}, "parameter 'x'", "not JSON"),
        (sentinel_default, {}, "parameter 'x'", "not JSON"), (bytes_default, {}, "parameter 'x'", "not JSON"),
        (surrogate_default, {}, "parameter 'x'", "surrogate"), (surrogate_field, {}, "parameters.properties.x",
                                                                "surrogate"),
        (surrogate_literal, {}, "parameter 'x'", "schema"), (callable_param, {}, "parameter 'x'", "schema"),
        (socket_param, {}, "parameter 'x'", "schema"), (opaque_enum, {}, "parameter 'x'", "schema"),
        (nested_nan, {}, "parameters.$defs._Inner.properties.ratio.default", "not JSON"),
        (surrogate_doc, {}, "description", "surrogate"),
        (lambda: None, {"name": "bad_desc", "description": "x \ud800 y"},
         "description", "surrogate"),
        (lambda: None, {"name": "not_text", "description": 42}, "description", "text"),
        (unicode_param, {}, "parameter 'größe'", "'.' or '-'"),
        (bracket_alias, {}, "parameter 'x' (sent as 'filter[id]')", "'.' or '-'"),
        (spaced_alias, {}, "parameter 'x' (sent as 'file name')", "'.' or '-'"),
        (long_param, {}, f"parameter '{'p' * 65}'", "1-64"),
        (clashing_alias, {}, "parameters 'x' and 'y'", "both sent as 'y'"),
    ]


def _exec_tool(name: str, param: str):
    namespace: dict = {}
    exec(f"async def {name}({param}: int) -> None: ...", namespace)
    return namespace[name]


GARBAGE = _garbage()


@pytest.mark.parametrize("case", range(len(GARBAGE)), ids=[
    (kw.get("name") or fn.__name__) for fn, kw, _, _ in GARBAGE])
def test_a_definition_no_provider_accepts_is_refused_at_registration(case):
    fn, kwargs, where, why = GARBAGE[case]
    router = ToolRouter()
    for register in (lambda: router.register(fn, **kwargs), lambda: tool(**kwargs)(fn)):
        with pytest.raises(ToolDefinitionError) as err:
            register()
        assert where in str(err.value) and why in str(err.value), str(err.value)
        assert f"tool {kwargs.get('name', fn.__name__)!r}" in str(err.value)
        assert isinstance(err.value, UsageError) and err.value.hint
        str(err.value).encode("utf-8")  # the message itself is valid text (a surrogate shown escaped)
    assert router.names == [] and router.describe() == []


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


def _fine_router() -> ToolRouter:
    router = ToolRouter()

    @tool(router=router, description="Lit un fichier — naïve café ✓ 📄")
    async def read_file(path: Annotated[str, Field(description="chemin relatif")],
                        lines: Annotated[int, Field(ge=1, le=500)] = 40) -> dict:
        return {"path": path, "lines": lines}

    @tool(router=router, description="Plan a trip", name="_plan-trip")
    async def plan(when: datetime.date = datetime.date(2026, 1, 2), tags: set[str] = {"a"},  # noqa: B006
                   size: Size = Size.SMALL, note: str | None = None, mode: Literal["x", "y"] = "x") -> str:
        return f"{when} {sorted(tags)} {size.value} {note} {mode}"

    @tool(router=router, name="x" * 64)
    async def longest() -> int:
        """Docstring as the description."""
        return 1

    return router


def test_what_registered_before_still_registers_and_is_strict_json():
    router = _fine_router()
    described = router.describe()
    assert [d["function"]["name"] for d in described] == ["read_file", "_plan-trip", "x" * 64]
    json.loads(_strict_json(described))
    props = described[0]["function"]["parameters"]["properties"]
    # Field(...) metadata in Annotated hints reaches the schema and the validation
    assert props["path"]["description"] == "chemin relatif"
    assert (props["lines"]["minimum"], props["lines"]["maximum"], props["lines"]["default"]) == (1, 500, 40)
    failed = run(router.dispatch(ToolCall(id="c1", name="read_file", arguments={"path": "a", "lines": 0})))
    assert not failed.success and "lines" in failed.error
    plan = described[1]["function"]["parameters"]["properties"]
    assert plan["when"]["default"] == "2026-01-02" and plan["tags"]["default"] == ["a"]
    assert run(router.dispatch(ToolCall(id="c2", name="_plan-trip", arguments={}))).data == \
        "2026-01-02 ['a'] s None x"
    assert described[2]["function"]["description"] == "Docstring as the description."


def test_the_definitions_go_through_a_real_request_unchanged():
    from steerable_agent_runtime.llm import OpenAICompatProvider
    from steerable_agent_runtime.models import LLMMessage

    router = _fine_router()
    done = (b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
            b"data: [DONE]\n\n")
    with ReplayServer([Reply(chunks=[done])]) as server:
        provider = OpenAICompatProvider("m", base_url=server.url + "/v1")
        message, _ = run(provider.complete([LLMMessage(role="user", content="hi")], tools=router.describe()))
        sent = server.requests[0].body
    assert message.content == "ok"
    json.loads(sent.decode("utf-8"), parse_constant=lambda c: pytest.fail(f"{c} in the request"))
    assert json.loads(sent)["tools"] == router.describe()


def test_parameter_names_every_provider_takes_still_register():
    router = ToolRouter()

    @tool(router=router, description="Copy")
    async def copy_range(from_: Annotated[str, Field(alias="from")], to: Annotated[str, Field(alias="to.path")],
                         page_size: Annotated[int, Field(alias="page-size")] = 10) -> list:
        return [from_, to, page_size]

    props = router.describe()[0]["function"]["parameters"]["properties"]
    assert list(props) == ["from", "to.path", "page-size"]
    result = run(router.dispatch(ToolCall(id="c1", name="copy_range", arguments={"from": "a", "to.path": "b"})))
    assert result.data == ["a", "b", 10]
