"""Rank 0's step previews: a job that asks for them (`Job.preview`) gets a channel on one preview
worker of rank 0's, rendered there from the x0 estimate the split forward produced (every rank
holds the whole prediction after the forward), and each image goes to the server as a
`PreviewFrame`, where the job's own sink shows it. Imports torch on the first preview."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from inline_core.parallel.protocol import Job, Message, PreviewFrame
from inline_core.runtime.preview import preview_duty
from inline_core.sampling.previews import PreviewChannel, PreviewWorker


class RankPreviews:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._worker: PreviewWorker | None = None
        self._renderers: dict[tuple[str, int], Any] = {}

    def channel(self, job: Job, send: Any) -> PreviewChannel | None:
        """The job's preview channel (None: it asked for none). `send` takes a `Message`."""
        wanted = job.preview
        if not wanted:
            return None
        method = str(wanted["method"])
        renderer = self._renderer(str(wanted["vaeApprox"]), int(str(wanted["size"])))
        job_id = job.job_id

        def render(latents: Any, latent_format: str) -> Any:
            return renderer.render(method, latents, latent_format)

        def deliver(image: Any, step: int, step_count: int) -> None:
            info = {
                "format": image.format,
                "width": image.width,
                "height": image.height,
                "method": image.method,
            }
            frame: Message = PreviewFrame(job_id, step, step_count, image.data, info)
            send(frame)

        return self._preview_worker().channel(render, deliver, duty=preview_duty(method))

    def _preview_worker(self) -> PreviewWorker:
        with self._lock:
            if self._worker is None:
                self._worker = PreviewWorker(name="inline-rank-previews")
            return self._worker

    def _renderer(self, vae_approx: str, size: int) -> Any:
        from inline_core.diffusion.preview.renderer import PreviewRenderer

        with self._lock:
            key = (vae_approx, size)
            if key not in self._renderers:
                self._renderers[key] = PreviewRenderer(Path(vae_approx), size)
            return self._renderers[key]

    def close(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()
