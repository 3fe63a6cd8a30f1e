"""Without PyAV (the `video` extra) the server says so at start, naming the extra, and a Wan
render asking for MP4 is refused at submit (422 naming `format`), never failing at its end; APNG
takes need only Pillow."""

from __future__ import annotations

from pathlib import Path

import pytest
from wan_harness import submit_check

from inline_core.errors import InvalidRequest
from inline_core.families.nodes import video_params
from inline_core.families.wan.descriptor import WAN_DESCRIPTOR
from inline_core.families.wan.family import WanFamily
from inline_core.models.catalog import Catalog
from inline_core.server.startup_checks import video_warning


def defaults() -> dict[str, object]:
    return {p.name: p.default for p in WAN_DESCRIPTOR.params}


def test_the_start_names_the_missing_video_extra() -> None:
    said = video_warning(lambda: False)
    assert said is not None and "inline-core[video]" in said and "av" in said
    assert video_warning(lambda: True) is None


def test_mp4_without_pyav_is_refused_at_submit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    family = WanFamily(Catalog(tmp_path), {})
    monkeypatch.setattr(video_params, "video_available", lambda: False)  # this install, minus av
    with pytest.raises(InvalidRequest) as refused:
        submit_check(family, defaults(), {"prompt"})
    assert refused.value.status == 422 and "'format'" in refused.value.message
    assert "inline-core[video]" in refused.value.message
    submit_check(family, {**defaults(), "format": "png"}, {"prompt"})
