from __future__ import annotations

from pathlib import Path

import pytest
from graph_harness import Harness


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)
