"""The README's "Write a node pack" section, followed as written: its manifest and its node are
taken from the README itself, installed with `inline-core packs install ./my-pack` and served by a
server started in the same folder, both with the default (relative) data folder, and rendered in a
graph with a built-in node."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from PIL import Image

from inline_core.packs.scratch import scratch_root
from tests.packs.pack_support import (
    CLI_TIMEOUT_S,
    packs_listing,
    run_to_end,
    submit,
    take_image,
    upload_image,
)
from tests.server.server_support import LiveServer

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks() -> dict[str, str]:
    text = README.read_text()
    section = text[text.index("### Write a node pack") : text.index("## API (`/v1`)")]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    return {language: textwrap.dedent(body) for language, body in blocks}


# Unset: the data folder and the packs folder are the defaults, `.inline` and `.inline/packs`.
DEFAULT_FOLDERS = {"INLINE_DATA_DIR": "", "INLINE_PACKS_DIR": ""}


def inline_core_command() -> list[str]:
    """The `inline-core` console script of this environment, as the README runs it."""
    script = Path(sys.executable).parent / "inline-core"
    return [str(script)] if script.exists() else [sys.executable, "-m", "inline_core.cli"]


def test_the_readme_pack_installs_and_renders(tmp_path: Path) -> None:
    blocks = section_blocks()
    pack = tmp_path / "my-pack"
    (pack / "tint_pack").mkdir(parents=True)
    (pack / "pyproject.toml").write_text(blocks["toml"])
    (pack / "tint_pack" / "__init__.py").write_text(blocks["python"])
    installed = subprocess.run(
        [*inline_core_command(), "packs", "install", "./my-pack"],
        cwd=tmp_path,
        env={**os.environ, **DEFAULT_FOLDERS},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    assert "installed tint 0.1.0 with uv" in installed.stdout
    assert (tmp_path / ".inline" / "packs" / "index.json").is_file()
    # Its own scratch root (not the data folder), so no other server on this machine sweeps it.
    scratch = Path(tempfile.mkdtemp(prefix="inline-test-scratch-", dir=scratch_root()))
    live = LiveServer(
        data_dir=tmp_path / ".inline",
        models_dir=tmp_path / "models",
        env={**DEFAULT_FOLDERS, "INLINE_PACK_SCRATCH_DIR": str(scratch)},
        cwd=tmp_path,
    )
    live.start()
    try:
        follow_the_readme(live)
    finally:
        live.close()
        shutil.rmtree(scratch, ignore_errors=True)


def follow_the_readme(live: LiveServer) -> None:
    source = Image.new("RGB", (320, 200), (40, 120, 200))
    assert packs_listing(live)["tint"]["nodeTypes"] == ["tint/tint"]
    asset = upload_image(live, source)
    graph = {
        "schemaVersion": 1,
        "nodes": [
            {"id": "in", "type": "input/image",
             "params": {"asset": {"ref": "asset", "id": asset}}},
            {"id": "red", "type": "tint/tint", "params": {"colour": "red", "amount": 0.3},
             "inputs": {"image": {"from": "in", "output": "image"}}},
            {"id": "small", "type": "image/resize", "params": {"width": 256, "height": 256},
             "inputs": {"image": {"from": "red", "output": "image"}}},
        ],
    }
    state = run_to_end(live, graph, "small")
    assert state["status"] == "done", state
    takes = {t["nodeId"]: t for t in state["takes"]}
    tinted = Image.blend(source, Image.new("RGB", source.size, (255, 0, 0)), 0.3)
    assert take_image(live, takes["red"]).tobytes() == tinted.tobytes()
    assert take_image(live, takes["small"]).size == (256, 160)
    graph["nodes"][1]["params"]["amount"] = 2  # type: ignore[index]
    refused = submit(live, graph, "small")
    assert refused.status_code == 422
    assert "'amount' must be at most 1" in refused.json()["error"]["message"]
