"""The server's packs: what is installed, their nodes in the registry, and their workers.

At start every installed pack is loaded whole (its nodes registered as `<pack>/<node>` with the
pack as `source`) or refused whole (listed with the reason, none of its nodes served). The packs
folder is watched: an install, upgrade or remove made by `inline-core packs` while the server runs
is picked up within `WATCH_S` (or at once by `GET /v1/packs` and `GET /v1/models`). A call in
flight finishes on the version it started on; the next call starts the new version's worker.

Each pack has one worker, started on first use and kept warm, running one call at a time.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inline_core.errors import Cancelled
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.packs.errors import PackNodeFailed, PackRefused
from inline_core.packs.loaded import LoadedPack, load_installed
from inline_core.packs.media_io import (
    OutputSources,
    inputs_to_wire,
    outputs_from_wire,
    result_with_takes,
)
from inline_core.packs.process import Limits, PackProcess
from inline_core.packs.raw_pixels import RawPixelReader
from inline_core.packs.scratch import Scratch, make_scratch, scratch_root, sweep_scratch
from inline_core.packs.store import InstalledPack, PackStore, hold_in_use
from inline_core.packs.wire import PackNode
from inline_core_sdk.version import sdk_version

log = logging.getLogger(__name__)

WATCH_S = 1.0
CALL_DIR = "call"
RAW_SUFFIX = ".raw"
LOCK_POLL_S = 0.05
LOGS = ".logs"


def clear_call_dir(call_dir: Path) -> None:
    """Leave only the raw pixel files (rewritten in place by the next call): the rest, a video
    output or whatever else the node wrote, goes with the call."""
    for entry in call_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.suffix != RAW_SUFFIX:
            entry.unlink(missing_ok=True)


@dataclass
class _Worker:
    process: PackProcess
    pack: LoadedPack
    in_use_fd: int
    scratch: Scratch
    reader: RawPixelReader = field(default_factory=RawPixelReader)

    def stop(self) -> None:
        self.process.stop()
        os.close(self.in_use_fd)
        self.scratch.remove()


@dataclass
class PackSlot:
    """One installed pack's state in this server."""

    name: str
    installed: InstalledPack
    loaded: LoadedPack | None = None
    refused: str | None = None  # why it was refused at load
    last_error: str | None = None
    calls: int = 0
    failures: int = 0
    starts: int = 0
    last_start_s: float | None = None
    worker: _Worker | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def status(self) -> str:
        if self.refused is not None:
            return "refused"
        if self.worker is not None and self.worker.process.alive:
            return "running"
        return "idle"


class PackNodeRunner(NodeRunner):
    def __init__(self, host: PackHost, node: PackNode) -> None:
        self.host = host
        self.node = node
        self.cacheable = node.cacheable

    def cache_identity(self, params: Any, prepared: object | None = None) -> str:
        return self.host.identity(self.node.pack)

    def run(self, call: NodeCall) -> NodeResult:
        return self.host.run(self.node, call)


