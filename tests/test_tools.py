"""ToolRouter: schemas from type hints, modes and consent, and every dispatch outcome."""

from __future__ import annotations

import json

import pytest
from steerable_agent_runtime.errors import UsageError
from steerable_agent_runtime.tools import (
    RAW_ARGUMENTS_KEY,
    ToolCall,
    ToolConsentError,
    ToolResult,
    ToolRouter,
    decode_arguments,
    tool,
)

from tests.helpers import run


def test_seed_read_file_example_works_as_written():
    router = ToolRouter()

    @tool(router=router, description="Read a file", mode="read")
    async def read_file(path: str) -> dict:
        return {"path": path, "content": "..."}

    result = run(router.dispatch(
        ToolCall(id="c1", name="read_file", arguments={"path": "README.md"}),
        consent_granted=False,                # required for `local` tools
    ))
    assert result == ToolResult(success=True, data={"path": "README.md", "content": "..."})
    assert read_file.tool_spec.mode == "read"


def test_describe_gives_openai_function_form_from_type_hints():
    router = ToolRouter()

    @tool(router=router, description="Search", mode="external")
    async def search(query: str, limit: int = 5, tags: list[str] | None = None) -> list:
        return []

    [described] = router.describe()
    assert described["type"] == "function"
    fn = described["function"]
    assert fn["name"] == "search" and fn["description"] == "Search"
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {"type": "string"}
    assert params["properties"]["limit"] == {"type": "integer", "default": 5}
    assert params["additionalProperties"] is False


def test_duplicate_name_unknown_mode_and_untyped_parameter_are_refused():
    router = ToolRouter()

    @tool(router=router, description="x")
    async def dup() -> None: ...

    with pytest.raises(UsageError, match="already registered"):
        router.register(dup, description="again")
    with pytest.raises(UsageError, match="unknown mode 'writeish'"):
        router.register(lambda: None, name="bad", mode="writeish")

    async def untyped(path):
        return path

    with pytest.raises(UsageError, match="no type hint"):
        router.register(untyped)
    assert router.names == ["dup"]


@pytest.mark.parametrize("mode", ["local", "destructive"])
def test_consent_modes_raise_without_consent_and_run_nothing(mode):
    router = ToolRouter()
    ran = []

    @tool(router=router, description="rm", mode=mode)
    async def remove(path: str) -> str:
        ran.append(path)
        return "gone"

    call = ToolCall(id="c1", name="remove", arguments={"path": "/tmp/x"})
    with pytest.raises(ToolConsentError) as info:
        run(router.dispatch(call))
    assert "remove" in str(info.value) and mode in str(info.value)
    assert ran == []
    assert run(router.dispatch(call, consent_granted=True)) == ToolResult(success=True, data="gone")
    assert ran == ["/tmp/x"]


@pytest.mark.parametrize("mode", ["read", "safe_write", "external"])
def test_other_modes_need_no_consent(mode):
    router = ToolRouter()
    router.register(lambda: "ok", name="t", description="t", mode=mode)
    assert run(router.dispatch(ToolCall(id="c", name="t"))).success


def test_unknown_tool_names_the_closest_names():
    router = ToolRouter()
    for name in ("read_file", "write_file", "list_dir"):
        router.register(lambda: None, name=name, description=name)
    result = run(router.dispatch(ToolCall(id="c", name="read_fil")))
    assert not result.success and "'read_fil'" in result.error and "read_file" in result.error
    far = run(router.dispatch(ToolCall(id="c", name="zzz")))
    assert "available tools: read_file, write_file, list_dir" in far.error


