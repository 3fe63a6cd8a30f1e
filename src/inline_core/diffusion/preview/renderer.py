"""`PreviewRenderer`: x0 estimates to JPEG previews, by the run's method, at the preview size.

A preview's longest side is the server's preview size (`--preview-size`), or the picture's own
when that is smaller: latent2rgb's image (one pixel per latent cell) is scaled up to it, a tiny
decoder's (full size) down. `taesd` without a decoder file for the latents' format (or with one
that does not load) falls back to latent2rgb, as ComfyUI does, says so once in the log, and the
preview names the method that made it. Video latents preview their first frame. Runs on the
preview worker's thread.
"""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path
from typing import cast

import torch
from PIL import Image

from inline_core.diffusion.preview.formats import PreviewFormat, preview_format
from inline_core.diffusion.preview.latent_rgb import first_image, latent_to_rgb
from inline_core.diffusion.preview.taehv import TinyVideoDecoder
from inline_core.diffusion.preview.tiny_decoder import TinyDecoder, find_decoder
from inline_core.runtime.preview import LATENT2RGB, TAESD, EncodedPreview

log = logging.getLogger(__name__)

JPEG_QUALITY = 85

Decoder = TinyDecoder | TinyVideoDecoder

# Threads whose intra-op settings were stated (see `_settle_threads`).
_settled = threading.local()


def _settle_threads() -> None:
    """State the intra-op thread count once on this thread (the preview worker's): on a thread
    that torch has not seen set, its first ops ran 30-40x slower and slowed the step loop's
    forwards 2-3x beside them (bench/previews.py: a 0.3 ms latent2rgb took 12-16 ms). Setting the
    value it already has changes no other thread. (On a CPU server that value is one thread:
    the step loop claims the others, `diffusion/threads.py`.)"""
    if not getattr(_settled, "done", False):
        torch.set_num_threads(torch.get_num_threads())
        _settled.done = True


class PreviewRenderer:
    def __init__(self, vae_approx: Path, size: int) -> None:
        self.vae_approx = vae_approx
        self.size = size
        self._lock = threading.Lock()
        self._decoders: dict[str, Decoder | None] = {}

    def decoder(self, fmt: PreviewFormat) -> Decoder | None:
        """The format's tiny decoder, loaded once (None: no file for it, or one that does not
        load: said once in the log, and its previews are latent2rgb's)."""
        with self._lock:
            if fmt.name not in self._decoders:
                self._decoders[fmt.name] = self._load(fmt)
            return self._decoders[fmt.name]

    def _load(self, fmt: PreviewFormat) -> Decoder | None:
        path = find_decoder(self.vae_approx, fmt)
        if path is None:
            names = " or ".join(f"{n}*" for n in fmt.tiny_decoders) or "no tiny decoder named"
            log.warning(
                "taesd previews of %s latents: no %s file in %s; using latent2rgb",
                fmt.name,
                names,
                self.vae_approx,
            )
            return None
        try:
            return TinyVideoDecoder(path, fmt) if fmt.video else TinyDecoder(path, fmt)
        except Exception as exc:  # a broken or foreign file: its previews fall back
            log.warning(
                "taesd previews of %s latents: %s does not load (%s); using latent2rgb",
                fmt.name,
                path,
                exc,
            )
            return None

    def image(
        self, method: str, latents: torch.Tensor, format_name: str
    ) -> tuple[Image.Image, str]:
        """The preview image at the preview size, and the method that made it."""
        fmt = preview_format(format_name)
        decoder = self.decoder(fmt) if method == TAESD else None
        if decoder is not None:
            picture, used = decoder.decode(latents), TAESD
        else:
            picture, used = latent_to_rgb(latents, fmt), LATENT2RGB
        x = first_image(latents, fmt)
        full = (int(x.shape[2]) * fmt.spatial_factor, int(x.shape[1]) * fmt.spatial_factor)
        return picture.resize(self.fit(full), Image.Resampling.BILINEAR), used

    def fit(self, full: tuple[int, int]) -> tuple[int, int]:
        """(width, height) with the longest side the preview size, or `full` if smaller."""
        longest = max(full)
        if longest <= self.size:
            return full
        scale = self.size / longest
        return max(1, round(full[0] * scale)), max(1, round(full[1] * scale))

    def render(self, method: str, latents: object, format_name: str) -> EncodedPreview:
        _settle_threads()
        picture, used = self.image(method, cast(torch.Tensor, latents), format_name)
        buf = io.BytesIO()
        picture.save(buf, format="JPEG", quality=JPEG_QUALITY)
        return EncodedPreview(buf.getvalue(), "jpeg", picture.width, picture.height, used)
