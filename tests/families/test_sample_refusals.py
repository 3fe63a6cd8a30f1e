"""What a family's `sample` cannot run is a 422 naming it (the submit check reads the family of
the model wired in): a request's own shift, a CFG++ sampler, a KSamplerAdvanced window."""

from __future__ import annotations

from pathlib import Path

import pytest

from inline_core.contract.settings import SampleSettings
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.primitives import refuse_settings
from inline_core.families.wan.family import WanFamily
from inline_core.families.zimage.family import ZImageFamily
from inline_core.models.catalog import Catalog

PLAIN = SampleSettings(steps=4, cfg=3.0, sampler="euler", scheduler="simple", seed=1, denoise=1.0)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"shift": 6.0}, "cannot run shift 6"),
        ({"mu": 1.2}, "cannot run mu 1.2"),
        ({"sampler": "euler_cfg_pp"}, "cannot run the CFG++ sampler 'euler_cfg_pp'"),
        ({"end_step": 2}, "runs its whole schedule from noise"),
    ],
)
def test_a_family_that_cannot_run_it_refuses_it_by_name(
    tmp_path: Path, changes: dict[str, object], says: str
) -> None:
    wan = WanFamily(Catalog(tmp_path), {})
    settings = SampleSettings.from_params({**PLAIN.__dict__, **changes})
    with pytest.raises(InvalidRequest) as caught:
        refuse_settings(wan, settings, "s")
    assert caught.value.status == 422
    assert says in caught.value.message and "Wan" in caught.value.message
    refuse_settings(ZImageFamily(Catalog(tmp_path), {}), settings, "s")  # Z-Image runs each


def test_cfg_pp_without_guidance_or_two_shifts_are_refused(tmp_path: Path) -> None:
    zimage = ZImageFamily(Catalog(tmp_path), {})
    unguided = SampleSettings.from_params(
        {**PLAIN.__dict__, "sampler": "dpmpp_2m_cfg_pp", "cfg": 1}
    )
    with pytest.raises(InvalidRequest, match="set cfg above 1"):
        refuse_settings(zimage, unguided, "s")
    both = SampleSettings.from_params({**PLAIN.__dict__, "shift": 2.0, "mu": 1.0})
    with pytest.raises(InvalidRequest, match="two shifts of one schedule"):
        refuse_settings(zimage, both, "s")
