"""Without PyAV (the `video` extra) a SkyReels-V2 render asking for MP4 is refused at submit
(422 naming `format` and the extra), never failing at its end; APNG takes need only Pillow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inline_core.contract.submit import Submit
from inline_core.errors import InvalidRequest
from inline_core.families.nodes import video_params
from inline_core.families.skyreels import SkyReelsFamily
from inline_core.families.skyreels.descriptor import NODE_TYPE, SKYREELS_DESCRIPTOR
from inline_core.models.catalog import Catalog


def submit_check(family: SkyReelsFamily, params: dict[str, Any]) -> None:
    resolution = family.resolve(NODE_TYPE, params)
    family.check(Submit(NODE_TYPE, params, "s", resolution, frozenset({"prompt"}), {}, {}))


def test_mp4_without_pyav_is_refused_at_submit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    family = SkyReelsFamily(Catalog(tmp_path), {})
    defaults: dict[str, Any] = {p.name: p.default for p in SKYREELS_DESCRIPTOR.params}
    monkeypatch.setattr(video_params, "video_available", lambda: False)  # this install, minus av
    with pytest.raises(InvalidRequest) as refused:
        submit_check(family, {**defaults, "format": "mp4"})
    assert refused.value.status == 422 and "'format'" in refused.value.message
    assert "inline-core[video]" in refused.value.message
    assert "a lossless animated PNG" in refused.value.message
    submit_check(family, {**defaults, "format": "png"})
