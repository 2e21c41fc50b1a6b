"""JSON-RPC 2.0 framing: error codes, RpcError, and classifying one incoming frame.

Guarantees:
- ``parse_frame`` never raises: a frame is a Request, a Notification, a Response, or an
  RpcError to send back (-32700 for bytes that are not UTF-8 or not JSON, including
  ``NaN`` / ``Infinity``, which RFC 8259 does not allow, a number too large for a double
  (``1e400``, which would read as infinity), and values nested deeper than the
  parser recurses; -32600 for a JSON value that is not a request; the error's ``id`` is the
  request's when it can be read, else None).
- Every RpcError carries ``data.hint``.
- ``encode`` produces one line of ASCII JSON (no raw newline can appear inside it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import SteerableError
from .base import dumps
from .frame_check import MAX_DEPTH, find_problem

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NOT_FOUND = -32001
UNAVAILABLE = -32002
RECORD_FORMAT = -32003
CONSENT_DENIED = -32004
PROVIDER_ERROR = -32005
TURN_FAILED = -32006
"""A turn the loop ended as failed for its own limit, not a provider's error nor a bug:
``max_tool_errors`` (the host's tools kept failing; ``data.kind`` ``tool_errors``)."""
NOT_ALLOWED = -32007
"""A request this deployment's configuration does not allow (HTTP 403 over HTTP): ``trace.export``
to an endpoint the server was not configured to export to (``data.field`` ``endpoint``), a
stream's ``provider.baseUrl`` or ``provider.apiKeyEnv`` the server does not allow (``data.field``
names which)."""

RequestId = str | int | None


class RpcError(SteerableError):
    """A JSON-RPC error to send to the peer: ``code``, message, ``data`` (always with ``hint``)."""

    exit_code = 2
    default_hint = "see docs/sidecar.md for the methods and their params"

    def __init__(self, code: int, message: str, *, hint: str | None = None,
                 data: dict[str, Any] | None = None, request_id: RequestId = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.data = {**(data or {}), "hint": self.hint}
        self.request_id = request_id
        self.silent = False  # the answer to a notification: logged, never sent
        self.malformed_answer = False  # the frame had no method: a peer's answer that is no response

    def to_wire(self) -> dict[str, Any]:
        """The ``error`` member of a response."""
        return {"code": self.code, "message": self.message, "data": self.data}


@dataclass(frozen=True)
class Request:
    """A call that wants an answer (``id`` present)."""

    id: str | int
    method: str
    params: Any


@dataclass(frozen=True)
class Notification:
    """A call without ``id``: never answered, not even with an error."""

    method: str
    params: Any


@dataclass(frozen=True)
class Response:
    """An answer to a request this side sent (``result`` or ``error``)."""

    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


Frame = Request | Notification | Response | RpcError


def encode(message: dict[str, Any]) -> bytes:
    """One newline-terminated ASCII JSON line (a NaN or infinity written as null: see
    ``base.dumps``)."""
    return (dumps(message) + "\n").encode()


def result_message(request_id: str | int, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()}


def notification_message(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request_message(request_id: str | int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _decode(raw: bytes, what: str, hint: str) -> Any:
    """The JSON value of ``raw``, or an RpcError -32700 (see the module guarantees)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RpcError(PARSE_ERROR, f"parse error: {what} is not UTF-8 (byte {exc.start})", hint=hint)
    try:
        return _DECODER.decode(text)
    except ValueError as exc:
        return RpcError(PARSE_ERROR, f"parse error: {what} is not JSON ({exc})", hint=hint)
    except RecursionError:
        return RpcError(PARSE_ERROR, f"parse error: {what} nests arrays or objects too deeply to read",
                        hint=f"send values nested at most {MAX_DEPTH} levels deep")


_VALUE_HINT = f"send text as valid Unicode and values nested at most {MAX_DEPTH} levels deep"


def parse_body(raw: bytes) -> Any:
    """The params an HTTP body holds, read as strictly as a frame: the value, or an RpcError
    (-32700 as for a frame, -32602 naming a field frame_check refuses)."""
    value = _decode(raw, "the body", "POST the params as a JSON object")
    if isinstance(value, RpcError):
        return value
    problem = find_problem(raw, value)
    if problem is None:
        return value
    path, why = problem
    field = ".".join(map(str, path)) or "params"
    return RpcError(INVALID_PARAMS, f"invalid params: {field} {why}", data={"field": field},
                    hint=_VALUE_HINT)


def parse_frame(line: bytes) -> Frame:
    """Classify one frame (without its newline)."""
    value = _decode(line, "the frame", "send each message as one line of UTF-8 JSON")
    if isinstance(value, RpcError):
        return value
    frame = classify(value)
    if isinstance(frame, RpcError):
        return frame
    problem = find_problem(line, value)
    return frame if problem is None else _refuse(frame, *problem)


def _refuse(frame: Frame, path: list[str | int], why: str) -> Frame:
    """The answer to a well-formed ``frame`` whose value at ``path`` no part can take (see
    frame_check): -32602 naming the field inside params, -32600 elsewhere; a host's response
    becomes an error response (the reverse request fails); a notification stays unanswered."""
    head, rest = (path[0], path[1:]) if path else ("", [])
    field = ".".join(map(str, rest))
    if isinstance(frame, Response):
        return Response(frame.id, None, {"code": INVALID_PARAMS, "message": f"the host's answer: {head}.{field} {why}"})
    if head == "params" and field:
        err = RpcError(INVALID_PARAMS, f"invalid params for {frame.method}: {field} {why}", hint=_VALUE_HINT,
                       data={"field": field}, request_id=frame.id if isinstance(frame, Request) else None)
    else:
        err = RpcError(INVALID_REQUEST, f"invalid request: {'.'.join(map(str, path)) or 'the frame'} {why}", hint=_VALUE_HINT)
    err.silent = isinstance(frame, Notification)
    return err


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (RFC 8259); send a number, a string or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):  # 1e400: JSON by the grammar, but no double holds it
        raise ValueError(f"the number {text} is too large for a double (RFC 8259 section 6); send a smaller one")
    return value


_INF = float("inf")
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)  # NaN, Infinity, 1e400


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int)) and not isinstance(value, bool))


def classify(value: Any) -> Frame:
    """Classify a decoded JSON value as a frame (see module guarantees)."""
    if isinstance(value, list):
        return RpcError(INVALID_REQUEST, "invalid request: batch arrays are not supported",
                        hint="send one request object per line")
    if not isinstance(value, dict):
        return RpcError(INVALID_REQUEST, f"invalid request: a frame must be a JSON object, not {type(value).__name__}",
                        hint='send {"jsonrpc": "2.0", "id": 1, "method": "system.ping"}')
    rid = value.get("id")
    reply_id = rid if "id" in value and _valid_id(rid) else None
    if value.get("jsonrpc") != "2.0":
        err = RpcError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"',
                       hint='add "jsonrpc": "2.0" to every message', request_id=reply_id)
        err.malformed_answer = "method" not in value
        return err
    if "id" in value and not _valid_id(rid):
        return RpcError(INVALID_REQUEST, "invalid request: id must be a string or an integer",
                        hint="use a string or integer id")
    if "method" not in value:
        if "result" in value or "error" in value:
            return _response(value)
        err = RpcError(INVALID_REQUEST, 'invalid request: "method" is missing',
                       hint='name the method in "method"', request_id=reply_id)
        err.malformed_answer = True
        return err
    method = value["method"]
    if not isinstance(method, str) or not method:
        return RpcError(INVALID_REQUEST, 'invalid request: "method" must be a non-empty string',
                        hint='name the method in "method"', request_id=reply_id)
    params = value.get("params", {})
    if "id" not in value:
        return Notification(method, params)
    return Request(rid, method, params)


def _response(value: dict[str, Any]) -> Frame:
    error = value.get("error")
    if "error" in value and not isinstance(error, dict):
        error = {"code": INTERNAL_ERROR, "message": f"malformed error member: {error!r}"}
    return Response(value.get("id"), value.get("result"), error)
