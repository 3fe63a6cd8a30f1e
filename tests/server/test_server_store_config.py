"""Choosing the run store: INLINE_DATABASE_URL / --database-url, and the clear refusals a server
starts with when that choice cannot work (no postgres extra, a URL that is not PostgreSQL's, a
database out of reach)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from server_support import HERE, PLUGIN, SRC, free_port, run_until_it_exits

from inline_core.cli import apply_serve_args, build_serve_parser
from inline_core.config import Config
from inline_core.errors import InvalidRequest


def serve(
    tmp_path: Path, env: dict[str, str], pythonpath: Sequence[Path] = ()
) -> subprocess.CompletedProcess[str]:
    """Start `python -m inline_core.server` and let it refuse (it must exit by itself)."""
    paths = [*pythonpath, SRC, HERE]
    full = {
        **os.environ,
        "INLINE_DATA_DIR": str(tmp_path / "data"),
        "INLINE_MODELS_DIR": str(tmp_path / "models"),
        "INLINE_PROFILE": "cpu",
        "INLINE_PLUGINS": PLUGIN,
        "PYTHONPATH": os.pathsep.join(str(p) for p in paths),
        **env,
    }
    return run_until_it_exits([sys.executable, "-m", "inline_core.server"], full, 120)


def test_the_flags_set_the_store_variables() -> None:
    args = build_serve_parser().parse_args(
        ["--database-url", "postgresql://db/inline", "--server-id", "gpu-1"]
    )
    env: dict[str, str] = {}
    apply_serve_args(args, env)
    assert env["INLINE_DATABASE_URL"] == "postgresql://db/inline"
    assert env["INLINE_SERVER_ID"] == "gpu-1"
    config = Config.from_env(env)
    assert (config.database_url, config.server_id) == ("postgresql://db/inline", "gpu-1")
    assert Config.from_env({}).database_url is None  # SQLite unless asked


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"INLINE_DATABASE_URL": "mysql://root:secret@db/x"}, "got a mysql:// URL"),
        ({"INLINE_DATABASE_URL": "db-host/inline"}, "got no URL scheme"),
        ({"INLINE_LEASE_TIMEOUT_S": "0.1"}, "INLINE_LEASE_TIMEOUT_S must be"),
        ({"INLINE_LEASE_TIMEOUT_S": "soon"}, "INLINE_LEASE_TIMEOUT_S must be a number"),
    ],
)
def test_bad_store_settings_are_refused_saying_which(env: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        Config.from_env(env)
    assert says in refused.value.message
    assert "secret" not in refused.value.message  # a URL's password is never repeated


def test_without_the_postgres_extra_the_server_says_which_to_install(tmp_path: Path) -> None:
    # A psycopg that cannot be imported, as on an install without the extra.
    missing = tmp_path / "no-psycopg"
    (missing / "psycopg").mkdir(parents=True)
    (missing / "psycopg" / "__init__.py").write_text(
        "raise ImportError('No module named psycopg')\n"
    )
    done = serve(tmp_path, {"INLINE_DATABASE_URL": "postgresql://127.0.0.1:1/x"}, [missing])
    assert done.returncode == 2, done.stderr
    assert "needs the postgres extra" in done.stderr
    assert "inline-core[postgres]" in done.stderr and "Traceback" not in done.stderr


def test_a_database_out_of_reach_at_start_is_a_clear_refusal(tmp_path: Path) -> None:
    url = f"postgresql://inline:hunter2@127.0.0.1:{free_port()}/inline"
    done = serve(tmp_path, {"INLINE_DATABASE_URL": url, "INLINE_DATABASE_RETRY_S": "1"})
    assert done.returncode == 2, done.stderr
    assert "cannot reach the run database at postgresql://inline@127.0.0.1" in done.stderr
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr


def test_a_bad_url_makes_the_command_exit_with_its_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inline_core.cli", "--database-url", "sqlite:///x.db"],
        env={**os.environ, "PYTHONPATH": str(SRC), "INLINE_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "INLINE_DATABASE_URL must be a postgresql:// URL" in done.stderr
