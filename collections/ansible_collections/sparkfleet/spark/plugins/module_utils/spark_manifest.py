"""Model directory manifests: relative path, size and sha256 per file, a revision stamp, verification.

The manifest is what every rank is checked against after the fan-out; the stamp lets a later `create` reuse
stored hashes when no file changed in size or modification time, so a 510 GB model is hashed once, not on
every run. Symlinks are refused: a Hugging Face snapshot is a farm of links into a blob store, and copying
it ships dangling links while reporting success (the zero-weights copy failure) — the role materialises real
files first. Formats are documented in docs/image-and-model.md.

`scan` and `hash_files` read the disk; everything else is pure.
"""
from __future__ import annotations

import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_files import (
    atomic_write_text, read_text_if_exists, sha256_file, sha256_text)

MANIFEST_KIND = "sparkfleet-model-manifest"
STAMP_KIND = "sparkfleet-model-stamp"
FORMAT = 1
DEFAULT_MANIFEST = "sparkfleet-manifest.json"
DEFAULT_STAMP = "sparkfleet-stamp.json"


class ManifestError(Exception):
    """Invalid input or a directory that cannot be described; the message names the file."""


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative, '/'-separated
    size: int
    mtime_ns: int


@dataclass
class Problem:
    path: str
    problem: str
    expected_size: Optional[int] = None
    actual_size: Optional[int] = None

    def as_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "problem": self.problem, "expected_size": self.expected_size,
                "actual_size": self.actual_size}

    def text(self) -> str:
        return f"{self.path}: {self.problem}"


# --- I/O: walking and hashing ------------------------------------------------------------------

def scan(root: str, exclude: Iterable[str]) -> Tuple[List[FileInfo], List[Problem]]:
    """Regular files under root (sorted, relative paths), and every entry that is not a regular file or dir.

    Symlinks are never followed: a link is reported with its target whether it resolves or not.
    """
    if not os.path.isdir(root):
        raise ManifestError(f"model directory {root} does not exist or is not a directory")
    skip = {os.path.abspath(p) for p in exclude}
    files: List[FileInfo] = []
    odd: List[Problem] = []
    _walk(root, "", skip, files, odd)
    files.sort(key=lambda f: f.path)
    odd.sort(key=lambda p: p.path)
    return files, odd


def _walk(root: str, rel: str, skip: Set[str], files: List[FileInfo], odd: List[Problem]) -> None:
    with os.scandir(os.path.join(root, rel) if rel else root) as entries:
        for entry in entries:
            relpath = f"{rel}/{entry.name}" if rel else entry.name
            if os.path.abspath(entry.path) in skip:
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                odd.append(Problem(relpath, f"is a symlink to {os.readlink(entry.path)}"))
            elif stat.S_ISDIR(info.st_mode):
                _walk(root, relpath, skip, files, odd)
            elif stat.S_ISREG(info.st_mode):
                files.append(FileInfo(relpath, info.st_size, info.st_mtime_ns))
            else:
                odd.append(Problem(relpath, "is not a regular file"))


def hash_files(root: str, paths: Sequence[str], jobs: int) -> Dict[str, str]:
    """sha256 of each relative path, `jobs` files at a time (streaming, 1 MiB chunks)."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        digests = pool.map(lambda rel: sha256_file(os.path.join(root, rel)), paths)
        return dict(zip(paths, digests))


# --- Pure: manifest and stamp ------------------------------------------------------------------

def symlink_refusal(root: str, odd: Sequence[Problem]) -> Optional[str]:
    if not odd:
        return None
    listed = "; ".join(p.text() for p in odd)
    return (f"model directory {root} holds {len(odd)} entr{'y' if len(odd) == 1 else 'ies'} that are not regular "
            f"files: {listed}. Materialise real files first (cache symlinks copy as dangling links)")


def build_manifest(revision: str, files: Sequence[FileInfo], hashes: Mapping[str, str]) -> Dict[str, Any]:
    return {
        "kind": MANIFEST_KIND, "format": FORMAT, "revision": revision,
        "file_count": len(files), "total_size": sum(f.size for f in files),
        "files": [{"path": f.path, "size": f.size, "sha256": hashes[f.path]} for f in files],
    }


def build_stamp(manifest_text: str, revision: str, files: Sequence[FileInfo]) -> Dict[str, Any]:
    """The manifest's own hash plus size and mtime per file: enough to tell an untouched directory cheaply."""
    return {
        "kind": STAMP_KIND, "format": FORMAT, "revision": revision, "manifest_sha256": sha256_text(manifest_text),
        "files": {f.path: [f.size, f.mtime_ns] for f in files},
    }


