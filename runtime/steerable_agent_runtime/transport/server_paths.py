"""What an HTTP client is told of an error: its code and its message, without the server's paths.

A store error names where the store lives (``/srv/app/sessions.db: SQLite reports damage``, and
``data.path``); an unexpected error's text may name any file of the server. The stdio sidecar
sends them whole: its host app owns the file. Over HTTP they would go to any client, so
``create_app`` passes every error it sends through a :class:`PathScrubber`.

Guarantees:
- The store's location (each one the storage was opened with: the path as given, absolute and
  resolved, or a database URL without its password; and the ``data.path`` the error carries)
  becomes ``the store``, and a path inside the store's directory names ``the store's
  directory``. Any other absolute filesystem path (``/a/b``, ``~/a``, ``C:\\a``, a ``file:`` URI)
  becomes ``<path>``. A web URL stays as it is (``http://collector:4318/v1/traces``).
- A network address outside a web URL becomes ``<address>``: an IPv4 address
  (``Connect call failed ('10.0.0.5', 5432)``), and an IPv6 address in quotes or brackets
  (``('fd00::5', 5432, 0, 0)``). So does the host name of a database URL the store was opened
  with (``could not translate host name "db.internal"``), wherever it stands alone. An address
  inside a web URL stays, with the URL (``http://127.0.0.1:4318/v1/traces``).
- ``data.path`` is dropped; every other string in ``message`` and ``data`` (``hint`` included)
  is scrubbed; the code and every other field are kept.
- Whenever scrubbing changed an error, the whole error is logged on the server first (logger
  ``steerable.server``, WARNING): the operator still reads which file it was.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from typing import Any

from .base import SSEEvent

log = logging.getLogger("steerable.server")

STORE = "the store"
STORE_DIRECTORY = "the store's directory"
OTHER_PATH = "<path>"
ADDRESS = "<address>"

# An absolute path not inside a web URL: not right after a word character, ".", ":", "/", "\",
# "-" or "]" (so "http://h:4318/v1", "http://[::1]/v1" and "docs/sidecar.md" stay), up to a
# space, a quote or a bracket.
_ABSOLUTE = re.compile(r"""\bfile:[^\s'"`]*|(?<![\w.:/\\~\]-])(?:~?/(?=[^\s/])|[A-Za-z]:[\\/])[^\s'"`,;()\[\]{}<>|]*""")


# An IPv4 address not inside a URL or a longer dotted number (a version "1.2.3.4.5" stays).
_IPV4 = re.compile(r"(?<![\w.:/@-])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])")
# An IPv6 address in quotes or brackets (not a URL's "//[" or "@["): hex groups and colons with
# "::" or seven colons (so a quoted time '11:10:13' stays), perhaps an IPv4 tail and a zone (%eth0).
_IPV6 = re.compile(r"""(?:(?<=['"])|(?<=\[)(?<!//\[)(?<!@\[))(?=[0-9A-Fa-f:.]*::|(?:[0-9A-Fa-f]*:){7})[0-9A-Fa-f:.]{2,45}(?:%[\w.-]+)?(?=['"\]])""")


def store_hosts(storage: Any) -> list[str]:
    """The host name of the database URL ``storage`` was opened with (SqlAlchemyStorage on a
    server: PostgreSQL), if it is one; none for a file or a store in memory."""
    url = getattr(storage, "url", None)
    host = getattr(url, "host", None)
    if getattr(storage, "backend", None) in (None, "sqlite") or not isinstance(host, str) or not host:
        return []
    return [host]


