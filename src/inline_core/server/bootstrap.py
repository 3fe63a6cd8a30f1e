"""Build the server's services from a `Config`. Imports no torch: the server is ready in well under
a second and 1.5 s on a small machine, and a core install (no torch) boots and serves.

Model families and the batched sampler are registered best-effort: a missing extra or a module not
written yet logs a warning and the rest of the server still runs.

Plugins: `INLINE_PLUGINS` (`Config.plugins`) is a comma-separated list of `module:function`. Each
function is called with the `Registry` once the built-in nodes are registered, and may register
more nodes (descriptor + runner). A plugin that fails to import or raises is logged and skipped.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from inline_core.config import Config
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.executor import Executor
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog
from inline_core.runtime.file_store import FileTakeStore
from inline_core.sampling.job import BatchedSampler
from inline_core.server.assets import AssetStore, StoredMediaResolver
from inline_core.server.device_info import DeviceInfo
from inline_core.server.manager import RunManager
from inline_core.server.run_store import RunStore

log = logging.getLogger(__name__)


@dataclass
class Services:
    config: Config
    catalog: Catalog
    registry: Registry
    runs: RunStore
    assets: AssetStore
    takes: FileTakeStore
    media: StoredMediaResolver
    sampler: BatchedSampler | None
    manager: RunManager
    device: DeviceInfo

    def registry_version(self) -> str:
        return self.registry.version(self.catalog.fingerprint())

    def start(self) -> None:
        self.manager.start()
        self.device.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop in dependency order: runs first (they may be using the sampler), then the sampler,
        then the store (it records the runs that were put back in the queue)."""
        self.manager.shutdown(timeout)
        if self.sampler is not None:
            try:
                self.sampler.close()
            except Exception:
                log.exception("closing the sampler failed")
        self.runs.close()


def _make_sampler(config: Config) -> BatchedSampler | None:
    try:
        from inline_core.sampling.loop import StepLoopSampler
    except (ImportError, AttributeError) as exc:
        log.warning("batched sampler not available (%s); model nodes will not run", exc)
        return None
    return StepLoopSampler(max_batch=config.max_batch, token_budget=config.batch_token_budget)


def _register_models(
    registry: Registry, catalog: Catalog, config: Config, sampler: BatchedSampler | None
) -> None:
    if sampler is None:
        return
    try:
        module = importlib.import_module("inline_core.models.zimage")
        register = cast(Callable[..., None], module.register_zimage)
    except (ImportError, AttributeError) as exc:
        log.warning("Z-Image node not registered (%s)", exc)
        return
    try:
        register(registry, catalog=catalog, config=config, sampler=sampler)
    except Exception:
        log.exception("registering the Z-Image node failed; continuing without it")


def load_plugins(registry: Registry, specs: Iterable[str]) -> list[str]:
    """Call each `module:function` with the registry; return the specs that loaded."""
    loaded: list[str] = []
    for spec in specs:
        module_name, _, function_name = spec.partition(":")
        if not module_name or not function_name:
            log.error("INLINE_PLUGINS entry %r is not 'module:function'; skipped", spec)
            continue
        try:
            module = importlib.import_module(module_name)
            register = cast(Callable[[Registry], object], getattr(module, function_name))
            register(registry)
        except Exception:
            log.exception("plugin %r failed to load; skipped", spec)
            continue
        loaded.append(spec)
    return loaded


def build_services(config: Config) -> Services:
    """Everything the app needs, not started (call `Services.start`)."""
    catalog = Catalog(config.models_dir)
    runs = RunStore(config.runs_db)
    assets = AssetStore(config.assets_dir, config.max_upload_mb * 1024 * 1024)
    takes = FileTakeStore(config.takes_dir.resolve())
    media = StoredMediaResolver(assets, runs, takes.root)
    registry = Registry()
    register_builtin_nodes(registry, media)
    sampler = _make_sampler(config)
    _register_models(registry, catalog, config, sampler)
    load_plugins(registry, config.plugins)
    executor = Executor(registry, catalog, NodeCache())
    manager = RunManager(
        config, store=runs, registry=registry, catalog=catalog, takes=takes, executor=executor
    )
    return Services(
        config=config,
        catalog=catalog,
        registry=registry,
        runs=runs,
        assets=assets,
        takes=takes,
        media=media,
        sampler=sampler,
        manager=manager,
        device=DeviceInfo(config),
    )
