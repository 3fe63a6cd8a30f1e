"""One family on a runtime of its own, outside a server: for scripts, benchmarks and tests.

It wires the same pieces the server's bootstrap wires (a catalog, the family over it, one
`ModelRuntime` with its residency and policy, the family's node runner), without HTTP or a run
store, so a caller can run the node runner directly and reach the resident pipeline it used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inline_core.config import Config
from inline_core.contract.family import Family
from inline_core.contract.sources import Sources
from inline_core.device import DevicePolicy, policy_from_config
from inline_core.device.split import ParallelSpec
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.nodes.family_node import FamilyNodeRunner
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.models.catalog import Catalog
from inline_core.sampling.job import BatchedSampler


@dataclass
class FamilyRig:
    family: Family
    runtime: ModelRuntime
    catalog: Catalog
    config: Config

    def node(self, node_type: str | None = None) -> FamilyNodeRunner:
        descriptors = {d.type: d for d in self.family.nodes()}
        descriptor = descriptors[node_type or next(iter(descriptors))]
        return FamilyNodeRunner(self.family, descriptor, self.runtime)

    def sources(self, model: str | None = None) -> Sources:
        # Through the family's own resolve (e.g. Wan finds an A14B expert's sibling there).
        node_type = self.family.nodes()[0].type
        return self.family.resolve(node_type, {"model": model}).require()

    def pipeline(self, model: str | None = None) -> Any:
        """The resident node pipeline a render of `model` uses (loaded on first use)."""
        return self.runtime.stacks().pipeline(self.family, self.sources(model))

    def check(self, node_id: str, params: dict[str, Any]) -> Sources:
        return self.node().check(node_id, params)

    def run(self, call: NodeCall) -> NodeResult:
        return self.node().run(call)

    def split_for(self, sources: Sources) -> ParallelSpec | None:
        return self.runtime.split_for(self.family, sources.get("transformer"))

    def stats(self) -> dict[str, Any]:
        return self.runtime.stats()

    def close(self) -> None:
        self.runtime.close()


def family_rig(
    family_class: type[Family],
    models_dir: Path,
    sampler: BatchedSampler,
    *,
    config: Config | None = None,
    policy: DevicePolicy | None = None,
) -> FamilyRig:
    # Without a config: the environment's settings (INLINE_DTYPE...) on the CPU profile.
    config = config or replace(Config.from_env(), models_dir=models_dir, profile="cpu")
    catalog = Catalog(models_dir, ttl_s=0.0)
    family = family_class(catalog, config.env)
    runtime = ModelRuntime(config, sampler, policy or policy_from_config(config))
    return FamilyRig(family, runtime, catalog, config)
