"""Where ``trace.export`` may POST a trace: anywhere the caller names, or only to endpoints the
operator configured.

The stdio sidecar takes any endpoint: only its host app (which started it) can call it. Over
HTTP any client can, and an endpoint it chose would make the server POST to whatever it can
reach (internal services, a cloud metadata address: server-side request forgery), sending the
server's ``OTEL_EXPORTER_OTLP_HEADERS`` along. So ``create_app`` takes an allowlist
(``export_endpoints``) and refuses every other endpoint.

Guarantees:
- ``ExportEndpoints.anywhere()`` resolves any endpoint the exporter accepts (a malformed one is
  the exporter's UsageError, -32602).
- ``ExportEndpoints.only(urls)`` checks each configured URL up front (ConfigValueError naming
  ``export_endpoints``); then ``resolve`` returns the configured collector URL an endpoint names
  (the same traces URL once ``/v1/traces`` is appended; scheme and host compared without case),
  and refuses any other endpoint, every endpoint when the list is empty, with RpcError -32007
  (NOT_ALLOWED, one line, a hint saying how to configure it). A refusal happens before the
  trace is read and before any connection is made.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigValueError, UsageError
from ..tracing.exporter import traces_url
from ..transport.jsonrpc import NOT_ALLOWED, RpcError

CONFIGURE_HINT = ("the server's operator allows collectors with create_app(storage, export_endpoints=[\"http://"
                  "collector:4318\"]) (docs/sidecar.md, \"trace.export over HTTP\")")


class ExportEndpoints:
    """The endpoints ``trace.export`` may POST to (see the module guarantees)."""

    def __init__(self, allowed: dict[str, str] | None) -> None:
        self._allowed = allowed  # canonical traces URL -> the configured URL; None: any endpoint

    @classmethod
    def anywhere(cls) -> ExportEndpoints:
        """Any endpoint: the stdio sidecar, whose only caller is the host app that started it."""
        return cls(None)

    @classmethod
    def only(cls, urls: Iterable[str] | None) -> ExportEndpoints:
        """Only ``urls`` (collector base URLs or full traces URLs); none (or None): trace.export refused.

        Raises ConfigValueError (parameter ``export_endpoints``) for a str instead of a list and
        for a URL the exporter could not use (the URL shown with any credentials masked)."""
        if isinstance(urls, (str, bytes)):
            raise ConfigValueError("export_endpoints must be a list of collector URLs, not one string",
                                   parameter="export_endpoints", hint='pass a list: export_endpoints=["http://collector:4318"]')
        allowed: dict[str, str] = {}
        for url in urls or ():
            try:
                full = traces_url(url)
            except UsageError as exc:
                raise ConfigValueError(f"export_endpoints: {exc.message.removeprefix('--endpoint: ')}",
                                       parameter="export_endpoints", hint=exc.hint) from None
            allowed[_canonical(full)] = full
        return cls(allowed)

    def resolve(self, endpoint: str) -> str:
        """The collector URL to export to for the caller's ``endpoint``; RpcError -32007 when it
        is not allowed, UsageError when it is not a usable URL."""
        if self._allowed is None:
            return endpoint
        if not self._allowed:
            raise RpcError(NOT_ALLOWED, "trace.export is not enabled on this server: no export endpoint is configured",
                           hint=CONFIGURE_HINT, data={"field": "endpoint"})
        found = self._allowed.get(_canonical(traces_url(endpoint)))
        if found is None:
            raise RpcError(NOT_ALLOWED, "trace.export to this endpoint is not allowed on this server: it is not one "
                           "of the configured export endpoints",
                           hint="export to a collector the server's operator configured; " + CONFIGURE_HINT,
                           data={"field": "endpoint"})
        return found


def _canonical(url: str) -> str:
    """``url`` with its scheme and host in lower case (they name the same collector in any case)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower()))
