"""Fixtures of the download tests: a local hub (tests/downloads/fake_hub.py) and a server's
configuration pointed at it, with no Hugging Face token to be found (none in the environment, the
token file somewhere empty), so nothing here ever reaches a network or a real account."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from download_support import hub_config, without_hub_token  # noqa: E402
from fake_hub import FakeHub  # noqa: E402

from inline_core.config import Config  # noqa: E402


@pytest.fixture(autouse=True)
def no_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_hub_token(monkeypatch, tmp_path / "hf-home")


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    started = FakeHub(token="hub-secret-token").start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def config(tmp_path: Path, hub: FakeHub) -> Config:
    return hub_config(tmp_path, hub.url)
