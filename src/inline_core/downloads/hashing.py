"""The hash of a file as it arrives, computed on a thread of its own so that hashing overlaps the
transfer (hashlib releases the GIL on large buffers): what the hub publishes for the file, its
LFS sha256, or the git blob id of a file kept in git."""

from __future__ import annotations

import hashlib
import queue
import threading
from pathlib import Path
from typing import Any

from inline_core.downloads.remote import RemoteFile

READ_CHUNK = 4 * 1024 * 1024
QUEUE_CHUNKS = 64  # bounds what waits to be hashed (chunks of at most a few hundred KB)


def expected_digest(remote: RemoteFile) -> str | None:
    return remote.sha256 or remote.blob_id


class StreamHasher:
    """Feed the file's bytes in order (`feed`, `feed_file` for what is already on disk), then
    `hexdigest()`."""

    def __init__(self, remote: RemoteFile) -> None:
        self._remote = remote
        self._digest: str | None = None
        self._begin()

    def _begin(self) -> None:
        remote = self._remote
        if remote.sha256 is not None:
            self._hash: Any = hashlib.sha256()
        else:  # git's blob id: sha1 over a header naming the size, then the bytes
            self._hash = hashlib.sha1(f"blob {remote.size}\0".encode())
        self._chunks: queue.Queue[bytes | None] = queue.Queue(QUEUE_CHUNKS)
        self._thread = threading.Thread(
            target=self._run, args=(self._hash, self._chunks), name="download-hash", daemon=True
        )
        self._thread.start()

    @staticmethod
    def _run(hash_: Any, chunks: queue.Queue[bytes | None]) -> None:
        while True:
            chunk = chunks.get()
            if chunk is None:
                return
            hash_.update(chunk)

    def restart(self) -> None:
        """Hash from byte 0 again (the file is being received anew)."""
        self.close()
        self._begin()

    def feed(self, chunk: bytes) -> None:
        self._chunks.put(chunk)

    def feed_file(self, path: Path, length: int) -> None:
        """The first `length` bytes of a partial file kept from an earlier try."""
        with path.open("rb") as f:
            left = length
            while left > 0:
                chunk = f.read(min(READ_CHUNK, left))
                if not chunk:
                    raise OSError(f"{path} is shorter than {length} bytes")
                self.feed(chunk)
                left -= len(chunk)

    def hexdigest(self) -> str:
        if self._digest is None:
            self._chunks.put(None)
            self._thread.join()
            self._digest = str(self._hash.hexdigest())
        return self._digest

    def close(self) -> None:
        """Stop the thread (the digest is abandoned)."""
        if self._digest is None and self._thread.is_alive():
            self._chunks.put(None)
            self._thread.join()
