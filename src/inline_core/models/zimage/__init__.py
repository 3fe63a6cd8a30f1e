"""Z-Image Turbo: the `alibaba/z-image-turbo` node (torch-free at import and registration).

`register_zimage` registers the descriptor with a runner whose heavy modules (torch, diffusers,
transformers) are imported on the first run. Without those installed, the node is still listed but
marked unavailable, saying which extra to install. It registers runners for the low-level
primitives (`load/*`, `encode/text`, `latent/empty`, `sample`, `vae/*`) the same way, on the node's
engine and sampler.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from inline_core.config import Config
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog
from inline_core.models.zimage.descriptor import EXTRA_HINT, NODE_TYPE, ZIMAGE_DESCRIPTOR
from inline_core.models.zimage.primitives import PRIMITIVE_TYPES, register_zimage_primitives
from inline_core.models.zimage.runner import ZImageRunner
from inline_core.sampling.job import BatchedSampler

if TYPE_CHECKING:
    from inline_core.device import DevicePolicy

REQUIRED_MODULES = ("torch", "diffusers", "transformers", "safetensors")

__all__ = ["NODE_TYPE", "ZIMAGE_DESCRIPTOR", "ZImageRunner", "missing_runtime", "register_zimage"]


def missing_runtime() -> list[str]:
    """The Z-Image runtime modules this install lacks (found without importing them)."""
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def register_zimage(
    registry: Registry,
    *,
    catalog: Catalog,
    config: Config,
    sampler: BatchedSampler,
    policy: DevicePolicy | None = None,
) -> ZImageRunner:
    """Register the node. An explicit split (`INLINE_PARALLEL`, `--multi-gpu`) is checked here
    against this family and the default model: one it cannot run raises `InvalidRequest`, and
    the server refuses to start. Call the returned runner's `close()` at shutdown (it stops the
    worker group, if renders were split)."""
    runner = ZImageRunner(catalog=catalog, config=config, sampler=sampler, policy=policy)
    if config.parallel or (policy is not None and policy.settings.parallel is not None):
        runner.check_split()
    registry.register(ZIMAGE_DESCRIPTOR, runner)
    register_zimage_primitives(registry, runner)
    missing = missing_runtime()
    if missing:
        for node_type in (NODE_TYPE, *PRIMITIVE_TYPES):
            registry.mark_unavailable(
                node_type, f"{', '.join(missing)} not installed; {EXTRA_HINT}"
            )
    return runner