def test_invalid_arguments_name_the_argument_and_skip_the_handler():
    router = ToolRouter()
    calls = []

    @tool(router=router, description="add")
    async def add(a: int, b: int) -> int:
        calls.append((a, b))
        return a + b

    wrong_type = run(router.dispatch(ToolCall(id="c", name="add", arguments={"a": "one", "b": 2})))
    missing = run(router.dispatch(ToolCall(id="c", name="add", arguments={"a": 1})))
    extra = run(router.dispatch(ToolCall(id="c", name="add", arguments={"a": 1, "b": 2, "c": 3})))
    assert not wrong_type.success and "a:" in wrong_type.error
    assert not missing.success and "b:" in missing.error
    assert not extra.success and "c:" in extra.error
    assert calls == []
    assert run(router.dispatch(ToolCall(id="c", name="add", arguments={"a": 1, "b": 2}))).data == 3


def test_arguments_that_were_not_json_are_a_failed_result():
    router = ToolRouter()

    @tool(router=router, description="r")
    async def read(path: str) -> str:
        raise AssertionError("must not run")

    args = decode_arguments('{"path": "a"')  # truncated JSON from the model
    assert args == {RAW_ARGUMENTS_KEY: '{"path": "a"'}
    result = run(router.dispatch(ToolCall(id="c", name="read", arguments=args)))
    assert not result.success and "not a JSON object" in result.error
    assert decode_arguments("") == {} and decode_arguments('{"a": 1}') == {"a": 1}
    assert decode_arguments("[1]") == {RAW_ARGUMENTS_KEY: "[1]"}


def test_handler_exception_is_a_failed_result_with_its_message():
    router = ToolRouter()

    @tool(router=router, description="boom")
    async def boom() -> None:
        raise RuntimeError("disk on fire")

    result = run(router.dispatch(ToolCall(id="c", name="boom")))
    assert result.success is False and "RuntimeError: disk on fire" in result.error


def test_return_values_dict_toolresult_other_and_not_serialisable():
    router = ToolRouter()
    values = {"d": {"k": 1}, "r": ToolResult(success=False, error="nope", needs_followup=True), "s": "text",
              "n": 7, "bad": object(), "badset": {1, 2}}
    def returning(value):
        return lambda: value

    for key, value in values.items():
        router.register(returning(value), name=key, description=key)
    out = {k: run(router.dispatch(ToolCall(id="c", name=k))) for k in values}
    assert out["d"] == ToolResult(success=True, data={"k": 1})
    assert out["r"] == values["r"]
    assert out["s"].data == "text" and out["n"].data == 7
    for key in ("bad", "badset"):
        assert not out[key].success and "not JSON-serialisable" in out[key].error


def test_sync_handler_and_context_parameter():
    router = ToolRouter()
    seen = []

    @tool(router=router, description="ctx")
    def where(name: str, context) -> str:
        seen.append(context)
        return name

    assert "context" not in router.describe()[0]["function"]["parameters"]["properties"]
    result = run(router.dispatch(ToolCall(id="c", name="where", arguments={"name": "x"}), context="CTX"))
    assert result.data == "x" and seen == ["CTX"]


def test_to_content_is_the_json_the_model_reads():
    assert json.loads(ToolResult(success=True, data={"a": 1}).to_content()) == {"success": True, "data": {"a": 1}}
    assert json.loads(ToolResult.failed("denied").to_content()) == {"success": False, "error": "denied"}


@pytest.mark.parametrize("granted", ["no", "false", 1, [False], object()])
def test_consent_fails_closed_only_true_grants_it(granted):
    # consent_granted=request.form["approved"] ("false", a truthy string) ran a destructive tool;
    # the loop's approver already fails closed the same way
    router = ToolRouter()
    ran = []

    @tool(router=router, description="rm", mode="destructive")
    async def remove(path: str) -> str:
        ran.append(path)
        return "gone"

    class Ctx:
        consent_granted = granted

    call = ToolCall(id="c1", name="remove", arguments={"path": "/tmp/x"})
    with pytest.raises(ToolConsentError, match="not True"):
        run(router.dispatch(call, consent_granted=granted))
    with pytest.raises(ToolConsentError):
        run(router.execute(call, Ctx()))
    assert ran == []
