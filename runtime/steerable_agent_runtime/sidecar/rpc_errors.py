"""How a failure becomes a JSON-RPC error: one table, every code with ``data.hint``.

-32602 invalid params (pydantic ValidationError: the field named), -32001 not found,
-32002 store owned, unavailable or damaged (a checksum mismatch included: the store's
fault, not a bug) / a chat already streaming / a trace collector that
refused the export, -32003 record format (newer
build: the remedy in ``data.hint``), -32004 consent denied, -32005 provider error
(``data.kind``), -32603 anything else (internal).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from ..errors import (
    DatabaseDamagedError,
    DataIntegrityError,
    ExportError,
    HistorySeqConflictError,
    NotAStoreError,
    RecordFormatError,
    RepairInterruptedError,
    SchemaTooNewError,
    SteerableError,
    StoreAlreadyOwnedError,
    StoreClosedError,
    StoreConnectionError,
    StoreServerError,
    UsageError,
)
from ..llm.errors import LLMError, ProviderConfigError
from ..tools import ToolConsentError
from ..transport.jsonrpc import (
    CONSENT_DENIED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    PROVIDER_ERROR,
    RECORD_FORMAT,
    UNAVAILABLE,
    RpcError,
)

log = logging.getLogger("steerable.sidecar")

_CODES: list[tuple[type[BaseException], int]] = [
    (StoreAlreadyOwnedError, UNAVAILABLE), (StoreClosedError, UNAVAILABLE), (NotAStoreError, UNAVAILABLE),
    (DatabaseDamagedError, UNAVAILABLE), (DataIntegrityError, UNAVAILABLE), (HistorySeqConflictError, UNAVAILABLE),
    (RepairInterruptedError, UNAVAILABLE), (StoreConnectionError, UNAVAILABLE), (StoreServerError, UNAVAILABLE),
    (RecordFormatError, RECORD_FORMAT), (SchemaTooNewError, RECORD_FORMAT),
    (UsageError, INVALID_PARAMS), (ProviderConfigError, INVALID_PARAMS), (ExportError, UNAVAILABLE),
]


def invalid_params(exc: ValidationError, method: str) -> RpcError:
    """-32602 naming the first bad field (camelCase, dotted path) and what is wrong with it."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "params"
    return RpcError(INVALID_PARAMS, f"invalid params for {method}: {field}: {first['msg']}",
                    hint=f"fix params.{field} (see docs/sidecar.md for {method})",
                    data={"field": field, "errors": len(exc.errors())})


def to_rpc_error(exc: BaseException, method: str) -> RpcError:
    """The RpcError to answer ``exc`` with (an unexpected exception is logged with its traceback)."""
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, ValidationError):
        return invalid_params(exc, method)
    if isinstance(exc, SteerableError):
        return _steerable(exc)
    log.exception("internal error in %s", method, exc_info=exc)
    return RpcError(INTERNAL_ERROR, f"internal error in {method}: {type(exc).__name__}: {exc}",
                    hint="a bug: report it with the sidecar's stderr log")


def _steerable(exc: SteerableError) -> RpcError:
    data: dict[str, Any] = {"error": type(exc).__name__}
    for key in ("record_id", "seq", "version", "path"):
        value = getattr(exc, key, None)
        if value is not None:
            data[_camel(key)] = value
    if isinstance(exc, LLMError):
        data.update({"kind": exc.kind, "provider": exc.provider, "statusCode": exc.status_code})
        return RpcError(PROVIDER_ERROR, exc.message, hint=exc.hint, data=data)
    if isinstance(exc, ToolConsentError):
        return RpcError(CONSENT_DENIED, exc.message, hint=exc.hint, data=data)
    code = next((c for cls, c in _CODES if isinstance(exc, cls)), INTERNAL_ERROR)
    return RpcError(code, exc.message, hint=exc.hint, data=data)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)
