"""Where LTX-2 can run a CFG++ sampler (torch-free; read at submit and by the request).

A CFG++ sampler steps each stream along its own unconditional prediction (the negative prompt's
row of the forward), which only a guided stream computes: the first pass needs both `guidance`
(the video's) and `audio_guidance` (the soundtrack's) above 1, and the two-stage upscale's
refining pass, unguided, runs none (its sampler, or the first pass's where it names none)."""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.graph.sampler_names import CFG_PP_SAMPLERS


@dataclass(frozen=True)
class CfgPpRefusal:
    param: str  # the param that names the sampler: `sampler` or `refine_sampler`
    message: str


def cfg_pp_refusal(
    sampler: str,
    guidance: float,
    audio_guidance: float,
    refine_sampler: str | None,
    refine_guidance: float = 1.0,
) -> CfgPpRefusal | None:
    """Why a CFG++ sampler cannot run here; `refine_sampler` None: no refining pass, "": the
    refining pass runs the first pass's sampler."""
    if sampler in CFG_PP_SAMPLERS:
        scales = (("guidance", guidance), ("audio_guidance", audio_guidance))
        unguided = " and ".join(name for name, value in scales if value <= 1)
        if unguided:
            return CfgPpRefusal(
                "sampler",
                f"param 'sampler': the CFG++ sampler {sampler!r} steps each stream along its "
                "unconditional prediction, which only a guided stream computes, and "
                f"{unguided} (1 or less) leave a stream unguided: set {unguided} above 1, or pick "
                f"{_plain(sampler)!r}",
            )
    if refine_sampler is None or refine_guidance > 1:
        return None
    refining = refine_sampler or sampler
    if refining not in CFG_PP_SAMPLERS:
        return None
    if refine_sampler:
        return CfgPpRefusal(
            "refine_sampler",
            f"param 'refine_sampler': the two-stage upscale's refining pass is unguided, so it "
            f"computes no unconditional prediction for the CFG++ sampler {refining!r} to step "
            f"along: pick {_plain(refining)!r}",
        )
    return CfgPpRefusal(
        "sampler",
        f"param 'sampler': the two-stage upscale's refining pass runs the first pass's sampler "
        f"where 'refine_sampler' is empty, and it is unguided, so it computes no unconditional "
        f"prediction for the CFG++ sampler {refining!r} to step along: set 'refine_sampler' "
        f"(to {_plain(refining)!r}, say), or pick {_plain(refining)!r}",
    )


def _plain(sampler: str) -> str:
    return sampler.removesuffix("_cfg_pp")
