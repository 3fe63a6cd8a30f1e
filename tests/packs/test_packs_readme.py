"""The README's "Write a node pack" section, followed as written: its manifest and its node are
taken from the README itself, installed, and rendered in a graph with a built-in node."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from PIL import Image

from tests.packs.pack_support import (
    install,
    pack_server,
    packs_listing,
    run_to_end,
    submit,
    take_image,
    upload_image,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks() -> dict[str, str]:
    text = README.read_text()
    section = text[text.index("### Write a node pack") : text.index("## API (`/v1`)")]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    return {language: textwrap.dedent(body) for language, body in blocks}


def test_the_readme_pack_installs_and_renders(tmp_path: Path) -> None:
    blocks = section_blocks()
    pack = tmp_path / "my-pack"
    (pack / "tint_pack").mkdir(parents=True)
    (pack / "pyproject.toml").write_text(blocks["toml"])
    (pack / "tint_pack" / "__init__.py").write_text(blocks["python"])
    packs_dir = tmp_path / "packs"
    assert "installed tint 0.1.0 with uv" in install(packs_dir, pack)
    source = Image.new("RGB", (320, 200), (40, 120, 200))
    with pack_server(tmp_path / "server", packs_dir) as live:
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
