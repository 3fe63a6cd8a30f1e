"""FLUX.2's schedule shift (torch-free: the pipeline, the importer and the recipe read it)."""

from __future__ import annotations

PIXELS_PER_TOKEN = 16  # one image token per 16x16 pixels


def empirical_mu(image_seq_len: int, num_steps: int) -> float:
    """FLUX.2's shift for an image of `image_seq_len` tokens sampled in `num_steps` (diffusers'
    `compute_empirical_mu`, BFL's fit, which ComfyUI's Flux2Scheduler computes too)."""
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if image_seq_len > 4300:
        return float(a2 * image_seq_len + b2)
    m_200 = a2 * image_seq_len + b2
    m_10 = a1 * image_seq_len + b1
    a = (m_200 - m_10) / 190.0
    return float(a * num_steps + (m_200 - 200.0 * a))


def scheduler_mu(steps: int, width: int, height: int) -> float:
    """ComfyUI's `Flux2Scheduler`: the shift for `steps` steps of a `width`x`height` image, its
    token count rounded as ComfyUI rounds it."""
    return empirical_mu(round(width * height / (PIXELS_PER_TOKEN * PIXELS_PER_TOKEN)), steps)
