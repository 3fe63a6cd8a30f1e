"""The SDK a pack environment gets: a wheel of the very `inline_core_sdk` this server runs.

It is built from the installed package's own files (pure Python), so the pack's side of the
protocol is always the server's, whether the SDK came from a registry or from this repository's
`sdk/` folder, and no registry needs to carry it. Wheels are cached by content.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import inline_core_sdk
from inline_core_sdk.version import sdk_version

PACKAGE = "inline_core_sdk"
_SUFFIXES = (".py", ".typed")


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _package_files() -> list[tuple[str, bytes]]:
    root = Path(inline_core_sdk.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
    return [(f"{PACKAGE}/{p.relative_to(root).as_posix()}", p.read_bytes()) for p in files]


def _metadata(version: str) -> list[tuple[str, bytes]]:
    info = f"{PACKAGE}-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\nName: inline-core-sdk\n"
        f"Version: {version}\nRequires-Python: >=3.11\n"
    )
    wheel = "Wheel-Version: 1.0\nGenerator: inline-core\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return [(f"{info}/METADATA", metadata.encode()), (f"{info}/WHEEL", wheel.encode())]


def sdk_wheel(cache_dir: Path) -> Path:
    """The path of the SDK wheel (built on first use of this SDK content)."""
    version = sdk_version()
    entries = _package_files() + _metadata(version)
    content = hashlib.sha256()
    for name, data in entries:
        content.update(name.encode() + b"\0" + data)
    folder = cache_dir / f"{version}-{content.hexdigest()[:12]}"
    wheel = folder / f"{PACKAGE}-{version}-py3-none-any.whl"
    if wheel.is_file():
        return wheel
    folder.mkdir(parents=True, exist_ok=True)
    record_name = f"{PACKAGE}-{version}.dist-info/RECORD"
    record = "".join(f"{n},sha256={_digest(d)},{len(d)}\n" for n, d in entries)
    record += f"{record_name},,\n"
    partial = folder / (wheel.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
        archive.writestr(record_name, record)
    partial.replace(wheel)  # a reader never sees half a wheel
    return wheel
