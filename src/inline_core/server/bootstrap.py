"""Build the server's services from a `Config`. Imports no torch: the server is ready in well under
a second and 1.5 s on a small machine, and a core install (no torch) boots and serves.

Model families are found through the `inline_core.families` entry points and registered onto one
`ModelRuntime` (the server's residency, device policy, step loop and worker group) best-effort: a
family that fails to import, or whose extra is missing, is listed as unavailable with its reason,
and the rest of the server still runs.

Plugins: `INLINE_PLUGINS` (`Config.plugins`) is a comma-separated list of `module:function`. Each
function is called with the `Registry` once the built-in nodes are registered, and may register
more nodes (descriptor + runner). A plugin that fails to import or raises is logged and skipped.
Plugins are trusted code in the server's process; third-party nodes are node packs (`packs/`),
loaded after them, each in its own environment and worker process.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Literal, cast

from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.diffusion.files.checkpoint import checkpoint_contents
from inline_core.downloads.manager import DownloadManager
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import InlineError
from inline_core.families.nodes.register import register_families
from inline_core.graph.builtin import register_builtin_nodes
from inline_core.graph.cache import NodeCache
from inline_core.graph.executor import Executor
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog
from inline_core.packs.host import PackHost
from inline_core.runtime.disk_space import MB
from inline_core.runtime.file_store import TEMP_PREFIX, FileTakeStore
from inline_core.sampling.job import BatchedSampler
from inline_core.server.assets import AssetStore, DiskBudget, StoredMediaResolver
from inline_core.server.data_lock import DataLock, acquire_data_lock
from inline_core.server.device_info import DeviceInfo
from inline_core.server.download_feed import DownloadFeed
from inline_core.server.manager import RunManager, default_server_id
from inline_core.server.orphan_sweep import LOGGED_NAMES, sweep_orphan_takes
from inline_core.server.run_state import RunRecord
from inline_core.server.socket_gate import SocketGate, open_file_limit
from inline_core.server.stores import open_run_store
from inline_core.server.stores.run_store import RunStore

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
    sockets: SocketGate
    packs: PackHost
    downloads: DownloadManager
    download_feed: DownloadFeed
    families: Families = field(default_factory=lambda: Families([]))
    runtime: ModelRuntime | None = None
    # Stopped after the runs, before the sampler: the model runtime's worker group.
    closers: list[Callable[[], None]] = field(default_factory=list[Callable[[], None]])
    # The data folder's lock (`data_lock.py`), released last, once the store is closed.
    lock: DataLock | None = None

    def registry_version(self) -> str:
        self.packs.refresh()  # a pack installed or removed since the last look changes it
        return self.registry.version(self.catalog.fingerprint())

    def models_json(self) -> dict[str, object]:
        """The `models` object of health: each family (available or why not) and the residency
        all of them share."""
        body: dict[str, object] = {"families": self.families.describe()}
        if self.runtime is not None:
            body["residency"] = self.runtime.stats()
        return body

    @property
    def leftover_age_s(self) -> float:
        """Files left in shared folders are someone's only once this old: other servers may be
        writing theirs right now (a write in progress keeps touching its file)."""
        return SHARED_LEFTOVER_AGE_S if self.runs.shared else 0.0

    def start(self) -> None:
        self.device.start()
        sweep_leftovers(self.config, min_age_s=self.leftover_age_s)
        self.packs.start()
        self.manager.start(on_recovered=self._sweep_orphans)
        self.downloads.start()  # resumes what a stop or a crash left unfinished

    def _sweep_orphans(self, may_run: list[RunRecord]) -> None:
        # Housekeeping: a failure here is logged and never stops the server from starting.
        try:
            sweep_orphan_takes(self.takes.root, self.runs, may_run, min_age_s=self.leftover_age_s)
        except Exception:
            log.exception("the start-up sweep of orphan take files failed; continuing")

    def close(self, timeout: float = 5.0) -> None:
        """Stop in dependency order: runs first (they may be using the sampler), then the sampler,
        then the store (it records the runs that were put back in the queue). Downloads stop at
        their next chunk and resume at the next start."""
        self.downloads.close(timeout)
        self.manager.shutdown(timeout)
        self.packs.close()
        for close in self.closers:
            try:
                close()
            except Exception:
                log.exception("closing %r failed", close)
        if self.sampler is not None:
            try:
                self.sampler.close()
            except Exception:
                log.exception("closing the sampler failed")
        self.runs.close()
        if self.lock is not None:
            self.lock.release()


# Temp files of writes a crash cut short (a take being written, an upload in progress). Finished
# files are renamed away from these names, so whatever still has one at start is garbage.
LEFTOVER_PATTERNS = ((TEMP_PREFIX + "*", "takes"), (".upload-*", "assets"))
# With a shared store the folders are shared too: a file another server is writing is left alone.
SHARED_LEFTOVER_AGE_S = 600.0


def sweep_leftovers(config: Config, min_age_s: float = 0.0) -> int:
    """Remove temp files a killed process left in the takes and assets folders (those not
    modified for `min_age_s`); how many."""
    removed: list[str] = []
    folders = {"takes": config.takes_dir, "assets": config.assets_dir}
    now = time.time()
    for pattern, where in LEFTOVER_PATTERNS:
        folder = folders[where]
        if not folder.is_dir():
            continue
        for leftover in folder.glob(pattern):
            try:
                if min_age_s > 0 and now - leftover.lstat().st_mtime < min_age_s:
                    continue
                if leftover.is_file() and not leftover.is_symlink():
                    leftover.unlink()
                    removed.append(f"{where}/{leftover.name}")
            except OSError:
                log.warning("could not remove leftover %s", leftover)
    if removed:
        shown = ", ".join(removed[:LOGGED_NAMES]) + (" ..." if len(removed) > LOGGED_NAMES else "")
        log.info("removed %d temp files left by an earlier process: %s", len(removed), shown)
    return len(removed)


def _make_sampler(config: Config) -> BatchedSampler | None:
    try:
        from inline_core.sampling.loop import StepLoopSampler
    except (ImportError, AttributeError) as exc:
        log.warning("batched sampler not available (%s); model nodes will not run", exc)
        return None
    device = _sampler_device(config)
    if device != "cpu":
        return StepLoopSampler(
            max_batch=config.max_batch, token_budget=config.batch_token_budget, device=device
        )
    # On a CPU one thread does the model work: the loop's (diffusion/threads.py says why).
    return StepLoopSampler(
        max_batch=config.max_batch,
        token_budget=config.batch_token_budget,
        device=device,
        phases="loop",
        on_loop_start=_claim_compute_thread,
    )


def _claim_compute_thread() -> None:
    from inline_core.diffusion.threads import claim_compute_thread

    claim_compute_thread()


def _sampler_device(config: Config) -> str:
    """The device whose batching defaults apply, decided without importing torch at start-up."""
    from inline_core.device.detect import gpu_device_nodes_present

    if (config.profile or "").lower() == "cpu" or not gpu_device_nodes_present():
        return "cpu"
    return "cuda"


def _no_scope(_run_id: str) -> AbstractContextManager[object]:
    return nullcontext()


def _register_models(
    registry: Registry, catalog: Catalog, config: Config, sampler: BatchedSampler | None
) -> tuple[Families, ModelRuntime | None]:
    """Register every installed family onto one runtime. A family that refuses the
    configuration (e.g. an INLINE_PARALLEL split it cannot run) raises: a startup error."""
    families = Families.discovered(catalog, config.env)
    if sampler is None:
        return families, None
    runtime = ModelRuntime(config, sampler)
    register_families(registry, families, catalog, runtime)
    return families, runtime


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


def build_services(
    config: Config, lock: DataLock | None | Literal["acquire"] = "acquire"
) -> Services:
    """Everything the app needs, not started (call `Services.start`). The data folder's lock is
    taken first, unless the caller holds it already (`lock`)."""
    held = acquire_data_lock(config) if lock == "acquire" else lock
    try:
        return _build(config, held)
    except BaseException:
        if held is not None:
            held.release()
        raise


def _build(config: Config, lock: DataLock | None) -> Services:
    catalog = Catalog(config.models_dir, contents=checkpoint_contents)
    runs = open_run_store(config, config.server_id or default_server_id())
    budget = DiskBudget(
        min_free_bytes=config.min_free_disk_mb * MB,
        max_total_bytes=(
            int(config.max_assets_gb * 1024 * MB) if config.max_assets_gb is not None else None
        ),
    )
    assets = AssetStore(
        config.assets_dir, config.max_upload_mb * MB, config.max_image_pixels, budget
    )
    takes = FileTakeStore(config.takes_dir.resolve())
    media = StoredMediaResolver(assets, runs, takes.root)
    registry = Registry()
    register_builtin_nodes(registry, media)
    sampler = _make_sampler(config)
    try:
        families, runtime = _register_models(registry, catalog, config, sampler)
    except InlineError:  # the server will not start: release what was opened
        if sampler is not None:
            sampler.close()
        runs.close()
        raise
    load_plugins(registry, config.plugins)
    packs = PackHost(config.packs_dir, registry, scratch_dir=config.pack_scratch_dir)
    packs.refresh()  # their nodes are served from the first request
    executor = Executor(catalog, NodeCache())
    device = DeviceInfo(config)
    downloads = DownloadManager(
        config.models_dir,
        endpoint=config.hf_endpoint,
        max_active=config.max_downloads,
        keep_free_bytes=config.min_free_disk_mb * MB,
        on_landed=catalog.rescan,  # a verified file shows in the catalog (and version) at once
    )
    manager = RunManager(
        config,
        store=runs,
        registry=registry,
        catalog=catalog,
        takes=takes,
        executor=executor,
        device_kind=device.kind,
        run_scope=_no_scope if runtime is None else runtime.rendering,
        picker_order=families.picker_options,
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
        device=device,
        sockets=SocketGate(config.max_websockets, config.max_websockets_per_run, open_file_limit()),
        families=families,
        runtime=runtime,
        packs=packs,
        downloads=downloads,
        download_feed=DownloadFeed(downloads),
        closers=[] if runtime is None else [runtime.close],
        lock=lock,
    )
