"""PEP 562 lazy exports: a package's public names resolved from their module on first access.

Used by the packages whose ``__init__`` must stay cheap to import (the sidecar starts inside a
desktop app): ``llm``, ``tracing``, ``transport``. Imports nothing but the stdlib.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps each lazy name to the relative
    module defining it; the value found is cached in ``namespace`` (the package's ``globals()``),
    so each name is imported once. Any other name raises AttributeError, as a module does."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__
