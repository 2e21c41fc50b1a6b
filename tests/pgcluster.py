"""A throwaway PostgreSQL cluster for the tests and benchmarks: initdb + pg_ctl in a temp dir.

The cluster listens on 127.0.0.1 (a free port) and on a unix socket inside its own directory,
never anywhere else. As root the server runs as the ``postgres`` user (initdb refuses root).
Authentication: ``trust`` for the superuser ``postgres`` (fast connections for the suite),
``scram-sha-256`` for the role ``steerable_pw`` (password PASSWORD), so wrong credentials are
a real refusal. Durability is switched off (fsync, synchronous_commit): the data is thrown
away at the end and the suite stays fast.

``STEERABLE_TEST_PG_URL`` (a ``postgresql://`` URL of an existing server whose role may create
databases) is used instead of a cluster of our own when set.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

PASSWORD = "s3cret-Pa55"
PW_USER = "steerable_pw"
START_HINT = ("install PostgreSQL (Debian: apt-get install -y postgresql) so initdb is under"
              " /usr/lib/postgresql/*/bin, or set STEERABLE_TEST_PG_URL=postgresql://user@127.0.0.1:5432/postgres")


class PgUnavailable(Exception):
    """No PostgreSQL could be started or reached; the message says why."""


def find_bindir() -> Path:
    """The newest /usr/lib/postgresql/*/bin holding initdb (or initdb on PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise PgUnavailable(f"no initdb found; {START_HINT}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """One cluster: ``start()``, ``url(db)``, ``create_database()``, ``stop()``."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.dir = Path(tempfile.mkdtemp(prefix="steerable-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.bindir = find_bindir()
        self.as_root = os.geteuid() == 0
        self.started = False

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = list(argv)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if check and done.returncode != 0:
            raise PgUnavailable(f"{' '.join(argv[:2])} failed: {done.stderr.strip()[-400:]}")
        return done

    def start(self) -> PgCluster:
        if self.as_root:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise PgUnavailable(f"no 'postgres' user; {START_HINT}") from None
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        self.dir.chmod(0o700)
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_root:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-E", "UTF8",
                  "--locale=C", "--auth-local=trust", "--auth-host=trust", f"--pwfile={pwfile}")
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"local all all trust\nhost all {PW_USER} 127.0.0.1/32 scram-sha-256\n"
                       "host all all 127.0.0.1/32 trust\n")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.dir}'\nmax_connections = 200\nshared_buffers = 64MB\n")
            if not self.durable:
                conf.write("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"), "-w",
                  "-t", "60", "start")
        self.started = True
        self.psql(f"CREATE ROLE {PW_USER} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        return self

    def psql(self, sql: str, db: str = "postgres") -> str:
        done = self._run(str(self.bindir / "psql"), "-h", str(self.dir), "-p", str(self.port), "-U", "postgres",
                         "-d", db, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql)
        return done.stdout.strip()

    def url(self, db: str, *, user: str = "postgres", password: str | None = None) -> str:
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql+asyncpg://{auth}@127.0.0.1:{self.port}/{db}"

    def create_database(self, owner: str = "postgres") -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE DATABASE {name} OWNER {owner}")
        return name

    def stop(self) -> None:
        if self.started:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                      check=False)
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)


class ExternalPg:
    """An existing server named by STEERABLE_TEST_PG_URL (same interface as PgCluster; needs
    the ``psql`` client on PATH)."""

    def __init__(self, url: str) -> None:
        self.base = url.replace("postgresql+asyncpg://", "postgresql://")

    def start(self) -> "ExternalPg":
        return self

    def _conninfo(self, db: str) -> str:
        head, _, _ = self.base.partition("?")[0].rpartition("/")
        return f"{head}/{db}"

    def psql(self, sql: str, db: str = "postgres") -> str:
        done = subprocess.run([shutil.which("psql") or "psql", self._conninfo(db), "-X", "-q", "-t", "-A", "-v",
                               "ON_ERROR_STOP=1", "-c", sql], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise PgUnavailable(f"psql failed: {done.stderr.strip()[-400:]}")
        return done.stdout.strip()

    def url(self, db: str, *, user: str | None = None, password: str | None = None) -> str:
        url = self._conninfo(db).replace("postgresql://", "postgresql+asyncpg://", 1)
        if user is None:
            return url
        scheme, _, rest = url.partition("://")
        auth = user if password is None else f"{user}:{password}"
        return f"{scheme}://{auth}@{rest.rpartition('@')[2]}"

    def create_database(self, owner: str | None = None) -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
        return name

    def stop(self) -> None:
        """The server is not ours to stop."""


def start_postgres(*, durable: bool = False) -> PgCluster | ExternalPg:
    """The server for this run: STEERABLE_TEST_PG_URL's, or a fresh cluster (``durable``:
    fsync and synchronous commit on, as a production server). Raises PgUnavailable."""
    external = os.environ.get("STEERABLE_TEST_PG_URL")
    if external:
        return ExternalPg(external).start()
    cluster = PgCluster(durable=durable)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise
