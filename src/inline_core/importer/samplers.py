"""ComfyUI sampler and scheduler names -> the nearest ones the `sample` node offers.

Each ComfyUI name lists its nearest relatives, best first; the first one the node allows wins, and
the node's default is the last resort. Names match ComfyUI's (`euler`, `simple`, ...), so a name
we offer maps onto itself.
"""

from __future__ import annotations

from collections.abc import Sequence

_SAMPLER_RELATIVES: dict[str, tuple[str, ...]] = {
    "euler_cfg_pp": ("euler",),
    "euler_ancestral": ("euler",),
    "euler_ancestral_cfg_pp": ("euler_ancestral", "euler"),
    "heunpp2": ("heun",),
    "dpm_2": ("heun",),
    "dpm_2_ancestral": ("dpm_2", "euler_ancestral", "heun"),
    "lms": ("dpmpp_2m", "deis", "ipndm"),
    "dpm_fast": ("dpmpp_2m", "dpm_adaptive"),
    "dpm_adaptive": ("dpmpp_2m", "dpm_fast"),
    "dpmpp_2s_ancestral": ("dpmpp_2m", "euler_ancestral"),
    "dpmpp_2s_ancestral_cfg_pp": ("dpmpp_2s_ancestral", "dpmpp_2m", "euler_ancestral"),
    "dpmpp_sde": ("dpmpp_2m_sde", "dpmpp_2m"),
    "dpmpp_sde_gpu": ("dpmpp_sde", "dpmpp_2m_sde", "dpmpp_2m"),
    "dpmpp_2m": ("unipc", "uni_pc", "deis"),
    "dpmpp_2m_cfg_pp": ("dpmpp_2m",),
    "dpmpp_2m_sde": ("dpmpp_sde", "dpmpp_2m"),
    "dpmpp_2m_sde_gpu": ("dpmpp_2m_sde", "dpmpp_sde", "dpmpp_2m"),
    "dpmpp_3m_sde": ("dpmpp_2m_sde", "dpmpp_2m"),
    "dpmpp_3m_sde_gpu": ("dpmpp_3m_sde", "dpmpp_2m_sde", "dpmpp_2m"),
    "ddpm": ("euler_ancestral",),
    "lcm": ("euler",),
    "ipndm": ("dpmpp_2m", "deis"),
    "ipndm_v": ("ipndm", "dpmpp_2m"),
    "deis": ("dpmpp_2m", "unipc", "uni_pc"),
    "res_multistep": ("dpmpp_2m",),
    "res_multistep_cfg_pp": ("res_multistep", "dpmpp_2m"),
    "res_multistep_ancestral": ("res_multistep", "euler_ancestral", "dpmpp_2m"),
    "res_multistep_ancestral_cfg_pp": ("res_multistep_ancestral", "euler_ancestral"),
    "gradient_estimation": ("euler",),
    "er_sde": ("dpmpp_2m_sde", "dpmpp_sde"),
    "seeds_2": ("dpmpp_sde", "dpmpp_2m_sde"),
    "seeds_3": ("seeds_2", "dpmpp_sde"),
    "sa_solver": ("dpmpp_2m_sde", "dpmpp_2m"),
    "ddim": ("euler",),
    "uni_pc": ("uni_pc_bh2", "unipc", "dpmpp_2m"),
    "uni_pc_bh2": ("uni_pc", "unipc", "dpmpp_2m"),
}

_SCHEDULER_RELATIVES: dict[str, tuple[str, ...]] = {
    "normal": ("simple", "sgm_uniform"),
    "sgm_uniform": ("simple", "normal"),
    "ddim_uniform": ("simple", "normal"),
    "karras": ("exponential", "kl_optimal"),
    "exponential": ("karras",),
    "beta": ("karras", "kl_optimal"),
    "linear_quadratic": ("simple",),
    "kl_optimal": ("karras", "beta"),
}


def _nearest(
    wanted: str, allowed: Sequence[str], default: str, relatives: dict[str, tuple[str, ...]]
) -> str:
    if not allowed or wanted in allowed:
        return wanted
    for name in relatives.get(wanted, ()):
        if name in allowed:
            return name
    return default if default in allowed else allowed[0]


def nearest_sampler(wanted: str, allowed: Sequence[str], default: str) -> str:
    return _nearest(wanted, allowed, default, _SAMPLER_RELATIVES)


def nearest_scheduler(wanted: str, allowed: Sequence[str], default: str) -> str:
    return _nearest(wanted, allowed, default, _SCHEDULER_RELATIVES)