def render(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def reusable_hashes(manifest_text: Optional[str], stamp_text: Optional[str], revision: str,
                    files: Sequence[FileInfo]) -> Optional[Dict[str, str]]:
    """Stored hashes when manifest and stamp agree and every file has the size and mtime the stamp recorded."""
    if manifest_text is None or stamp_text is None:
        return None
    try:
        manifest = parse_manifest(manifest_text, "existing manifest")
        stamp = json.loads(stamp_text)
    except (ManifestError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("manifest_sha256") != sha256_text(manifest_text):
        return None
    if manifest["revision"] != revision or stamp.get("revision") != revision:
        return None
    recorded = stamp.get("files") or {}
    current = {f.path: [f.size, f.mtime_ns] for f in files}
    if recorded != current or set(current) != {e["path"] for e in manifest["files"]}:
        return None
    return {e["path"]: e["sha256"] for e in manifest["files"]}


def parse_manifest(text: str, source: str) -> Dict[str, Any]:
    """Validate a manifest; errors name the source and the field or entry."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"{source}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND or data.get("format") != FORMAT:
        raise ManifestError(f"{source}: not a {MANIFEST_KIND} of format {FORMAT}")
    if not isinstance(data.get("revision"), str) or not isinstance(data.get("files"), list):
        raise ManifestError(f"{source}: fields 'revision' (string) and 'files' (list) are required")
    for index, entry in enumerate(data["files"]):
        _check_entry(entry, f"{source}: files[{index}]")
    return data


def _check_entry(entry: Any, where: str) -> None:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: expected an object")
    path, size, digest = entry.get("path"), entry.get("size"), entry.get("sha256")
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        raise ManifestError(f"{where}: 'path' must be a relative path inside the model directory, got {path!r}")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ManifestError(f"{where} ({path}): 'size' must be a non-negative integer, got {size!r}")
    if not isinstance(digest, str) or len(digest) != 64:
        raise ManifestError(f"{where} ({path}): 'sha256' must be 64 hex digits")


def zero_length_warnings(files: Sequence[FileInfo]) -> List[str]:
    return [f"{f.path} is zero-length; recorded as such (is the source complete?)" for f in files if f.size == 0]


# --- Pure: verification ------------------------------------------------------------------------

def size_problems(manifest: Mapping[str, Any], files: Sequence[FileInfo], odd: Sequence[Problem]) -> List[Problem]:
    """Missing, zero-length, short, long and non-regular entries, in manifest order."""
    actual = {f.path: f.size for f in files}
    strange = {p.path: p for p in odd}
    problems: List[Problem] = []
    for entry in manifest["files"]:
        path, want = entry["path"], entry["size"]
        if path in strange:
            problems.append(Problem(path, strange[path].problem, want))
        elif path not in actual:
            problems.append(Problem(path, "missing", want))
        else:
            problems.extend(_size_problem(path, want, actual[path]))
    return problems


def _size_problem(path: str, want: int, got: int) -> List[Problem]:
    if got == want:
        return []
    if got == 0:
        return [Problem(path, f"zero-length (expected {want} bytes)", want, got)]
    if got < want:
        return [Problem(path, f"short ({got} of {want} bytes)", want, got)]
    return [Problem(path, f"too long ({got} bytes, expected {want})", want, got)]


def hash_problems(manifest: Mapping[str, Any], hashes: Mapping[str, str]) -> List[Problem]:
    problems = []
    for entry in manifest["files"]:
        got = hashes.get(entry["path"])
        if got is not None and got != entry["sha256"]:
            problems.append(Problem(entry["path"], f"sha256 {got} differs from the manifest's {entry['sha256']}",
                                    entry["size"], entry["size"]))
    return problems


def extra_files(manifest: Mapping[str, Any], files: Sequence[FileInfo], odd: Sequence[Problem]) -> List[str]:
    listed = {e["path"] for e in manifest["files"]}
    return sorted(({f.path for f in files} - listed) | ({p.path for p in odd} - listed))


def transfer_bytes(manifest: Mapping[str, Any], problems: Sequence[Problem]) -> int:
    """Bytes a sync must write to repair these files: the full size of each (rsync writes a new copy, then renames)."""
    sizes = {e["path"]: e["size"] for e in manifest["files"]}
    return sum(sizes[path] for path in {p.path for p in problems})


def verification_message(node: str, root: str, problems: Sequence[Problem]) -> str:
    listed = "; ".join(p.text() for p in problems)
    return f"{node}: model verification failed in {root} for {len(problems)} file(s): {listed}"


# --- The two operations ------------------------------------------------------------------------

def create(root: str, manifest_path: str, stamp_path: str, revision: str, jobs: int, rehash: bool,
           check_mode: bool) -> Dict[str, Any]:
    """Describe root; write manifest and stamp when they differ. Returns the module result."""
    if not revision.strip():
        raise ManifestError("field 'revision' is empty: the stamp must name the model revision")
    files, odd = scan(root, (manifest_path, stamp_path))
    refusal = symlink_refusal(root, odd)
    if refusal:
        raise ManifestError(refusal)
    old_manifest, old_stamp = read_text_if_exists(manifest_path), read_text_if_exists(stamp_path)
    reused = None if rehash else reusable_hashes(old_manifest, old_stamp, revision, files)
    hashes = reused if reused is not None else hash_files(root, [f.path for f in files], jobs)
    manifest_text = render(build_manifest(revision, files, hashes))
    stamp_text = render(build_stamp(manifest_text, revision, files))
    changed = manifest_text != old_manifest or stamp_text != old_stamp
    if changed and not check_mode:
        atomic_write_text(manifest_path, manifest_text)
        atomic_write_text(stamp_path, stamp_text)
    return {
        "changed": changed, "manifest": manifest_path, "stamp": stamp_path, "revision": revision,
        "file_count": len(files), "total_size": sum(f.size for f in files),
        "hashed_files": 0 if reused is not None else len(files),
        "hashed_bytes": 0 if reused is not None else sum(f.size for f in files),
        "warnings": zero_length_warnings(files),
        "diff": {"before": old_manifest or "", "after": manifest_text,
                 "before_header": manifest_path, "after_header": manifest_path},
    }


def verify(root: str, manifest_path: str, stamp_path: str, hashes: bool, jobs: int, node: str) -> Dict[str, Any]:
    """Check root against the manifest; problems (fail) and extra files (warn) are listed, never raised."""
    text = read_text_if_exists(manifest_path)
    if text is None:
        raise ManifestError(f"{node}: manifest {manifest_path} does not exist")
    manifest = parse_manifest(text, f"{node}: {manifest_path}")
    # A rank that never had the model yet: everything is missing, which is what the pre-sync plan wants to know.
    files, odd = scan(root, (manifest_path, stamp_path)) if os.path.lexists(root) else ([], [])
    problems = size_problems(manifest, files, odd)
    bad = {p.path for p in problems}
    to_hash = [e["path"] for e in manifest["files"] if hashes and e["path"] not in bad]
    digests = hash_files(root, to_hash, jobs) if to_hash else {}
    problems.extend(hash_problems(manifest, digests))
    extra = extra_files(manifest, files, odd)
    sizes = {e["path"]: e["size"] for e in manifest["files"]}
    return {
        "changed": False, "ok": not problems, "node": node, "revision": manifest["revision"],
        "checked_files": len(manifest["files"]), "hashed_files": len(to_hash),
        "hashed_bytes": sum(sizes[p] for p in to_hash), "problems": [p.as_dict() for p in problems],
        "transfer_bytes": transfer_bytes(manifest, problems),
        "extra_files": extra, "msg": verification_message(node, root, problems) if problems else
        f"{node}: {len(manifest['files'])} file(s) in {root} match the manifest of revision {manifest['revision']}"
        f" ({'sizes and sha256' if hashes else 'sizes'})",
    }
