"""Flags that fail at start, with the fix in the message: the real `inline-core` command (and
`./webui.sh --help`), each refusal one line on stderr and exit status 2, nothing opened first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from server_support import HERE, PLUGIN, SRC, LiveServer, run_until_it_exits

from inline_core.config import Config
from inline_core.device.detect import gpu_device_nodes_present
from inline_core.errors import InvalidRequest
from inline_core.models.catalog import CATEGORIES
from inline_core.server.startup_checks import profile_warning

ROOT = HERE.parents[1]
HIDDEN_MODULES = HERE / "hidden_modules"  # its sitecustomize hides INLINE_TEST_HIDE_MODULES


def inline_core(
    tmp_path: Path, *flags: str, env: dict[str, str] | None = None, hide: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `inline-core FLAGS` on a free port, and let it refuse (it must exit by itself)."""
    full = {
        **os.environ,
        "INLINE_DATA_DIR": str(tmp_path / "data"),
        "INLINE_MODELS_DIR": str(tmp_path / "models"),
        "PYTHONPATH": os.pathsep.join(str(p) for p in (HIDDEN_MODULES, SRC, HERE)),
        "INLINE_TEST_HIDE_MODULES": hide,
        **(env or {}),
    }
    return run_until_it_exits([sys.executable, "-m", "inline_core.cli", *flags], full, 120)


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_a_split_without_the_parallel_extra_refuses_naming_the_install(tmp_path: Path) -> None:
    said = refusal(inline_core(tmp_path, "--multi-gpu", "ulysses=2", "--cpu", hide="cache_dit"))
    assert "--multi-gpu ulysses=2 (INLINE_PARALLEL) needs the parallel extra" in said
    assert "cache_dit is not installed" in said
    assert "./webui.sh --install --extra parallel" in said
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def test_a_database_url_without_the_postgres_extra_refuses_naming_the_install(
    tmp_path: Path,
) -> None:
    done = inline_core(
        tmp_path, "--database-url", "postgresql://127.0.0.1:1/x", hide="psycopg,psycopg_pool"
    )
    said = refusal(done)
    assert "needs the postgres extra" in said
    assert "./webui.sh --install --extra diffusers,postgres" in said


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--port", "99999"), "99999 is not a port number 1-65535"),
        (("--port", "0"), "0 is not a port number 1-65535"),
        (("--max-batch", "0"), "--max-batch: must be at least 1, got 0"),
        (("--batch-token-budget", "-3"), "--batch-token-budget: must be at least 1, got -3"),
    ],
)
def test_out_of_range_numbers_are_refused_not_dropped(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    assert says in refusal(inline_core(tmp_path, *flags))


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"INLINE_PORT": "99999"}, "INLINE_PORT (--port) must be a port number 1-65535"),
        ({"INLINE_MAX_BATCH": "0"}, "INLINE_MAX_BATCH (--max-batch) must be at least 1"),
    ],
)
def test_the_same_numbers_in_the_environment_are_refused(env: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        Config.from_env(env)
    assert says in raised.value.message


def test_a_data_dir_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    said = refusal(inline_core(tmp_path, "--data-dir", str(blocker / "data")))
    assert f"cannot create the data folder {blocker / 'data'}" in said
    assert "--data-dir" in said


def test_listening_without_a_token_names_the_insecure_flag(tmp_path: Path) -> None:
    said = refusal(inline_core(tmp_path, "--listen"))
    assert "refusing to listen on 0.0.0.0 without an API token" in said
    assert "--token" in said and "--insecure" in said


def test_a_gpu_profile_without_a_gpu_is_said_at_start() -> None:
    assert profile_warning(Config(profile="lowvram"), gpu_present=lambda: True) is None
    assert profile_warning(Config(profile="cpu"), gpu_present=lambda: False) is None
    said = profile_warning(Config(profile="gpu-max"), gpu_present=lambda: False)
    assert said is not None and "--profile gpu-max asked for" in said
    assert "running the cpu profile" in said


@pytest.mark.skipif(gpu_device_nodes_present(), reason="this machine has a GPU")
def test_a_server_asked_for_lowvram_on_a_cpu_machine_says_so(tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "data", tmp_path / "models", {"INLINE_PROFILE": "lowvram"})
    try:
        server.start()
        assert "--profile lowvram asked for, but this machine has no GPU" in server.log()
    finally:
        server.close()


def test_a_missing_models_folder_is_created_with_its_categories(tmp_path: Path) -> None:
    models = tmp_path / "nowhere" / "models"
    server = LiveServer(tmp_path / "data", models)
    try:
        server.start()
        assert sorted(p.name for p in models.iterdir()) == sorted(CATEGORIES)
        assert f"the models folder {models} did not exist: created it" in server.log()
    finally:
        server.close()


def test_webui_help_lists_its_own_flags_without_setting_anything_up(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(ROOT / "webui.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "INLINE_PLUGINS": PLUGIN},
    )
    assert done.returncode == 0, done.stderr
    for flag in ("--install", "--extra LIST", "--skip-install"):
        assert flag in done.stdout
    assert "--multi-gpu" in done.stdout  # then the server's flags
