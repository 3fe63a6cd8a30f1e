"""The README's demo, run as the README prints it, against a real server it starts itself.

The demo's block is read from README.md and run with bash in an empty folder laid out as a
fresh clone after `./webui.sh --install` (the README's one set-up line, which this test checks
and does not run: `./.venv` is this checkout's): `webui.sh`, `scripts/` and `.venv` linked in.
The only change is the port, set in the block's one `PORT=` line, so the test never meets another
server.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from PIL import Image
from server_support import free_port

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def demo_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Demo", 1)[1].split("\n## ", 1)[0]
    return FENCE.findall(section)


def test_the_readme_demo_runs_as_printed(tmp_path: Path) -> None:
    setup, demo = demo_blocks()
    assert setup.strip() == "./webui.sh --install"
    assert (ROOT / ".venv" / "bin" / "inline-core").exists()
    for name in ("webui.sh", "scripts", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    port = str(free_port())
    assert demo.count("8848") == 1 and demo.startswith("PORT=8848 ")  # its port, in one place
    script = demo.replace("PORT=8848 ", f"PORT={port} ", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INLINE_")}
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the server it starts is in its group: killed on any failure
    )
    try:
        out, _ = proc.communicate(timeout=280)  # a liveness bound, not a timing test
    except subprocess.TimeoutExpired as exc:
        out = str(exc.output or "") + "\n(timed out)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    log = (tmp_path / "server.log").read_text() if (tmp_path / "server.log").exists() else ""
    assert proc.returncode == 0, f"{out}\n--- server.log\n{log}"
    assert '"status":"done"' in out, out
    for name in ("take.png", "take2.png"):
        with Image.open(tmp_path / name) as png:
            assert png.format == "PNG" and png.size == (256, 256), name
    assert "Traceback" not in log, log
    assert f"serving at http://127.0.0.1:{port}/" in log, log  # where to point a browser
    assert (tmp_path / ".inline").is_dir()  # the server's data folder, in the clone
