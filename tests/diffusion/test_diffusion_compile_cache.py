"""Inductor's cache is kept in the data folder (a restart finds the compiled code), unless the
user named another folder; health says which."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inline_core.diffusion.compile.cache import CACHE_VARIABLE, keep_cache_in
from inline_core.diffusion.compile.progress import BOARD


def test_the_cache_lives_in_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(BOARD, "cache_dir", None)
    folder = keep_cache_in(tmp_path / "data")
    assert folder == str(tmp_path / "data" / "compile-cache")
    assert os.environ[CACHE_VARIABLE] == folder
    assert BOARD.to_json()["cacheDir"] == folder


def test_a_folder_the_user_named_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "mine"))
    monkeypatch.setattr(BOARD, "cache_dir", None)
    assert keep_cache_in(tmp_path / "data") == str(tmp_path / "mine")
    assert BOARD.to_json()["cacheDir"] == str(tmp_path / "mine")


def test_the_runtime_asks_the_policy_and_keeps_the_cache_where_it_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inline_core.config import Config
    from inline_core.device import DevicePolicy
    from inline_core.device.hardware import GpuInfo, HardwareDescription
    from inline_core.device.policy import DeviceSettings
    from inline_core.engine.runtime import ModelRuntime
    from inline_core.families.zimage.family import ZImageFamily
    from inline_core.models.catalog import Catalog
    from inline_core.sampling.loop import StepLoopSampler

    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    gpu = GpuInfo(0, "RTX 4090", 24564, compute_capability=(8, 9))
    hardware = HardwareDescription((gpu,), ram_mb=65536, cpu_count=16, backend="cuda")
    config = Config(data_dir=tmp_path)
    sampler = StepLoopSampler()
    try:
        for allowed in (False, True):
            policy = DevicePolicy(hardware, DeviceSettings(compile=allowed))
            runtime = ModelRuntime(config, sampler, policy)
            family = ZImageFamily(Catalog(tmp_path), {})
            choice = runtime.compile_choice(family)
            assert choice.enabled is allowed
            # The VAE's decoder follows the same choice, for the VAE's own dtype.
            assert runtime.compile_choice(family, "vae").enabled is allowed
            # The cache folder is set only once something is to compile.
            assert (os.environ.get(CACHE_VARIABLE) is not None) is allowed
        assert os.environ[CACHE_VARIABLE] == str(tmp_path / "compile-cache")
    finally:
        sampler.close()