class PackHost:
    def __init__(
        self,
        root: Path,
        registry: Registry,
        *,
        watch: bool = True,
        scratch_dir: Path | None = None,
    ) -> None:
        self.store = PackStore(root)
        self.scratch_dir = scratch_dir or scratch_root()  # workers' folders, swept at start
        self.registry = registry
        self.sdk_version = sdk_version()
        self.slots: dict[str, PackSlot] = {}
        self._stamp: tuple[int, int] | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="packs-watch", daemon=True)
        self._watch_enabled = watch

    # ---- loading ---------------------------------------------------------------------------

    def start(self) -> None:
        self.refresh()
        try:
            self.store.sweep()
        except OSError:
            log.exception("sweeping unused pack folders failed; continuing")
        sweep_scratch(self.scratch_dir)  # what workers of servers killed earlier left there
        if self._watch_enabled:
            self._watcher.start()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            try:
                self.refresh()
            except Exception:
                log.exception("reading the packs folder failed; trying again")

    def refresh(self) -> None:
        """Pick up what `inline-core packs` changed since the last look (one stat if nothing)."""
        with self._lock:
            stamp = self.store.stamp()
            if stamp == self._stamp:
                return
            self._stamp = stamp
            installed = self.store.installed()
            for name in sorted(set(self.slots) - set(installed)):
                self._forget(self.slots[name], f"pack {name!r} was removed")
            for name, pack in sorted(installed.items()):
                slot = self.slots.get(name)
                if slot is None or slot.installed.folder != pack.folder:
                    self._load(slot, pack)

    def _load(self, slot: PackSlot | None, installed: InstalledPack) -> None:
        previous = slot.loaded if slot is not None else None
        try:
            loaded = load_installed(installed, self.sdk_version)
            self._check_types(loaded)
        except PackRefused as exc:
            log.error("pack %s refused: %s", installed.name, exc.message)
            if slot is not None:
                self._forget(slot, f"pack {installed.name!r} was refused: {exc.message}")
            self.slots[installed.name] = PackSlot(installed.name, installed, refused=exc.message)
            return
        if slot is None:
            slot = self.slots[installed.name] = PackSlot(installed.name, installed)
        if previous is not None:
            for name in sorted(set(previous.nodes) - set(loaded.nodes)):
                self.registry.mark_unavailable(
                    previous.nodes[name].descriptor.type,
                    f"pack {slot.name!r} {loaded.version} no longer has this node",
                )
        slot.installed, slot.loaded, slot.refused = installed, loaded, None
        for node in loaded.nodes.values():
            self.registry.register(node.descriptor, PackNodeRunner(self, node))
        self._retire_if_idle(slot)
        log.info("pack %s %s: %d nodes", loaded.name, loaded.version, len(loaded.nodes))

    def _check_types(self, loaded: LoadedPack) -> None:
        """Refuse a pack whose types another source serves (a removed pack's types stay
        registered, unavailable, with the pack as source: those are its own again)."""
        for node in loaded.nodes.values():
            node_type = node.descriptor.type
            if node_type in self.registry:
                owner = self.registry.descriptor(node_type).source
                if owner != loaded.name:
                    raise PackRefused(f"node type {node_type} is already served (by {owner})")

    def _forget(self, slot: PackSlot, reason: str) -> None:
        if slot.loaded is not None:
            for node in slot.loaded.nodes.values():
                self.registry.mark_unavailable(node.descriptor.type, reason)
        slot.loaded = None
        self._retire_if_idle(slot)
        del self.slots[slot.name]

    def _retire_if_idle(self, slot: PackSlot) -> None:
        """Stop a worker whose version is no longer current, unless a call is using it (that
        call finishes, and the worker is stopped after it)."""
        if slot.worker is None or slot.worker.pack is slot.loaded:
            return
        if slot.lock.acquire(blocking=False):
            try:
                self._stop_worker(slot)
            finally:
                slot.lock.release()

    def _stop_worker(self, slot: PackSlot) -> None:
        if slot.worker is not None:
            slot.worker.stop()
            slot.worker = None
            try:
                self.store.sweep()
            except OSError:
                log.exception("sweeping unused pack folders failed")

    # ---- running ---------------------------------------------------------------------------

    def identity(self, pack: str) -> str:
        slot = self.slots.get(pack)
        loaded = slot.loaded if slot is not None else None
        return loaded.identity if loaded is not None else f"{pack}@removed"

    def _acquire(self, slot: PackSlot, call: NodeCall) -> None:
        """Wait for the pack's worker (one call at a time), leaving at once on cancel."""
        while not slot.lock.acquire(timeout=LOCK_POLL_S):
            call.ctx.cancel.raise_if_cancelled()

    def _worker(self, slot: PackSlot, loaded: LoadedPack) -> _Worker:
        worker = slot.worker
        if worker is not None and worker.pack is loaded and worker.process.alive:
            return worker
        self._stop_worker(slot)
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        scratch = make_scratch(slot.name, self.scratch_dir)
        log_path = self.store.root / LOGS / f"{slot.name}.log"
        process = PackProcess(loaded, scratch.path, log_path)
        try:
            in_use = hold_in_use(loaded.installed.folder)
        except OSError as exc:
            scratch.remove()
            raise PackNodeFailed(f"pack {slot.name!r}: its folder is gone ({exc})") from exc
        try:
            process.start()
        except BaseException:
            os.close(in_use)
            scratch.remove()
            raise
        slot.starts += 1
        slot.last_start_s = process.started_s
        slot.worker = _Worker(process, loaded, in_use, scratch)
        return slot.worker

    def run(self, node: PackNode, call: NodeCall) -> NodeResult:
        """The node's outputs, its media written as takes (outside the worker's lock)."""
        current, values = self.outputs(node, call)
        result = result_with_takes(call, current, values)
        call.ctx.reporter(call.node_id).phase("run", 1.0)
        return result

    def outputs(self, node: PackNode, call: NodeCall) -> tuple[PackNode, dict[str, Any]]:
        """Run the node in its pack's worker; the node as it ran (the current version's) and
        its output values."""
        slot = self.slots.get(node.pack)
        if slot is None or slot.loaded is None:
            raise PackNodeFailed(f"pack {node.pack!r} is not installed any more")
        self._acquire(slot, call)
        try:
            return self._outputs_locked(slot, node, call)
        finally:
            if slot.worker is not None and slot.worker.pack is not slot.loaded:
                self._stop_worker(slot)  # it was upgraded or removed while this call ran
            slot.lock.release()

    def _outputs_locked(
        self, slot: PackSlot, node: PackNode, call: NodeCall
    ) -> tuple[PackNode, dict[str, Any]]:
        loaded = slot.loaded
        if loaded is None:
            raise PackNodeFailed(f"pack {node.pack!r} was removed before this node ran")
        current = loaded.nodes.get(node.node, node)  # an upgrade since submit: run the new one
        slot.calls += 1
        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("run")

        def progress(message: dict[str, Any]) -> None:
            step, total = message.get("step"), message.get("total")
            if isinstance(step, int) and isinstance(total, int) and total > 0:
                reporter.step(step, total, phase="run")
            else:
                reporter.phase("run", float(message.get("fraction", 0.0)))

        try:
            worker = self._worker(slot, loaded)
            call_dir = worker.process.scratch / CALL_DIR  # one call at a time: one folder, reused
            call_dir.mkdir(exist_ok=True)
            try:
                arena = worker.process.arena
                wire_inputs = inputs_to_wire(current.descriptor, call.inputs, call_dir, arena)
                outputs = worker.process.call(
                    current.node,
                    dict(call.params),
                    wire_inputs,
                    call_dir,
                    Limits(loaded.manifest.timeout_s, loaded.manifest.memory_mb),
                    call.ctx.cancel,
                    progress,
                )
                sources = OutputSources(call_dir, worker.reader, arena)
                return current, outputs_from_wire(current, outputs, sources)
            finally:
                clear_call_dir(call_dir)
        except PackNodeFailed as exc:
            slot.failures += 1
            slot.last_error = exc.message
            if slot.worker is not None and not slot.worker.process.alive:
                self._stop_worker(slot)
            raise
        except Cancelled:
            if slot.worker is not None and not slot.worker.process.alive:
                self._stop_worker(slot)
            raise

    # ---- reporting and shutdown ------------------------------------------------------------

    def snapshot(self) -> list[PackSlot]:
        """Every installed pack, by name, as of now."""
        self.refresh()
        with self._lock:
            return sorted(self.slots.values(), key=lambda s: s.name)

    def close(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + 5.0
        for slot in list(self.slots.values()):
            # A call still running is ended with its worker: the run is being shut down.
            if slot.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                try:
                    self._stop_worker(slot)
                finally:
                    slot.lock.release()
            elif slot.worker is not None:
                slot.worker.process.kill()
