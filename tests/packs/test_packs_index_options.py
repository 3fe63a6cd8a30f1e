"""uv is handed the index settings pip is configured with (uv reads no pip config of its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inline_core.packs.index_options import pip_index_options


def test_pip_config_files_and_variables_become_uv_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\n"
        "index-url = https://index.example/simple\n"
        "extra-index-url = file:///srv/a/simple file:///srv/b/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    options = pip_index_options()  # asks the real pip, as the installer does
    assert options.index_url == "https://index.example/simple"
    assert options.extra_index_urls == ("file:///srv/a/simple", "file:///srv/b/simple")
    assert options.find_links == (str(tmp_path / "wheels"),)  # the variable wins over files
    flags = options.uv_flags()
    assert flags[:2] == ["--index-strategy", "unsafe-best-match"]  # pip's best match, not first
    pairs = list(zip(flags[2::2], flags[3::2], strict=True))
    assert ("--index-url", "https://index.example/simple") in pairs
    assert ("--extra-index-url", "file:///srv/b/simple") in pairs
    assert ("--find-links", str(tmp_path / "wheels")) in pairs


def test_no_index_reaches_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert "--no-index" in pip_index_options().uv_flags()
