"""The `device` object of `/v1/health`, without putting torch on the start-up path.

GPU detection imports torch (seconds), so it runs on a background thread after start-up; until it
finishes, health says `"kind": "detecting"`. With `INLINE_PROFILE=cpu` nothing needs torch and the
answer is immediate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from inline_core.config import Config
from inline_core.device.detect import gpu_device_nodes_present
from inline_core.errors import InlineError
from inline_core.server.openmp import spin_setting

log = logging.getLogger(__name__)


def _cpu_description(config: Config) -> dict[str, Any]:
    from inline_core.device import DevicePolicy, DeviceSettings
    from inline_core.device.detect import detect_cpu

    return dict(DevicePolicy(detect_cpu(), DeviceSettings.from_config(config)).describe())


def _detected_description(config: Config) -> dict[str, Any]:
    from inline_core.device import policy_from_config

    return dict(policy_from_config(config).describe())


class DeviceInfo:
    def __init__(self, config: Config) -> None:
        self._config = config
        self._lock = threading.Lock()
        budget = config.vram_budget_gb
        self._body: dict[str, Any] = {
            "kind": "detecting",
            "profile": config.profile or "auto",
            "vramBudgetMb": None if budget is None else int(budget * 1024),
            "detected": False,
        }
        self._started = False

    def start(self) -> None:
        """Describe the device: at once for the cpu profile, else on a background thread."""
        if self._started:
            return
        self._started = True
        if (self._config.profile or "").strip().lower() == "cpu":
            self._describe(_cpu_description)
            return
        threading.Thread(
            target=self._describe,
            args=(_detected_description,),
            name="device-detect",
            daemon=True,
        ).start()

    def _describe(self, how: Callable[[Config], dict[str, Any]]) -> None:
        try:
            body = dict(how(self._config))
        except InlineError as exc:  # a bad INLINE_PROFILE / INLINE_PARALLEL: say so in health
            with self._lock:
                self._body = {**self._body, "kind": "unknown", "error": exc.message}
            return
        except Exception:
            log.exception("device detection failed")
            with self._lock:
                self._body = {**self._body, "kind": "unknown"}
            return
        body["detected"] = True
        note = body.get("note")
        if isinstance(note, str) and gpu_device_nodes_present():
            # A GPU is there but cannot be used (e.g. a CPU-only torch); with none at all the
            # start-up checks have said so already.
            log.warning("%s", note)
        with self._lock:
            self._body = body

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            body = dict(self._body)
        # How the CPU's compute threads wait at a barrier (server/openmp.py): on any device the
        # CPU does some of the work, and on a shared CPU the wait decides its pace.
        body["openmp"] = spin_setting().to_json()
        return body

    def kind(self) -> str | None:
        """The detected device kind ("cpu", "cuda", ...); None until detection has finished."""
        with self._lock:
            if not self._body.get("detected"):
                return None
            kind = self._body.get("kind")
        return kind if isinstance(kind, str) else None
