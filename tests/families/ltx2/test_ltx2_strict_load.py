"""LTX-2's single-file parts load strictly (`families/ltx2/strict_load.py`): weights that match
the config load as given; a wrong shape, a missing key or an unexpected one is a `RunFailed`
naming the keys and the file, never a model with some weights left at random."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import torch
from torch import nn

from inline_core.errors import RunFailed
from inline_core.families.ltx2.strict_load import built_strictly


class Tiny(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Tiny:
        return cls(int(config["width"]))


def weights(width: int) -> dict[str, torch.Tensor]:
    return {"proj.weight": torch.ones(width, width), "proj.bias": torch.zeros(width)}


def test_matching_weights_load_as_given() -> None:
    model = built_strictly(Tiny, {"width": 3}, weights(3), "the tiny part /m/t.safetensors")
    assert torch.equal(model.state_dict()["proj.weight"], torch.ones(3, 3))


@pytest.mark.parametrize(
    ("state", "said"),
    [
        pytest.param(weights(4), "shapes of ['proj.weight', 'proj.bias']", id="shape"),
        pytest.param({"proj.weight": torch.ones(3, 3)}, "missing ['proj.bias']", id="missing"),
        pytest.param(
            {**weights(3), "extra.weight": torch.ones(1)}, "unexpected ['extra.weight']", id="extra"
        ),
    ],
)
def test_weights_that_do_not_match_are_refused_naming_the_keys(
    state: dict[str, torch.Tensor], said: str
) -> None:
    with pytest.raises(RunFailed) as refused:
        built_strictly(Tiny, {"width": 3}, state, "the tiny part /m/t.safetensors")
    message = refused.value.message
    assert message.startswith("the tiny part /m/t.safetensors does not match its own config")
    assert said in message
