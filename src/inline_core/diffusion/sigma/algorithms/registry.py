"""Every sampler the library runs, by ComfyUI's name."""

from __future__ import annotations

from inline_core.diffusion.sigma.algorithms import (
    cfg_pp,
    deis,
    first_order,
    multistep,
    sde,
    two_stage,
)
from inline_core.diffusion.sigma.algorithms.unipc import UniPC
from inline_core.diffusion.sigma.algorithms.walk import Algorithm
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, SIGMA_SAMPLERS

ALGORITHMS: dict[str, Algorithm] = {
    "euler": first_order.euler,
    "euler_ancestral": first_order.euler_ancestral,
    "heun": two_stage.heun,
    "dpm_2": two_stage.dpm_2,
    "dpm_2_ancestral": two_stage.dpm_2_ancestral,
    "lms": multistep.lms,
    "dpmpp_2s_ancestral": two_stage.dpmpp_2s_ancestral,
    "dpmpp_sde": two_stage.dpmpp_sde,
    "dpmpp_2m": multistep.dpmpp_2m,
    "dpmpp_2m_sde": sde.dpmpp_2m_sde,
    "dpmpp_3m_sde": sde.dpmpp_3m_sde,
    # ComfyUI's `ddim` is its Euler sampler (`ksampler("euler")`), which is DDIM (eta 0) on sigma.
    "ddim": first_order.euler,
    "lcm": first_order.lcm,
    "ipndm": multistep.ipndm,
    "res_multistep": multistep.res_multistep,
    "er_sde": sde.er_sde,
    "dpmpp_2m_sde_heun": sde.dpmpp_2m_sde_heun,
    "res_multistep_ancestral": multistep.res_multistep_ancestral,
    "ipndm_v": multistep.ipndm_v,
    # ComfyUI's `_gpu` variants differ only in where their Brownian tree draws; here every row
    # draws from its own generator either way, so they are the same samplers.
    "dpmpp_sde_gpu": two_stage.dpmpp_sde,
    "dpmpp_2m_sde_gpu": sde.dpmpp_2m_sde,
    "dpmpp_2m_sde_heun_gpu": sde.dpmpp_2m_sde_heun,
    "dpmpp_3m_sde_gpu": sde.dpmpp_3m_sde,
    "uni_pc": UniPC("bh1", order=3, comfyui=True).algorithm,
    "uni_pc_bh2": UniPC("bh2", order=3, comfyui=True).algorithm,
    "deis": deis.deis,
    "gradient_estimation": multistep.gradient_estimation,
    "euler_cfg_pp": cfg_pp.euler_cfg_pp,
    "euler_ancestral_cfg_pp": cfg_pp.euler_ancestral_cfg_pp,
    "dpmpp_2m_cfg_pp": cfg_pp.dpmpp_2m_cfg_pp,
    "dpmpp_2s_ancestral_cfg_pp": cfg_pp.dpmpp_2s_ancestral_cfg_pp,
    "res_multistep_cfg_pp": multistep.res_multistep_cfg_pp,
    "res_multistep_ancestral_cfg_pp": multistep.res_multistep_ancestral_cfg_pp,
}
assert tuple(ALGORITHMS) == SIGMA_SAMPLERS + CFG_PP_SAMPLERS
