"""Refuse a store whose files are not regular files, before anything opens them.

A store is up to five files: the db, its ``-wal``, ``-shm`` and ``-journal`` (SQLite's), and
the lease's ``<stem>.lock``. Any of them that is a FIFO, a socket, a device or (but for the
db, whose directory case :func:`~.access.probe` words itself) a directory is refused
here with NotAStoreError (exit 3), using ``stat`` only: opening a FIFO blocks until a writer
comes, reading a device never ends, and SQLite writing its -wal into /dev/null or a socket
loses the store's commits. Nothing is opened, created or changed.

:func:`refuse_special_output` does the same for an output path (salvage's ``--out`` and
``--rebuild``, traces' ``--out``): ``--force`` replaces only a regular file (or a symlink
itself), never a FIFO, a socket, a device or a directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import NotAStoreError, OutputExistsError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def kind_of(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe)", ...), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def store_files(db: str | os.PathLike[str]) -> list[tuple[str, Path]]:
    """The files of the store at ``db``, each with how an error names it."""
    from .lease import lock_path_for

    path = Path(db)
    return [("", path), ("-wal", Path(f"{path}-wal")), ("-shm", Path(f"{path}-shm")),
            ("-journal", Path(f"{path}-journal")), ("lease file", lock_path_for(path))]


def refuse_special_files(db: str | os.PathLike[str]) -> None:
    """Raise NotAStoreError when a file of the store at ``db`` exists and is not a regular
    file (see the module docstring; a directory at the db path itself is left to probe)."""
    for role, path in store_files(db):
        try:
            st = os.stat(path)  # follows a symlink: a link to a FIFO is a FIFO
        except FileNotFoundError:
            continue
        except OSError as exc:
            if not role:
                continue  # probe words the db's own access errors
            raise NotAStoreError(f"{db}: cannot access its {role} {path.name}: {exc.strerror}; nothing was opened",
                                 path=str(db), hint="run as the user that owns the store's files") from None
        kind = kind_of(st.st_mode)
        if kind is None or (not role and stat.S_ISDIR(st.st_mode)):
            continue
        if not role:
            raise NotAStoreError(f"{db}: is {kind}, not a database file; nothing was opened", path=str(db),
                                 hint="pass the path of the store's database file (a regular file)")
        what = "write lease" if role == "lease file" else f"SQLite {role} file"
        raise NotAStoreError(
            f"{db}: its {role} {path.name} is {kind}, not a regular file; nothing was opened", path=str(db),
            hint=f"the store's {what} must be a regular file: move {path.name} out of the way (it is not"
                 " part of the store), then run the command again")


def refuse_special_output(target: str | os.PathLike[str]) -> None:
    """Raise OutputExistsError (without the ``--force`` remedy) when ``target`` exists and is
    neither a regular file nor a symlink; ``--force`` must never replace it."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputExistsError(f"{target}: cannot access: {exc.strerror}", path=str(target),
                                hint="choose another output path") from None
    kind = None if stat.S_ISLNK(st.st_mode) else kind_of(st.st_mode)
    if kind is not None:
        raise OutputExistsError(f"{target}: is {kind}; an output replaces only a regular file, so it was left"
                                " alone", path=str(target),
                                hint="choose another output path (a new file name in a writable directory)")
