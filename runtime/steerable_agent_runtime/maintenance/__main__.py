"""``python -m steerable_agent_runtime.maintenance`` runs the steerable-maint CLI.

The library never imports the CLI at import time; this entry point is the one bridge,
and only when run as a program.
"""

from importlib import import_module

import_module("steerable_maint.cli").main()
