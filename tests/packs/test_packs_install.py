"""`inline-core packs install|list|remove` as a user runs them: each way in (a folder, a source
archive, a name on the registry), uv and pip, and every refusal leaving the packs folder as it
was."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from inline_core_sdk.version import sdk_version
from tests.packs.pack_support import FIXTURES, install, packs_cli


def folders(packs_dir: Path) -> list[str]:
    """Every pack version folder (and staging leftover) in the packs folder."""
    if not packs_dir.is_dir():
        return []
    return sorted(
        f"{p.name}/{v.name}"
        for p in packs_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".")
        for v in p.iterdir()
    )


def sdist(pack: str, into: Path) -> Path:
    """A source archive of a fixture pack, laid out as `python -m build --sdist` lays one out."""
    manifest = (FIXTURES / pack / "pyproject.toml").read_text()
    name = next(line.split('"')[1] for line in manifest.splitlines() if line.startswith("name"))
    archive = into / f"{name.replace('-', '_')}-1.0.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIXTURES / pack, arcname=f"{name.replace('-', '_')}-1.0.0")
    return archive


def test_a_pack_for_another_sdk_major_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    packs_dir = tmp_path / "packs"
    done = packs_cli(packs_dir, "install", str(FIXTURES / "future"))
    assert done.returncode == 2
    assert "pack 'future' 1.0.0 was built for inline-core-sdk<3,>=2.0" in done.stderr
    assert f"this server provides {sdk_version()}" in done.stderr
    assert not (packs_dir / "index.json").exists() and folders(packs_dir) == []


def write_pack(root: Path, manifest_extra: str, module: str, nodes: str) -> Path:
    root.mkdir()
    (root / "bad_pack").mkdir()
    (root / "bad_pack" / "__init__.py").write_text(module)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "inline-test-bad"\nversion = "1.0.0"\n'
        'dependencies = ["inline-core-sdk>=1.0,<2"]\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["bad_pack"]\n'
        f'[tool.inline-core.pack]\nname = "bad"\nnodes = {{ {nodes} }}\n{manifest_extra}'
    )
    return root


GOOD_NODE = """
from inline_core_sdk import Call, Node, Outputs, Port, Param

class Good(Node):
    outputs = (Port("text", "text"),)
    def run(self, call: Call) -> Outputs:
        return {"text": "ok"}
"""
UNKNOWN_KIND = GOOD_NODE.replace('Port("text", "text")', 'Port("x", "latent")')
BAD_DEFAULT = GOOD_NODE.replace(
    "outputs =", 'params = (Param.number("n", 5, minimum=0, maximum=1),)\n    outputs ='
)


@pytest.mark.parametrize(
    ("extra", "module", "nodes", "says"),
    [
        ("timeout-s = -1", GOOD_NODE, 'good = "bad_pack:Good"', "timeout-s must be a positive"),
        ("", GOOD_NODE, 'Good = "bad_pack:Good"', "node name 'Good' must match"),
        ("", GOOD_NODE, 'good = "bad_pack:Missing"', "bad_pack:Missing is not a subclass"),
        ("", UNKNOWN_KIND, 'good = "bad_pack:Good"', "has kind 'latent'; a pack uses"),
        ("", BAD_DEFAULT, 'good = "bad_pack:Good"', "'n' must be at most 1, got 5"),
    ],
)
def test_a_malformed_pack_is_refused_saying_what_is_wrong(
    tmp_path: Path, extra: str, module: str, nodes: str, says: str
) -> None:
    packs_dir = tmp_path / "packs"
    pack = write_pack(tmp_path / "bad", extra, module, nodes)
    done = packs_cli(packs_dir, "install", str(pack))
    assert done.returncode == 2, done.stdout
    assert says in done.stderr
    assert not (packs_dir / "index.json").exists() and folders(packs_dir) == []


def test_install_list_upgrade_in_place_and_remove(tmp_path: Path) -> None:
    packs_dir = tmp_path / "packs"
    out = install(packs_dir, "hang")
    assert "installed hang 1.0.0 with uv" in out and "hang/forever" in out
    [first] = folders(packs_dir)
    again = install(packs_dir, "hang")  # the same version again: a new folder, the old one gone
    assert "replacing 1.0.0" in again
    [second] = folders(packs_dir)
    assert second != first
    listing = json.loads(packs_cli(packs_dir, "list", "--json").stdout)
    assert listing == {
        "packs": [
            {"name": "hang", "version": "1.0.0", "status": "ok", "nodeTypes": ["hang/forever"]}
        ]
    }
    removed = packs_cli(packs_dir, "remove", "hang")
    assert removed.returncode == 0 and "removed hang 1.0.0" in removed.stdout
    assert folders(packs_dir) == []
    assert "no packs installed" in packs_cli(packs_dir, "list").stdout
    missing = packs_cli(packs_dir, "remove", "hang")
    assert missing.returncode == 1 and "no pack 'hang' is installed" in missing.stderr


def test_pip_builds_the_environment_where_uv_is_not_used(tmp_path: Path) -> None:
    packs_dir = tmp_path / "packs"
    out = install(packs_dir, "segv", env={"INLINE_PACKS_INSTALLER": "pip"})
    assert "installed segv 1.0.0 with pip" in out
    [folder] = folders(packs_dir)
    env = packs_dir / folder / "env"
    assert (env / "bin" / "pip").exists()  # a venv of the standard library, with its pip
    check = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import inline_core_sdk, segv_pack"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert check.returncode == 0, check.stderr
    # Never the server's environment: the pack's module is not importable here.
    server = subprocess.run(
        [sys.executable, "-c", "import segv_pack"], capture_output=True, timeout=60, check=False
    )
    assert server.returncode != 0


def test_a_source_archive_installs(tmp_path: Path) -> None:
    packs_dir = tmp_path / "packs"
    archive = sdist("hang", tmp_path)
    assert "installed hang 1.0.0" in install(packs_dir, archive)


def test_a_name_installs_from_the_configured_index(tmp_path: Path) -> None:
    """The index here is a folder (find-links, no index): the pack's source archive, and the
    build backend its sdist needs, fetched first from the registry."""
    links = tmp_path / "links"
    links.mkdir()
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(links), "hatchling"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert fetched.returncode == 0, fetched.stderr
    sdist("hang", links)
    packs_dir = tmp_path / "packs"
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    by_name = packs_cli(packs_dir, "install", "inline-test-hang", env=env)
    assert by_name.returncode == 0, by_name.stderr
    assert "installed hang 1.0.0" in by_name.stdout
    unknown = packs_cli(packs_dir, "install", "inline-test-nothing-here", env=env)
    assert unknown.returncode == 2
    assert "fetching 'inline-test-nothing-here' failed" in unknown.stderr


def test_uv_resolves_from_the_index_pip_is_configured_with(tmp_path: Path) -> None:
    """With pip told to use only a folder, a uv-built environment finds nothing elsewhere."""
    empty = tmp_path / "empty"
    empty.mkdir()
    packs_dir = tmp_path / "packs"
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty), "UV_NO_CACHE": "1"}
    done = packs_cli(packs_dir, "install", str(FIXTURES / "hang"), env=env)
    assert done.returncode == 2
    assert "installing the pack's dependencies with uv failed" in done.stderr
    assert "hatchling" in done.stderr  # the build backend is not in that folder
    assert folders(packs_dir) == []
