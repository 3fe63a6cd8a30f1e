"""A local model hub on 127.0.0.1 for the download tests and bench: the parts of the Hugging Face
file API that huggingface_hub uses, over real files, with faults on demand.

- `GET /api/models/{repo}[/revision/{rev}]?blobs=true`: the model info, with siblings' sizes, git
  blob ids and LFS sha256 (unknown repo or revision: 404 with the hub's `X-Error-Code`);
- `HEAD|GET /{repo}/resolve/{rev}/{path}`: a file kept in git is answered directly; an LFS file
  redirects (302) to `/cdn/{sha256}` on a second port (another origin, as the hub's CDN is: the
  token is not sent there) with `X-Linked-Etag`, `X-Linked-Size` and `X-Repo-Commit`; a gated
  repo answers 401 without the hub's token; an unknown file 404;
- `/cdn/{sha256}`: the bytes, with `ETag`, `Accept-Ranges`, `Range` (206) and `If-Range`.

Faults (`Fault`, per file): the connection cut after a byte offset, wrong bytes (one flipped), a
slow link, a hold at an offset until released, the range ignored. Every request is logged
(method, path, Range; whether it carried a token, never the token).

Also runs as a process (`python tests/downloads/fake_hub.py --repo R --file NAME=PATH`) for the
bench, printing its URL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote, unquote, urlsplit

GIT_SUFFIXES = (".json", ".txt", ".md", ".jinja", ".model")
CHUNK = 256 * 1024


@dataclass
class Fault:
    cut_at: int | None = None  # close the connection once the bytes before this offset are sent
    cuts: int = 1  # how many responses are cut so
    corrupt: bool = False  # one byte flipped (the size stays right)
    slow_chunk: int = 0  # a slow link: this many bytes, then `slow_delay_s`, and again
    slow_delay_s: float = 0.0
    hold_at: int | None = None  # send up to here, then wait until `release` is set
    release: threading.Event = field(default_factory=threading.Event)
    ignore_range: bool = False
    reached: threading.Event = field(default_factory=threading.Event)  # set when hold_at is hit


@dataclass(frozen=True)
class HubFile:
    path: str
    source: Path
    size: int
    sha256: str
    blob_id: str
    lfs: bool


@dataclass
class Repo:
    files: dict[str, HubFile]
    gated: bool
    commit: str


@dataclass(frozen=True)
class Logged:
    method: str
    path: str
    range: str | None
    if_range: str | None
    with_token: bool


def describe(path: str, source: Path) -> HubFile:
    sha256, size = hashlib.sha256(), source.stat().st_size
    blob = hashlib.sha1(f"blob {size}\0".encode())
    with source.open("rb") as f:
        while chunk := f.read(4 * 1024 * 1024):
            sha256.update(chunk)
            blob.update(chunk)
    lfs = not path.endswith(GIT_SUFFIXES)
    return HubFile(path, source, size, sha256.hexdigest(), blob.hexdigest(), lfs)


class FakeHub:
    def __init__(self, token: str | None = None) -> None:
        self.token = token  # what a gated repo accepts
        self.repos: dict[str, Repo] = {}
        self.faults: dict[str, Fault] = {}  # by repo path ("split_files/vae/ae.safetensors")
        self.listed_sizes: dict[str, int] = {}  # a size the model info claims instead (by path)
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._cdn: ThreadingHTTPServer | None = None  # another origin, as the hub's CDN is

    # -- content ---------------------------------------------------------------------------------

    def add_repo(self, repo: str, files: Mapping[str, Path], *, gated: bool = False) -> Repo:
        described = {p: describe(p, src) for p, src in files.items()}
        listing = "".join(f"{p}:{f.sha256}\n" for p, f in sorted(described.items()))
        commit = hashlib.sha1(f"{repo}\n{listing}".encode()).hexdigest()
        self.repos[repo] = Repo(described, gated, commit)
        return self.repos[repo]

    def add_folder(self, repo: str, folder: Path, *, gated: bool = False) -> Repo:
        files = {
            p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()
        }
        return self.add_repo(repo, files, gated=gated)

    def requests(self, path_part: str) -> list[Logged]:
        with self._lock:
            return [r for r in self.log if path_part in r.path]

    # -- serving ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        assert self._cdn is not None
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(HubHandler):
            owner = hub

        self._server = QuietServer(("127.0.0.1", 0), Handler)
        self._cdn = QuietServer(("127.0.0.1", 0), Handler)
        for server in (self._server, self._cdn):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for fault in self.faults.values():
            fault.release.set()
        for server in (self._server, self._cdn):
            if server is not None:
                server.shutdown()
                server.server_close()

    def by_oid(self, oid: str) -> HubFile | None:
        for repo in self.repos.values():
            for f in repo.files.values():
                if f.sha256 == oid:
                    return f
        return None


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # a client that hung up (a cancel, a killed server) is part of the tests


class HubHandler(BaseHTTPRequestHandler):
    owner: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the tests read `FakeHub.log`

    def do_HEAD(self) -> None:
        self._route(body=False)

    def do_GET(self) -> None:
        self._route(body=True)

    # -- routing ---------------------------------------------------------------------------------

    def _route(self, body: bool) -> None:
        hub = self.owner
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        auth = self.headers.get("Authorization")
        with hub._lock:  # pyright: ignore[reportPrivateUsage]
            hub.log.append(
                Logged(
                    self.command,
                    path,
                    self.headers.get("Range"),
                    self.headers.get("If-Range"),
                    auth is not None,
                )
            )
        segments = path.strip("/").split("/")
        if segments[:2] == ["api", "models"] and len(segments) >= 4:
            self._model_info(segments[2:], "blobs=true" in parts.query)
        elif len(segments) >= 5 and segments[2] == "resolve":
            repo = f"{segments[0]}/{segments[1]}"
            self._resolve(repo, segments[3], "/".join(segments[4:]), auth, body)
        elif len(segments) == 2 and segments[0] == "cdn":
            found = hub.by_oid(segments[1])
            if found is None:
                self._error(404, "EntryNotFound", "no such object")
            else:
                self._content(found, f'"{found.sha256}"', body, {})
        else:
            self._error(404, "RepoNotFound", "no such route")

    def _model_info(self, rest: list[str], blobs: bool) -> None:
        hub = self.owner
        repo_id = "/".join(rest[:2])
        repo = hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
        if len(rest) >= 4 and rest[2] == "revision" and rest[3] not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rest[3]}")
        siblings: list[dict[str, object]] = []
        for f in repo.files.values():
            sibling: dict[str, object] = {"rfilename": f.path}
            if blobs:
                size = hub.listed_sizes.get(f.path, f.size)
                sibling.update(size=size, blobId=f.blob_id)
                if f.lfs:
                    sibling["lfs"] = {"sha256": f.sha256, "size": size, "pointerSize": 134}
            siblings.append(sibling)
        info = {
            "id": repo_id,
            "modelId": repo_id,
            "sha": repo.commit,
            "private": False,
            "gated": "auto" if repo.gated else False,
            "siblings": siblings,
        }
        self._json(200, info)

    def _resolve(self, repo_id: str, rev: str, path: str, auth: str | None, body: bool) -> None:
        hub = self.owner
        repo = hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
        if rev not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        found = repo.files.get(path)
        if found is None:
            return self._error(404, "EntryNotFound", f"{path} does not exist on {rev}")
        if repo.gated and (hub.token is None or auth != f"Bearer {hub.token}"):
            return self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted")
        linked = {"X-Repo-Commit": repo.commit}
        if found.lfs:
            headers = {
                **linked,
                "Location": f"{hub.cdn_url}/cdn/{found.sha256}?name={quote(path)}",
                "X-Linked-Etag": f'"{found.sha256}"',
                "X-Linked-Size": str(found.size),
                "ETag": f'"{found.sha256}"',
                "Content-Length": "0",
            }
            self.send_response(302)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            return
        self._content(found, f'"{found.blob_id}"', body, linked)

    # -- answers ---------------------------------------------------------------------------------

    def _content(self, f: HubFile, etag: str, body: bool, extra: dict[str, str]) -> None:
        fault = self.owner.faults.get(f.path)
        start, end = 0, f.size - 1
        requested = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        ranged = (
            requested is not None
            and requested.startswith("bytes=")
            and (if_range is None or if_range == etag)
            and not (fault is not None and fault.ignore_range)
        )
        if ranged:
            assert requested is not None
            first, _, last = requested[len("bytes=") :].partition("-")
            start = int(first)
            end = int(last) if last else f.size - 1
            if start >= f.size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{f.size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(206 if ranged else 200)
        headers = {
            **extra,
            "ETag": etag,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Length": str(end - start + 1),
        }
        if ranged:
            headers["Content-Range"] = f"bytes {start}-{end}/{f.size}"
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            with f.source.open("rb") as source:
                self._send(source, start, end + 1, f.size, fault)

    def _send(
        self, source: BinaryIO, start: int, stop: int, size: int, fault: Fault | None
    ) -> None:
        if fault is None:  # the fast path: the kernel copies the file to the socket
            self.connection.sendfile(source, start, stop - start)
            return
        cut = fault.cut_at if fault.cut_at is not None and fault.cuts > 0 else None
        flip = size // 2 if fault.corrupt else None
        at = start
        source.seek(start)
        while at < stop:
            step = min(CHUNK, stop - at)
            if fault.slow_chunk:
                step = min(step, fault.slow_chunk)
            for edge in (cut, fault.hold_at):
                if edge is not None and at < edge:
                    step = min(step, edge - at)
            if fault.hold_at is not None and at == fault.hold_at:
                fault.reached.set()
                fault.release.wait(120)
            if cut is not None and at >= cut:
                fault.cuts -= 1
                self._cut()
                return
            chunk = bytearray(source.read(step))
            if flip is not None and at <= flip < at + len(chunk):
                chunk[flip - at] ^= 0xFF
            try:
                self.wfile.write(chunk)
            except OSError:
                return
            at += len(chunk)
            if fault.slow_delay_s:
                time.sleep(fault.slow_delay_s)

    def _cut(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, code: str, message: str) -> None:
        data = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a local model hub serving files (bench)")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--file", action="append", default=[], help="REPO_PATH=LOCAL_PATH")
    args = parser.parse_args(argv)
    files = {k: Path(v) for k, _, v in (str(item).partition("=") for item in args.file)}
    hub = FakeHub().start()
    hub.add_repo(str(args.repo), files)
    print(hub.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
