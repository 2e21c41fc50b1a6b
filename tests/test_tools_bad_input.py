"""ToolRouter red-team: what a handler raises or returns, odd signatures, odd names.

Every outcome is a ToolResult the model can read or a UsageError at registration; never an
exception out of ``dispatch`` (but KeyboardInterrupt and a real cancel of the caller's task).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
import json
import sqlite3
from typing import Annotated, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field, field_serializer
from steerable_agent_runtime.errors import UsageError
from steerable_agent_runtime.tools import MAX_ERROR_CHARS, ToolCall, ToolResult, ToolRouter

from tests.helpers import run


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


def _dispatch(router: ToolRouter, name: str, arguments: dict | None = None):
    return run(router.dispatch(ToolCall(id="c1", name=name, arguments=arguments or {})))


def _router(fn, **kwargs) -> ToolRouter:
    router = ToolRouter()
    router.register(fn, **kwargs)
    return router


@pytest.mark.parametrize("exc", [SystemExit(2), GeneratorExit(), asyncio.CancelledError("by the tool"),
                                 _Unprintable(), ValueError("x" * 1_000_000)],
                         ids=["SystemExit", "GeneratorExit", "CancelledError", "unprintable", "huge"])
def test_what_an_async_handler_raises_becomes_a_failed_result(exc):
    async def breaks() -> None:
        raise exc

    result = _dispatch(_router(breaks), "breaks")
    assert result.success is False
    assert result.error.startswith(f"tool 'breaks' raised {type(exc).__name__}")
    assert len(result.error) <= MAX_ERROR_CHARS + 100
    json.loads(result.to_content())


def test_a_plain_handler_calling_sys_exit_is_a_failed_result():
    def cli(argv: str) -> None:
        raise SystemExit(2)  # an argparse-wrapping tool given bad arguments

    result = _dispatch(_router(cli), "cli", {"argv": "--nope"})
    assert result.success is False and "SystemExit: 2" in result.error


def test_keyboard_interrupt_is_not_swallowed():
    async def stop() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _dispatch(_router(stop), "stop")


def test_a_real_cancel_of_the_caller_still_cancels():
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)

    router = _router(slow)

    async def main() -> bool:
        task = asyncio.ensure_future(router.dispatch(ToolCall(id="c1", name="slow", arguments={})))
        await started.wait()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert run(main()) is True


def test_a_lone_surrogate_or_nul_in_an_error_message_stays_readable():
    async def odd() -> None:
        raise OSError("bad name \udcff and \x00")

    result = _dispatch(_router(odd), "odd")
    assert result.success is False
    content = result.to_content()
    content.encode("utf-8")  # storable: no lone surrogate left in the text
    assert json.loads(content)["error"].endswith("bad name \udcff and \x00")  # the JSON escape says what it was


@pytest.mark.parametrize("value", [float("nan"), {"a": float("inf")}, [float("-inf")]])
def test_data_with_nan_or_infinity_is_a_failed_result(value):
    async def stats() -> object:
        return value

    result = _dispatch(_router(stats), "stats")
    assert result.success is False and "not JSON-serialisable" in result.error
    json.loads(result.to_content())


@pytest.mark.parametrize("value", [b"\xff", {1, 2}, object()], ids=["bytes", "set", "object"])
def test_data_that_is_not_json_is_a_failed_result(value):
    async def odd() -> object:
        return value

    assert _dispatch(_router(odd), "odd").success is False


def test_a_cyclic_value_is_a_failed_result():
    async def cyclic() -> list:
        a: list = []
        a.append(a)
        return a

    result = _dispatch(_router(cyclic), "cyclic")
    assert result.success is False and "Circular" in result.error


def test_a_dataclass_is_dumped_like_a_pydantic_model():
    @dataclasses.dataclass
    class Point:
        x: int
        tags: list[str]

    class Box(BaseModel):
        corner: int

    async def shape(kind: str) -> object:
        return Point(1, ["a"]) if kind == "point" else Box(corner=2)

    router = _router(shape)
    assert _dispatch(router, "shape", {"kind": "point"}).data == {"x": 1, "tags": ["a"]}
    assert _dispatch(router, "shape", {"kind": "box"}).data == {"corner": 2}


def test_a_huge_output_is_kept_whole():
    async def big() -> str:
        return "y" * 2_000_000

    result = _dispatch(_router(big), "big")
    assert result.success is True and len(result.data) == 2_000_000


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_optional_union_literal_enum_and_mutable_defaults():
    async def paint(a: Optional[int] = None, b: Union[int, str] = 1, mode: Literal["x", "y"] = "x",
                    color: Color = Color.RED, seen: list = []) -> list:  # noqa: B006 - the probe
        seen.append(1)
        return [a, b, mode, color.value, len(seen)]

    router = _router(paint)
    props = router.describe()[0]["function"]["parameters"]["properties"]
    assert set(props) == {"a", "b", "mode", "color", "seen"}
    assert _dispatch(router, "paint").data == [None, 1, "x", "red", 1]
    assert _dispatch(router, "paint").data == [None, 1, "x", "red", 1]  # the default is not shared
    assert _dispatch(router, "paint", {"b": "s", "color": "blue"}).data == [None, "s", "x", "blue", 1]
    assert "mode" in _dispatch(router, "paint", {"mode": "z"}).error
    assert "color" in _dispatch(router, "paint", {"color": "green"}).error


@pytest.mark.parametrize("param", ["_private", "__raw_arguments__", "model_config", "model_fields", "model_dump",
                                   "model_validate"])
def test_a_parameter_the_schema_cannot_carry_is_refused_at_registration(param):
    namespace: dict = {}
    exec(f"async def odd({param}: int = 1) -> int:\n    return 1", namespace)
    with pytest.raises(UsageError, match=param):  # model_dump was pydantic's raw ValueError
        ToolRouter().register(namespace["odd"])


@pytest.mark.parametrize("param", ["schema", "json", "copy", "dict", "validate", "construct", "model_name"])
def test_a_parameter_named_like_an_old_basemodel_method_is_an_ordinary_argument(param):
    # run_sql(sql, schema="public"), export(path, json=True): pydantic carries these names (they
    # only shadow BaseModel's deprecated v1 methods); they were refused as "cannot be a schema field"
    namespace: dict = {}
    exec(f"async def odd(x: int, {param}: str = 'd') -> list:\n    return [x, {param}]", namespace)
    router = _router(namespace["odd"])
    props = router.describe()[0]["function"]["parameters"]["properties"]
    assert props[param] == {"type": "string", "default": "d"}
    assert _dispatch(router, "odd", {"x": 1}).data == [1, "d"]
    assert _dispatch(router, "odd", {"x": 1, param: "v"}).data == [1, "v"]


@pytest.mark.parametrize("name", ["<lambda>", "a b", "x" * 65, "dotted.name", "", "naïve"])
def test_a_tool_name_providers_refuse_is_refused_at_registration(name):
    async def fine() -> int:
        return 1

    with pytest.raises(UsageError, match="name"):
        ToolRouter().register(fine, name=name)


def test_a_lambda_needs_a_name():
    with pytest.raises(UsageError, match="name"):
        ToolRouter().register(lambda: 1)
    router = _router(lambda: 1, name="one")
    assert _dispatch(router, "one").data == 1


def test_a_partial_and_a_callable_object_register_from_their_signature():
    async def add(p: int, q: int) -> int:
        return p + q

    class Scale:
        __name__ = "scale"

        async def __call__(self, q: int) -> int:
            return 10 * q

    router = ToolRouter()
    router.register(functools.partial(add, 1), name="inc")
    router.register(Scale())
    assert router.describe()[0]["function"]["parameters"]["required"] == ["q"]
    assert _dispatch(router, "inc", {"q": 5}).data == 6
    assert _dispatch(router, "scale", {"q": 5}).data == 50


def test_a_hint_that_does_not_resolve_is_a_usage_error():
    namespace: dict = {}
    exec("async def odd(q: 'NoSuchType') -> int:\n    return 1", namespace)
    with pytest.raises(UsageError, match="odd"):
        ToolRouter().register(namespace["odd"])


@pytest.mark.parametrize("exc", [StopIteration, StopIteration("done")], ids=["class", "instance"])
def test_a_plain_handler_raising_stop_iteration_is_a_failed_result_not_a_hang(exc):
    # next() on an empty iterator in a plain function: asyncio cannot carry a StopIteration out
    # of the worker thread's future, so the await never ended (the loop said "timed out" 300 s on)
    def first(items: list[int]) -> int:
        if not items:
            raise exc
        return items[0]

    router = _router(first)

    async def main():
        return await asyncio.wait_for(router.dispatch(ToolCall(id="c1", name="first", arguments={"items": []})), 10)

    result = run(main())
    assert result.success is False and "StopIteration" in result.error
    assert _dispatch(router, "first", {"items": [3]}).data == 3


class _AnyBox(BaseModel):
    x: object


class _BadSerializer(BaseModel):
    x: int = 1

    @field_serializer("x")
    def _ser(self, value: int) -> int:
        raise ValueError("serializer broke")


@pytest.mark.parametrize("value", [_AnyBox(x=object()), _AnyBox(x=b"\xff"), _BadSerializer()],
                         ids=["unknown-type", "undecodable-bytes", "serializer-raises"])
def test_a_pydantic_model_that_cannot_be_dumped_is_a_failed_result(value):
    async def odd() -> object:
        return value

    result = _dispatch(_router(odd), "odd")
    assert result.success is False and "not JSON-serialisable" in result.error
    json.loads(result.to_content())


def test_models_and_dataclasses_inside_a_list_or_dict_are_dumped_like_one_returned_alone():
    # a search tool returning [Hit(...), ...] or {"hits": [...]}: each dumped as a bare one is
    @dataclasses.dataclass
    class Point:
        x: int
        when: datetime.date

    class Hit(BaseModel):
        path: str
        at: Point

    hit = Hit(path="a", at=Point(1, datetime.date(2026, 1, 2)))
    dumped = {"path": "a", "at": {"x": 1, "when": "2026-01-02"}}

    async def search(shape: str) -> object:
        return {"list": [hit, hit], "dict": {"hits": [hit], "n": 1}, "point": [Point(2, datetime.date(2026, 1, 3))],
                "result": ToolResult(success=True, data=[hit])}[shape]

    router = _router(search)
    assert _dispatch(router, "search", {"shape": "list"}).data == [dumped, dumped]
    assert _dispatch(router, "search", {"shape": "dict"}).data == {"hits": [dumped], "n": 1}
    assert _dispatch(router, "search", {"shape": "point"}).data == [{"x": 2, "when": "2026-01-03"}]
    assert _dispatch(router, "search", {"shape": "result"}).data == [dumped]


@pytest.mark.parametrize("value", [[{1, 2}], {"a": [object()]}, [_AnyBox(x=object())], {"d": datetime.date(2026, 1, 1)}],
                         ids=["set-inside", "object-inside", "undumpable-model-inside", "bare-date-inside"])
def test_what_is_not_json_inside_a_list_or_dict_is_still_a_failed_result(value):
    async def odd() -> object:
        return value

    result = _dispatch(_router(odd), "odd")
    assert result.success is False and "not JSON-serialisable" in result.error


def test_positional_only_parameters_are_passed_by_position():
    # the schema names them like any other parameter; calling the handler with them as keywords
    # was a TypeError on every call
    async def span(start: int, stop: int = 10, /, step: int = 1, *, label: str = "") -> list:
        return [start, stop, step, label]

    def plain(path: str, /, context) -> list:
        return [path, context]

    router = ToolRouter()
    router.register(span)
    router.register(plain)
    assert router.describe()[0]["function"]["parameters"]["required"] == ["start"]
    assert _dispatch(router, "span", {"start": 1}).data == [1, 10, 1, ""]
    assert _dispatch(router, "span", {"start": 1, "stop": 5, "step": 2, "label": "x"}).data == [1, 5, 2, "x"]
    assert run(router.dispatch(ToolCall(id="c1", name="plain", arguments={"path": "a"}), context="CTX")).data == \
        ["a", "CTX"]
    assert span.__name__ == "span" and router.get("span").handler is span


def test_arguments_a_partial_binds_by_keyword_are_not_the_models():
    # functools.partial(search, api_key=KEY) is how a host injects a secret or a dependency: the
    # bound value was put in the schema as a default (sent to the provider in every request), the
    # model could override it, and a bound object that is not JSON refused the registration
    async def search(query: str, api_key: str, limit: int = 5) -> list:
        return [query, api_key[:3], limit]

    def run_sql(sql: str, conn: sqlite3.Connection) -> list:
        return [list(row) for row in conn.execute(sql).fetchall()]

    router = ToolRouter()
    router.register(functools.partial(functools.partial(search, limit=2), api_key="sk-secret"), name="search")
    router.register(functools.partial(run_sql, conn=sqlite3.connect(":memory:", check_same_thread=False)),
                    name="run_sql", description="Run SQL")
    described = json.dumps(router.describe())
    assert "sk-secret" not in described and "api_key" not in described and "conn" not in described
    assert router.describe()[0]["function"]["parameters"]["properties"].keys() == {"query"}
    assert _dispatch(router, "search", {"query": "q"}).data == ["q", "sk-", 2]
    overridden = _dispatch(router, "search", {"query": "q", "api_key": "mine"})
    assert overridden.success is False and "api_key" in overridden.error
    assert _dispatch(router, "run_sql", {"sql": "select 1"}).data == [[1]]


_TYPE_CHECKING_ONLY = '''
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from decimal import Decimal
    from steerable_agent_runtime.loop import LoopContext

async def with_context(path: str, context: LoopContext) -> dict:
    return {"path": path, "context": context}

async def with_return(path: str) -> Decimal:
    return path

async def with_param(path: Decimal) -> str:
    return path
'''


def test_only_the_schema_parameters_hints_must_resolve():
    # from __future__ import annotations and a type imported under TYPE_CHECKING: the context
    # parameter's hint and the return type are in no schema, yet they refused the registration
    namespace: dict = {}
    exec(_TYPE_CHECKING_ONLY, namespace)
    router = ToolRouter()
    router.register(namespace["with_context"])
    router.register(namespace["with_return"])
    assert [d["function"]["parameters"]["required"] for d in router.describe()] == [["path"], ["path"]]
    assert run(router.dispatch(ToolCall(id="c1", name="with_context", arguments={"path": "a"}), context="CTX")).data \
        == {"path": "a", "context": "CTX"}
    assert _dispatch(router, "with_return", {"path": "b"}).data == "b"
    with pytest.raises(UsageError, match="parameter 'path'.*Decimal"):
        router.register(namespace["with_param"])


def test_a_partial_without_a_description_is_described_by_its_functions_docstring():
    # inspect.getdoc(partial) is functools.partial's own docstring: the model read
    # "partial(func, *args, **keywords) - new function with partial application..."
    async def add(p: int, q: int) -> int:
        """Add two numbers."""
        return p + q

    async def bare(q: int) -> int:
        return q

    router = ToolRouter()
    router.register(functools.partial(functools.partial(add, 1)), name="inc")
    router.register(functools.partial(bare), name="bare")
    assert [d["function"]["description"] for d in router.describe()] == ["Add two numbers.", ""]


def test_a_generator_function_is_refused_at_registration():
    # its body never ran: every call returned a generator object, "not JSON-serialisable"
    def lines(path: str):
        yield path

    async def chunks(path: str):
        yield path

    class Streamer:
        __name__ = "streamer"

        async def __call__(self, path: str):
            yield path

    for handler, kwargs in ((lines, {}), (chunks, {}), (functools.partial(lines), {"name": "p"}), (Streamer(), {})):
        router = ToolRouter()
        with pytest.raises(UsageError, match="generator") as err:
            router.register(handler, **kwargs)
        assert "return" in err.value.hint and router.names == []


def _ctx_int(pattern: str, context: int = 2) -> list: ...
def _ctx_text(query: str, context: Optional[str] = None) -> list: ...
def _ctx_lines(pattern: str, context: Annotated[list[str], Field(description="lines")]) -> list: ...
def _ctx_default(pattern: str, context=3) -> list: ...
def _ctx_literal(pattern: str, context: Literal["a", "b"] = "a") -> list: ...


@pytest.mark.parametrize("handler", [_ctx_int, _ctx_text, _ctx_lines, _ctx_default, _ctx_literal],
                         ids=["int", "optional-str", "annotated-list", "untyped-default", "literal"])
def test_a_context_parameter_declared_as_a_model_argument_is_refused(handler):
    # grep(pattern, context: int = 2): the parameter named context silently received dispatch's
    # context (None, or the loop's LoopContext) instead of 2, and the model could not set it
    with pytest.raises(UsageError, match="'context'") as err:
        ToolRouter().register(handler)
    assert "rename" in err.value.hint


def test_a_context_parameter_for_the_dispatch_context_still_registers():
    from steerable_agent_runtime.loop import LoopContext

    def untyped(x: int, context) -> int: ...
    def typed(x: int, context: LoopContext) -> int: ...
    def optional(x: int, context: Optional[LoopContext] = None) -> int: ...
    def anything(x: int, context: object = None) -> int: ...
    def host_dict(x: int, context: dict[str, int]) -> int: ...  # a host's own dispatch(context={...})

    for handler in (untyped, typed, optional, anything, host_dict):
        router = _router(handler)
        assert list(router.describe()[0]["function"]["parameters"]["properties"]) == ["x"]
