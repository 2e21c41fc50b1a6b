"""Every module imports first, in a fresh interpreter state: no import cycle that only works
when another module happened to be imported before (a host's first line may be any of them).

One child process imports each module of both packages in turn, after dropping every module of
the two packages from ``sys.modules`` (third-party modules stay loaded, so it takes seconds)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r'''
import importlib, json, pkgutil, sys
import steerable_agent_runtime, steerable_maint
names = []
for package in (steerable_agent_runtime, steerable_maint):
    names.append(package.__name__)
    names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
              if not m.name.endswith("__main__")]  # (running the CLI is not importing it)
failed = {}
for name in names:
    for loaded in [k for k in sys.modules if k.split(".")[0] in ("steerable_agent_runtime", "steerable_maint")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - reported by name
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"count": len(names), "failed": failed}))
'''


def test_every_module_imports_first():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["count"] > 100
    assert result["failed"] == {}
