"""Detection on this machine (no GPU) and the pure parsers it is built from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
from device_machines import cuda

from inline_core.device import DevicePolicy, Profile, detect_hardware
from inline_core.device.detect import (
    cgroup_cpu_limit,
    cgroup_memory_limit_mb,
    gpu_device_nodes_present,
    nvlink_connected,
    with_nvml_details,
)


def test_detection_here_describes_a_sane_cpu_machine() -> None:
    hw = detect_hardware()
    assert hw.backend == "cpu"
    assert hw.gpus == ()
    assert hw.nvlink is False
    assert 0 < hw.ram_mb <= psutil.virtual_memory().total // (1024 * 1024)
    assert 1 <= hw.cpu_count <= (os.cpu_count() or 1)
    assert detect_hardware() is hw  # detected once, then cached
    policy = DevicePolicy(hw)
    assert policy.profile is Profile.CPU
    assert policy.memory_budget_mb > 0


def test_gpu_device_nodes_are_recognised(tmp_path: Path) -> None:
    assert not gpu_device_nodes_present(tmp_path)
    for name in ("nvidia0", "nvidiactl", "kfd", "dxg"):
        (tmp_path / name).touch()
        assert gpu_device_nodes_present(tmp_path)
        (tmp_path / name).unlink()
    (tmp_path / "null").touch()
    assert not gpu_device_nodes_present(tmp_path)


def test_nvml_without_a_driver_leaves_the_gpus_as_they_were() -> None:
    gpus = (cuda(24564), cuda(24564, index=1))
    assert with_nvml_details(gpus) == (gpus, False)


def test_nvlink_needs_several_gpus_each_with_an_active_link() -> None:
    assert not nvlink_connected([])
    assert not nvlink_connected([12])
    assert nvlink_connected([4, 4])
    assert not nvlink_connected([4, 4, 0, 0])  # two GPUs bridged, two on PCIe


def test_cgroup_memory_limits_parse() -> None:
    assert cgroup_memory_limit_mb("max\n") is None
    assert cgroup_memory_limit_mb("8589934592\n") == 8192
    assert cgroup_memory_limit_mb("9223372036854771712") is None  # cgroup v1 "unlimited"
    assert cgroup_memory_limit_mb("") is None


def test_cgroup_cpu_quotas_parse_to_whole_cpus() -> None:
    assert cgroup_cpu_limit("max 100000\n") is None
    assert cgroup_cpu_limit("200000 100000") == 2
    assert cgroup_cpu_limit("150000 100000") == 2
    assert cgroup_cpu_limit("50000 100000") == 1
    assert cgroup_cpu_limit("junk") is None
    assert cgroup_cpu_limit("100 0") is None


def test_importing_the_policy_and_deciding_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from inline_core.config import Config\n"
        "from inline_core.device import HardwareDescription, policy_from_config\n"
        "hw = HardwareDescription.cpu_only(ram_mb=4096, cpu_count=2)\n"
        "policy_from_config(Config(), hw).describe()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    if sys.platform.startswith("linux") and not gpu_device_nodes_present():
        # No GPU driver here: detection itself must not pay for importing torch either.
        code += "policy_from_config(Config()).describe()\nassert 'torch' not in sys.modules\n"
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
