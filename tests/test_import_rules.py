"""The layering rules of DESIGN.md, checked on the source (every import statement, also the
ones inside functions and under TYPE_CHECKING): a rule broken anywhere fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import steerable_agent_runtime

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = Path(steerable_agent_runtime.__file__).parent
CLI = ROOT / "steerable_maint"
PKG = "steerable_agent_runtime"


def _module_name(path: Path, base: Path, package: str) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def imports_of(path: Path, base: Path, package: str) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names) of every import in ``path``, relative ones resolved."""
    name = _module_name(path, base, package)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            found.append((node.lineno, target, names))
            if not node.module:  # "from . import x": x is a module too
                found += [(node.lineno, f"{target}.{n}", []) for n in names]
    return found


def library_imports() -> list[tuple[str, int, str, list[str]]]:
    out = []
    for path in sorted(LIBRARY.rglob("*.py")):
        for line, target, names in imports_of(path, LIBRARY, PKG):
            out.append((_module_name(path, LIBRARY, PKG), line, target, names))
    return out


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


RULES = [
    # (importer prefix, forbidden import prefix, why)
    (PKG, "click", "the library never imports click (the CLI does)"),
    (PKG, "rich", "the library never imports rich (the CLI does)"),
    (PKG, "steerable_maint", "the library never imports the CLI"),
    (f"{PKG}.storage", f"{PKG}.maintenance", "storage is below maintenance"),
    (f"{PKG}.history", f"{PKG}.maintenance", "the history record is below maintenance"),
    (f"{PKG}.history", f"{PKG}.storage", "history reads through the HistoryReader protocol, not storage"),
    (f"{PKG}.tracing", f"{PKG}.maintenance", "tracing is below maintenance"),
    (f"{PKG}.models", f"{PKG}.storage", "the wire models are below storage"),
    (f"{PKG}.errors", PKG + ".", "errors is the bottom of the tree"),
]


def violations(rules=RULES, found=None) -> list[str]:
    found = library_imports() if found is None else found
    bad = []
    for importer, line, target, _names in found:
        for prefix, forbidden, why in rules:
            hit = _within(target, forbidden) or (forbidden.endswith(".") and target.startswith(forbidden))
            if _within(importer, prefix) and hit and not _within(target, importer):
                bad.append(f"{importer}:{line} imports {target}: {why}")
    return bad


def test_no_layering_rule_is_broken():
    assert violations() == []


def test_sqlitefile_is_a_leaf():
    bad = [f"{importer}:{line} imports {target}" for importer, line, target, _ in library_imports()
           if _within(importer, f"{PKG}.sqlitefile") and _within(target, PKG)
           and not _within(target, f"{PKG}.sqlitefile")]
    assert bad == []


def test_the_checker_sees_what_it_must_refuse(tmp_path: Path):
    """The rules are not vacuous: a library module importing rich, a storage module importing
    maintenance, a sqlitefile module importing models are all caught (relative imports too)."""
    lib = tmp_path / PKG
    (lib / "storage").mkdir(parents=True)
    (lib / "sqlitefile").mkdir()
    (lib / "storage" / "bad.py").write_text("def f():\n    from ..maintenance import check\n")
    (lib / "sqlitefile" / "bad.py").write_text("from .. import models\n")
    (lib / "quiet.py").write_text("import rich.console\n")
    found = []
    for path in sorted(lib.rglob("*.py")):
        found += [(_module_name(path, lib, PKG), *imp) for imp in imports_of(path, lib, PKG)]
    assert violations(found=found) == [
        f"{PKG}.quiet:1 imports rich.console: the library never imports rich (the CLI does)",
        f"{PKG}.storage.bad:2 imports {PKG}.maintenance: storage is below maintenance",
    ]
    assert (f"{PKG}.sqlitefile.bad", 1, f"{PKG}.models", []) in found


PUBLIC = {PKG, f"{PKG}.maintenance", f"{PKG}.tracing", f"{PKG}.errors"}


@pytest.mark.parametrize("path", sorted(CLI.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_cli_imports_only_public_names(path: Path):
    import importlib

    for line, target, names in imports_of(path, CLI, "steerable_maint"):
        if not _within(target, PKG):
            continue
        assert target in PUBLIC, f"{path.name}:{line} imports the internal module {target}"
        exported = set(importlib.import_module(PKG if target.endswith(".errors") else target).__all__)
        assert set(names) <= exported, f"{path.name}:{line}: {sorted(set(names) - exported)} not in {target}.__all__"
