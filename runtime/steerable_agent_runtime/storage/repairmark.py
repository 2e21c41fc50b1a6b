"""The repair intent: a marker that a repair is swapping a store's files.

``steerable-maint repair`` replaces the db and removes its ``-wal``/``-shm``: several renames
and unlinks that no file system makes atomic together. Before the first of them it writes
``<stem>.repair-intent`` (fsynced) naming the backup folder that holds the original files;
it removes the marker after the last. While the marker exists the store's files may be half
swapped, so every opener refuses the store (:func:`refuse_interrupted_repair`) until a
repair run rolls the original back from the backup (maintenance/repair.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import RepairInterruptedError


def intent_path(db: str | os.PathLike[str]) -> Path:
    """``sessions.db`` -> ``sessions.repair-intent`` (same directory)."""
    path = Path(db)
    return path.with_name(path.stem + ".repair-intent")


def refuse_interrupted_repair(db: str | os.PathLike[str]) -> None:
    """Raise RepairInterruptedError when a repair of ``db`` was interrupted mid-swap."""
    marker = intent_path(db)
    if os.path.lexists(marker):
        raise RepairInterruptedError(f"{db}: a repair was interrupted while it replaced the store's files"
                                     f" ({marker.name} is there); nothing was opened", path=str(db))