def store_locations(storage: Any) -> list[str]:
    """Where ``storage`` keeps its data, each way an error may spell it (none for a store in
    memory): SqliteStorage's ``path`` as given, absolute and resolved; SqlAlchemyStorage's
    ``where`` (its URL, password hidden)."""
    found: list[str] = []
    where = getattr(storage, "where", None)
    if isinstance(where, str):
        found.append(where)
    path = getattr(storage, "path", None)
    if getattr(storage, "backend", None) == "sqlite":  # SqlAlchemyStorage on a SQLite file
        path = getattr(getattr(storage, "url", None), "database", None)
    if isinstance(path, (str, os.PathLike)) and os.fspath(path) not in ("", ":memory:"):
        found += [os.fspath(path), os.path.abspath(path), os.path.realpath(path)]
    return [f for f in dict.fromkeys(found) if f]


class PathScrubber:
    """Scrubs the errors one server sends (see the module guarantees)."""

    def __init__(self, locations: Iterable[str] = (), hosts: Iterable[str] = ()) -> None:
        self.locations = list(locations)
        self.hosts = list(hosts)

    def error(self, wire: dict[str, Any], method: str) -> dict[str, Any]:
        """A JSON-RPC error object (``{code, message, data}``) as an HTTP client may see it."""
        data = wire.get("data") if isinstance(wire.get("data"), dict) else {}
        scrub = self._for(data.get("path"))
        out = {**wire, "message": scrub(str(wire.get("message", "")))}
        if "data" in wire:
            out["data"] = {k: _strings(v, scrub) for k, v in data.items() if k != "path"}
        if out != wire:
            log.warning("%s: error %s sent to an HTTP client with the server's paths hidden: %s (%s)", method,
                        wire.get("code"), wire.get("message"), {k: v for k, v in data.items() if k != "hint"})
        return out

    def event(self, event: SSEEvent, method: str) -> SSEEvent:
        """``event`` as an HTTP client may see it: a ``stream.error``'s error and a ``stream.done``'s
        ``reason`` scrubbed; any other event as it is."""
        data = event.data
        if event.event == "stream.error" and isinstance(data, dict):
            error = self.error({k: data[k] for k in ("code", "message", "data") if k in data}, method)
            return SSEEvent(event.event, {**data, **error}, event.id)
        if event.event == "stream.done" and isinstance(data, dict) and isinstance(data.get("reason"), str):
            reason = self._for(None)(data["reason"])
            if reason != data["reason"]:  # the stream.error before it logged the error at WARNING
                log.debug("%s: stream %s ended %s: %s", method, data.get("streamId"), data.get("status"), data["reason"])
                return SSEEvent(event.event, {**data, "reason": reason}, event.id)
        return event

    def _for(self, path: Any) -> Any:
        """The text scrubber for an error that names ``path`` (the store as the error spells it)."""
        known = [*self.locations, *([path] if isinstance(path, str) and path else [])]
        return lambda text: scrub_text(text, known, self.hosts)


def scrub_text(text: str, locations: Iterable[str], hosts: Iterable[str] = ()) -> str:
    """``text`` with each of ``locations`` (a store), every other absolute path, each of
    ``hosts`` (the store's database host) and every network address outside a URL replaced
    (see the module guarantees)."""
    pairs: dict[str, str] = {}
    for location in locations:
        pairs.setdefault(location, STORE)
        directory = os.path.dirname(location) if os.path.isabs(location) else ""
        if directory and directory != os.path.dirname(directory):  # never the root itself
            pairs.setdefault(directory, STORE_DIRECTORY)
    for found in sorted(pairs, key=len, reverse=True):  # a store before its directory
        text = re.sub(r"(?<![\w.\-/\\])" + re.escape(found) + r"(?!\w)", lambda _m, f=found: pairs[f], text)
    text = _ABSOLUTE.sub(OTHER_PATH, text)
    for host in sorted(set(hosts), key=len, reverse=True):  # alone: not inside a URL or a longer name
        text = re.sub(r"(?<![\w.\-/@:])" + re.escape(host) + r"(?![\w.-]*\w)", ADDRESS, text)
    return _IPV6.sub(ADDRESS, _IPV4.sub(ADDRESS, text))


def _strings(value: Any, scrub: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _strings(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, scrub) for v in value]
    return value
