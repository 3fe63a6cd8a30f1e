"""A real, throwaway PostgreSQL server for the tests and benches: `initdb` into a temp folder and
`postgres` on a free loopback port (no Unix socket), stopped at the end.

The programs come from Debian's `postgresql` package (scripts/ensure-postgres.sh installs it;
INLINE_TEST_POSTGRES_BIN names their folder). As root they run as the `postgres` user, since
PostgreSQL refuses to run as root. `fsync=False` (the tests' setting) keeps a slow disk out of the
tests' time: committed data still survives a crash of the database's processes, the only crash
the tests make (an OS crash is what fsync=off gives up); the benches keep fsync on.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

SUPERUSER = "inline"
_names = itertools.count(1)


def postgres_bin() -> Path | None:
    """The folder with initdb, postgres and pg_ctl (the newest installed), or None."""
    named = os.environ.get("INLINE_TEST_POSTGRES_BIN")
    candidates = [Path(named)] if named else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).parent)
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "postgres", "pg_ctl")):
            return folder
    return None


PORT_RACE_RETRIES = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresCluster:
    bin: Path
    root: Path
    fsync: bool = False
    port: int = 0
    schemas: list[str] = field(default_factory=list[str])

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    def _as_owner(self, *args: str) -> list[str]:
        # PostgreSQL refuses to run as root: run it as the package's user instead.
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *args]
        return list(args)

    def _run(self, *args: str) -> None:
        done = subprocess.run(self._as_owner(*args), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}")

    @classmethod
    def create(cls, bin_dir: Path, *, fsync: bool = False) -> PostgresCluster:
        root = Path(tempfile.mkdtemp(prefix="inline-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        cluster = cls(bin_dir, root, fsync=fsync)
        args = ["-D", str(cluster.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"]
        cluster._run(str(bin_dir / "initdb"), *args, "--no-sync", "--no-instructions")
        return cluster

    def start(self) -> None:
        """Start it; its first start picks a free port, and picks another if a process on the
        machine took that one before PostgreSQL bound it (a restart keeps its port: the stores
        reconnect to the same URL)."""
        if self.port:
            self._start_on_port()
            return
        for attempt in range(PORT_RACE_RETRIES):
            self.port = _free_port()
            try:
                self._start_on_port()
                return
            except RuntimeError:
                taken = "Address already in use" in self.log.read_text(errors="replace")
                if not taken or attempt == PORT_RACE_RETRIES - 1:
                    raise

    def _start_on_port(self) -> None:
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-p {self.port}",
                "-c unix_socket_directories=''",
                "-c max_connections=300",
                "-c shared_buffers=32MB",
                f"-c fsync={'on' if self.fsync else 'off'}",
                f"-c full_page_writes={'on' if self.fsync else 'off'}",
            ]
        )
        pg_ctl = str(self.bin / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clean), or `immediate` (its processes end at once and the
        next start recovers from the log, as after a crash)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a fresh, empty store: a schema of its own, first on the search path.
        To the store it is a database of its own (every table it makes lands there), and it
        costs a millisecond where CREATE DATABASE copies a template (a quarter second here)."""
        name = f"inline_test_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        self.schemas.append(name)
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
