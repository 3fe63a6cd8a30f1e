"""The samplers and schedules the library runs, under ComfyUI's names (torch-free: the node
descriptors, the importer and ComfyUI's `object_info` read them without loading torch)."""

from __future__ import annotations

import difflib

# Samplers whose every step is exact k-diffusion / ComfyUI arithmetic on sigma.
SIGMA_SAMPLERS: tuple[str, ...] = (
    "euler",
    "euler_ancestral",
    "heun",
    "dpm_2",
    "dpm_2_ancestral",
    "lms",
    "dpmpp_2s_ancestral",
    "dpmpp_sde",
    "dpmpp_2m",
    "dpmpp_2m_sde",
    "dpmpp_3m_sde",
    "ddim",
    "lcm",
    "ipndm",
    "res_multistep",
    "er_sde",
    "dpmpp_2m_sde_heun",
    "res_multistep_ancestral",
    "ipndm_v",
    "dpmpp_sde_gpu",
    "dpmpp_2m_sde_gpu",
    "dpmpp_2m_sde_heun_gpu",
    "dpmpp_3m_sde_gpu",
    # ComfyUI's UniPC (`sample_unipc`): order 3, B(h) by name, every model's sigma read as an
    # epsilon model's, a walk to 0 ending at 0.001 (`sigma/algorithms/unipc.py`).
    "uni_pc",
    "uni_pc_bh2",
    "deis",
    "gradient_estimation",
)
# CFG++ (ComfyUI's `_cfg_pp`): the library runs them on the unconditional prediction a family's
# step hands on beside the guided one; a node offers them only where its family does so.
CFG_PP_SAMPLERS: tuple[str, ...] = (
    "euler_cfg_pp",
    "euler_ancestral_cfg_pp",
    "dpmpp_2m_cfg_pp",
    "dpmpp_2s_ancestral_cfg_pp",
    "res_multistep_cfg_pp",
    "res_multistep_ancestral_cfg_pp",
)


def draws_noise(sampler: str) -> bool:
    """Whether `sampler`'s steps draw fresh noise (from the render's seed, after the first
    noise): the ancestral and SDE samplers, and LCM."""
    return "ancestral" in sampler or "sde" in sampler or sampler == "lcm"


def cfg_pp_unguided(sampler: str) -> str:
    """Why `sampler` (a CFG++ one) cannot run without guidance."""
    return (
        f"sampler {sampler!r} (CFG++) steps along the unconditional prediction, which only a "
        "guided render computes: set cfg above 1 and wire a negative, or pick "
        f"{sampler.removesuffix('_cfg_pp')!r}"
    )


# Samplers that step from their earlier model calls: one walk across a switch of models (a pair of
# experts) differs from two walks split there (ComfyUI's two KSamplerAdvanced stages, the second
# started afresh). Checked against the library's walks (`tests/diffusion/test_sigma_library.py`).
MULTISTEP_SAMPLERS: tuple[str, ...] = (
    "lms",
    "dpmpp_2m",
    "dpmpp_2m_sde",
    "dpmpp_3m_sde",
    "ipndm",
    "res_multistep",
    "er_sde",
    "dpmpp_2m_sde_heun",
    "res_multistep_ancestral",
    "ipndm_v",
    "dpmpp_2m_sde_gpu",
    "dpmpp_2m_sde_heun_gpu",
    "dpmpp_3m_sde_gpu",
    "uni_pc",
    "uni_pc_bh2",
    "deis",
    "gradient_estimation",
    "dpmpp_2m_cfg_pp",
    "res_multistep_cfg_pp",
    "res_multistep_ancestral_cfg_pp",
)
SAMPLERS: tuple[str, ...] = SIGMA_SAMPLERS
# What a node whose family runs CFG and hands on its unconditional prediction offers.
GUIDED_SAMPLERS: tuple[str, ...] = SAMPLERS + CFG_PP_SAMPLERS

SCHEDULES: tuple[str, ...] = (
    "simple",
    "normal",
    "karras",
    "exponential",
    "sgm_uniform",
    "beta",
    "linear_quadratic",
    "kl_optimal",
    "ddim_uniform",
)


def closest(name: str, offered: tuple[str, ...]) -> str | None:
    """The offered name nearest to `name`, for an error message (never a swap): its base sampler
    for a ComfyUI variant (`_cfg_pp`, `_gpu`), else the nearest in spelling."""
    for suffix in ("_cfg_pp", "_gpu"):
        if name.endswith(suffix) and name.removesuffix(suffix) in offered:
            return name.removesuffix(suffix)
    found = difflib.get_close_matches(name, offered, n=1, cutoff=0.0)
    return found[0] if found else None
