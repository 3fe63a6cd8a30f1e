"""ComfyUI's `KSamplerAdvanced` window over a schedule (torch-free arithmetic on the sigma list):
run steps `start` to `end` of it, without adding noise to the latent it starts from, and hand the
latent on with its leftover noise or denoised to 0, as ComfyUI's `KSampler.sample` cuts its
sigmas (`sigmas[start:end + 1]`, the last set to 0 unless the noise is kept)."""

from __future__ import annotations

from dataclasses import dataclass

ALL_STEPS = 10000  # ComfyUI's end_at_step default: to the end of the schedule


@dataclass(frozen=True)
class StepWindow:
    start: int = 0
    end: int = ALL_STEPS
    add_noise: bool = True
    leftover_noise: bool = False  # return_with_leftover_noise: stop at sigma[end], not at 0

    @property
    def whole(self) -> bool:
        """The plain render: every step, from noise, down to 0."""
        return self == StepWindow()

    def cut(self, sigmas: list[float]) -> list[float]:
        """The sigmas this window visits (a ValueError when it holds no step)."""
        out = list(sigmas)
        if self.end < len(out) - 1:
            out = out[: self.end + 1]
            if not self.leftover_noise:
                out[-1] = 0.0
        if self.start >= len(out) - 1:
            raise ValueError(
                f"start_at_step {self.start} is at or past the window's last step "
                f"({len(out) - 1}): there is no step to run"
            )
        return out[self.start :]
