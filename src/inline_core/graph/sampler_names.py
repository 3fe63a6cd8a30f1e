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
)
# Run by diffusers' scheduler on flow sigmas (not yet on the library's sigma steps).
FLOW_ONLY_SAMPLERS: tuple[str, ...] = ("uni_pc_bh2",)
SAMPLERS: tuple[str, ...] = SIGMA_SAMPLERS + FLOW_ONLY_SAMPLERS

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

# ComfyUI's sampler names this library does not run (yet): refused by name, never swapped.
COMFY_SAMPLERS_NOT_RUN: tuple[str, ...] = (
    "euler_cfg_pp",
    "euler_ancestral_cfg_pp",
    "heunpp2",
    "exp_heun_2_x0",
    "exp_heun_2_x0_sde",
    "dpm_fast",
    "dpm_adaptive",
    "dpmpp_2s_ancestral_cfg_pp",
    "dpmpp_sde_gpu",
    "dpmpp_2m_cfg_pp",
    "dpmpp_2m_sde_gpu",
    "dpmpp_2m_sde_heun",
    "dpmpp_2m_sde_heun_gpu",
    "dpmpp_3m_sde_gpu",
    "ddpm",
    "ipndm_v",
    "deis",
    "res_multistep_cfg_pp",
    "res_multistep_ancestral",
    "res_multistep_ancestral_cfg_pp",
    "gradient_estimation",
    "gradient_estimation_cfg_pp",
    "seeds_2",
    "seeds_3",
    "sa_solver",
    "sa_solver_pece",
    "uni_pc",
)


def closest(name: str, offered: tuple[str, ...]) -> str | None:
    """The offered name nearest in spelling to `name`, for an error message (never a swap)."""
    found = difflib.get_close_matches(name, offered, n=1, cutoff=0.0)
    return found[0] if found else None
