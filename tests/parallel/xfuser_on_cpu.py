"""A rank runner that lets xDiT's real Z-Image split run on CPU ranks over gloo.

xfuser 0.7 refuses a CPU-only torch in three places that are device checks, not missing features:
its import asks for the CUDA version, its yunchang (Ulysses) support is switched off without CUDA,
and its USP attention imports yunchang's process groups only under CUDA. Lifting those three gates
as xfuser's modules load is all it takes for its own code (the Z-Image transformer class, USP
attention, its process groups) to run on two gloo CPU ranks, so the tests exercise the very
integration the server uses on GPUs. The rank then loads the standard step runner.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, cast

from inline_core.parallel.protocol import Json
from inline_core.parallel.runner import WorkerContext
from inline_core.parallel.step_runner import StepLoopRunner, load_step_runner


def _lift_gates(module: ModuleType) -> None:
    names = vars(module)
    if module.__name__ == "xfuser.envs":
        cast(Any, module).get_device_version = lambda: None
        cast(Any, module).PACKAGES_CHECKER.packages_info["has_long_ctx_attn"] = True
    if "PROCESS_GROUP" in names and names["PROCESS_GROUP"] is None:
        from yunchang.globals import PROCESS_GROUP  # pyright: ignore[reportMissingTypeStubs]

        cast(Any, module).PROCESS_GROUP = PROCESS_GROUP


class _XFuserGates(importlib.abc.MetaPathFinder):
    """Runs `_lift_gates` on every xfuser module right after it executes."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("xfuser"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = None if spec is None else spec.loader
        if spec is None or not isinstance(loader, importlib.abc.Loader):
            return spec
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _lift_gates(module)

        cast(Any, loader).exec_module = exec_module
        return spec


def load(context: WorkerContext, args: Mapping[str, Json]) -> StepLoopRunner:
    if "xfuser" in sys.modules:
        raise RuntimeError("xfuser was imported before its CPU gates could be lifted")
    sys.meta_path.insert(0, _XFuserGates())
    return load_step_runner(context, args)
