"""File primitives shared by the sparkfleet modules: streaming sha256 and atomic writes.

Large files (model shards of several GB) are hashed in 1 MiB chunks so memory stays flat; hashlib releases
the GIL on chunks this size, so callers may hash several files from threads at once.
"""
from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
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


def atomic_write_text(path: str, text: str, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
    """Write via a temporary file in the same directory, fsync, rename: readers see old or new, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if owner is not None:
            os.chown(tmp, *owner)
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


# A set of files and directories applied in one module call: a no-change run then costs one round trip per
# role instead of two per file (copy and template each stat the target, then run the file module).

@dataclass(frozen=True)
class Wanted:
    """One managed path: a directory (content None) or a file with its whole text."""

    path: str
    mode: int
    uid: int | None
    gid: int | None
    content: str | None = None


@dataclass(frozen=True)
class Observed:
    """What is at a path now; `text` is None for a directory, a symlink or bytes that are not UTF-8."""

    is_dir: bool
    is_file: bool
    mode: int
    uid: int
    gid: int
    text: str | None


def parse_mode(value: str | int, path: str) -> int:
    """An octal mode string ("0644") or int; refuses symbolic modes so the file's mode is never a guess."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if not text or any(ch not in "01234567" for ch in text) or len(text) > 4:
        raise ValueError(f"{path}: mode must be octal like '0644', got {value!r}")
    return int(text, 8)


def differences(wanted: Wanted, observed: Observed | None) -> list[str]:
    """What must change at a path, in the order it is applied; empty when it already matches."""
    if observed is None:
        return ["create"]
    want_dir = wanted.content is None
    if want_dir and not observed.is_dir:
        raise ValueError(f"{wanted.path}: a directory is wanted but something else is there")
    if not want_dir and not observed.is_file:
        return ["replace"]
    found: list[str] = []
    if not want_dir and observed.text != wanted.content:
        found.append("content")
    if observed.mode != wanted.mode:
        found.append("mode")
    if wanted.uid not in (None, observed.uid) or wanted.gid not in (None, observed.gid):
        found.append("owner")
    return found


def file_diff(wanted: Wanted, observed: Observed | None, changes: list[str]) -> dict[str, str]:
    """The --diff entry of one path: content as text, attributes as one line each."""
    def attrs(mode: int, uid: int | None, gid: int | None) -> str:
        return f"mode {mode:04o}, owner {'-' if uid is None else uid}:{'-' if gid is None else gid}\n"

    before = "" if observed is None or observed.text is None else observed.text
    after = "" if wanted.content is None else wanted.content
    if observed is not None and ("mode" in changes or "owner" in changes):
        before += attrs(observed.mode, observed.uid, observed.gid)
        after += attrs(wanted.mode, wanted.uid, wanted.gid)
    return {"before_header": wanted.path, "after_header": wanted.path, "before": before, "after": after}


def observe(path: str) -> Observed | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    is_file = stat.S_ISREG(info.st_mode)
    text = None
    if is_file:
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    return Observed(stat.S_ISDIR(info.st_mode), is_file, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, text)


# Changes that need the file written; the others (mode, owner) only set attributes in place.
REWRITES = frozenset({"create", "replace", "content"})


def apply(wanted: Wanted, changes: list[str]) -> None:
    """Make one path match; files are replaced atomically with mode and owner set before the rename."""
    if wanted.content is None:
        if "create" in changes:
            os.makedirs(wanted.path, mode=0o755, exist_ok=True)
        set_attributes(wanted)
        return
    if not REWRITES.intersection(changes):
        set_attributes(wanted)
        return
    atomic_write_text(wanted.path, wanted.content, wanted.mode, owner=owner_of(wanted))


def owner_of(wanted: Wanted) -> tuple[int, int] | None:
    """(uid, gid) to set, -1 leaving one unchanged; None when neither is managed."""
    if wanted.uid is None and wanted.gid is None:
        return None
    return (-1 if wanted.uid is None else wanted.uid, -1 if wanted.gid is None else wanted.gid)


def set_attributes(wanted: Wanted) -> None:
    os.chmod(wanted.path, wanted.mode)
    owner = owner_of(wanted)
    if owner is not None:
        os.chown(wanted.path, *owner)
