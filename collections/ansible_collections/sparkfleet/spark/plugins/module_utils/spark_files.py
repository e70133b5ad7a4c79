"""File primitives shared by the sparkfleet modules: streaming sha256 and atomic writes.

Large files (model shards of several GB) are hashed in 1 MiB chunks so memory stays flat; hashlib releases
the GIL on chunks this size, so callers may hash several files from threads at once.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

CHUNK = 1024 * 1024


def feed_file(digest: Any, path: str) -> int:
    """Update `digest` with the bytes of `path`, streaming; return the number of bytes read."""
    total = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
            total += len(chunk)
    return total


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    feed_file(digest, path)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def atomic_write_text(path: str, text: str, mode: int = 0o644) -> None:
    """Write via a temporary file in the same directory, fsync, rename: readers see old or new, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_text_if_exists(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
