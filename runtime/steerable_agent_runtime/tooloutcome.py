"""What a tool handler's outcome becomes: the failed result of what it raised, the data it returned.

Guarantees (RUNTIME.md "Tools", docs/loop.md "Tools"):
- :func:`tool_failure` always returns a one-string message, never raises: an exception whose
  ``str()`` raises is named ``<unprintable ...>``; a message longer than :data:`MAX_ERROR_CHARS`
  is cut there (``…[N more characters]``); a credential in the exception's text (a URL's
  password, a ``Bearer``/``Basic`` token, a secret ``name=value`` pair: tracing/redaction.py's
  rules, applied before the cut) is replaced by ``[REDACTED]``, so it reaches neither the model's
  provider nor the history record; text without one is kept as it is;
- :func:`handler_failed` says which exceptions are the handler's own failure (a failed result)
  and which must propagate: KeyboardInterrupt (the process's stop signal) and a CancelledError
  while the running task is being cancelled (a real cancel, a timeout); a CancelledError the
  handler raised itself, SystemExit (a wrapped CLI's ``sys.exit``) and GeneratorExit are failures;
- :func:`json_data` gives the data the model reads or the reason it cannot: pydantic models and
  dataclasses are dumped, also inside lists and dicts; NaN and infinities are refused (they are not
  JSON). Data that is JSON as it stands is returned as it is, with no second pass.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

MAX_ERROR_CHARS = 4000
"""The longest error message the loop builds from an exception (the model reads it whole)."""


def _describe(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that raises must not lose the tool's failure
        return f"<unprintable {type(exc).__name__}>"


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} more characters]"


def exception_text(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, never raising, cut at MAX_ERROR_CHARS."""
    return clip(f"{type(exc).__name__}: {_describe(exc)}")


def tool_failure(name: str, exc: BaseException) -> str:
    """The error the model reads for tool ``name`` that raised ``exc`` (credentials redacted)."""
    from .tracing.redaction import redact  # on a failure only: tools import without tracing

    return clip(redact(f"tool {name!r} raised {type(exc).__name__}: {_describe(exc)}"))


def handler_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (raised out of a handler) is the handler's failure rather than a stop."""
    if isinstance(exc, Exception):
        return True
    if isinstance(exc, KeyboardInterrupt):
        return False
    if isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: nobody can be cancelling us
            return True
        return task is None or task.cancelling() == 0
    return isinstance(exc, (SystemExit, GeneratorExit))


def json_data(value: Any) -> tuple[Any, str | None]:
    """(the data as the model will read it, None) or (None, why it is not JSON)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        from pydantic_core import to_jsonable_python

        try:
            value = to_jsonable_python(value)
        except Exception as exc:  # noqa: BLE001 - any failure here means "not JSON"
            return None, _describe(exc)
    try:
        json.dumps(value, allow_nan=False)
    except TypeError:  # perhaps models or dataclasses in a list or dict: dumped as a bare one is
        try:
            return json.loads(json.dumps(value, allow_nan=False, default=_dump)), None
        except Exception as exc:  # noqa: BLE001 - a dump that fails means "not JSON" too
            return None, _describe(exc)
    except (ValueError, RecursionError) as exc:
        return None, _describe(exc)
    return value, None


def _dump(value: Any) -> Any:
    """``json.dumps``'s ``default``: a pydantic model or a dataclass dumped, anything else refused."""
    from pydantic import BaseModel
    from pydantic_core import to_jsonable_python

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable_python(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
