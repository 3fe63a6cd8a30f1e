"""Weights computed in their file's dtype on the CPU are mapped from the file, never copied onto
the heap: a process's anonymous RSS does not grow by the file's size when it loads one. Converted
weights are copies, and the same probe sees them (the control)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mapped_probe import write

import inline_core

PROBE = Path(__file__).with_name("mapped_probe.py")
SRC = Path(inline_core.__file__).resolve().parents[1]


def probe(*args: str) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(PROBE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The probe's file, written here: only its load needs a process of its own."""
    path = tmp_path_factory.mktemp("mapped") / "transformer.safetensors"
    write(path)
    return path


def loaded(weights: Path, dtype: str) -> dict[str, Any]:
    [line] = [x for x in probe("load", str(weights), dtype).splitlines() if x.startswith("{")]
    return json.loads(line)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_a_file_in_its_compute_dtype_is_mapped_and_the_heap_does_not_grow_by_it(
    weights: Path,
) -> None:
    result = loaded(weights, "float32")
    size = result["fileBytes"]
    assert size > 50_000_000  # well above RSS noise
    assert result["dtype"] == "torch.float32"
    assert result["anonGrowth"] < size / 20  # measured: under 0.1 MB for 87 MB
    assert result["ownBytes"] == 0 and result["mappedBytes"] > 0.99 * size


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_converted_weights_are_copies_the_heap_pays_for(weights: Path) -> None:
    result = loaded(weights, "bfloat16")
    size = result["fileBytes"]
    assert result["dtype"] == "torch.bfloat16"
    assert result["mappedBytes"] == 0
    assert abs(result["ownBytes"] - size / 2) < 0.01 * size
    assert result["anonGrowth"] > size / 4  # the probe sees a copy when there is one
