"""`docker save` archives for distribution: a verified full archive, and thin copies without shared layers.

`docker load` stores a layer only when its chain is not on the engine yet and reads the layer's file only
then, so an archive from which the layers a rank already holds are left out loads to the same image ID (checked
with Docker 20.10's legacy store: 160 MB → 20 KB for an image whose base was present). The thin copy keeps
manifest.json, the image config and every other member; a layer file that a kept member links to (identical
layers are saved once and linked) is kept as well.
"""
from __future__ import annotations

import json
import os
import posixpath
import tarfile
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import ImageError, save_members_to_skip

Runner = Callable[[List[str]], Tuple[int, str, str]]


# --- Pure ------------------------------------------------------------------------------------------

def id_hex(image_id: str) -> str:
    return image_id.split(":", 1)[-1]


def manifest_matches(manifest: Sequence[Dict[str, Any]], image_id: str) -> bool:
    """The archive holds exactly the image whose ID (its config digest) is image_id."""
    return len(manifest) == 1 and id_hex(image_id) in str(manifest[0].get("Config") or "")


def skip_roots(layer_paths: Iterable[str]) -> Set[str]:
    """Legacy `<dir>/layer.tar` drops its whole directory (json, VERSION); OCI blobs drop just the blob."""
    return {posixpath.dirname(p) if p.endswith("/layer.tar") else p for p in layer_paths}


def is_skipped(name: str, roots: Set[str]) -> bool:
    name = name.rstrip("/")
    return any(name == root or name.startswith(root + "/") for root in roots)


def link_target(name: str, linkname: str) -> str:
    """Archive path a symlink member points to (relative to its own directory)."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(name), linkname))


def protected_roots(members: Sequence[Tuple[str, Optional[str]]], roots: Set[str]) -> Set[str]:
    """Skipped roots that a kept symlink points into; they must stay."""
    keep: Set[str] = set()
    for name, linkname in members:
        if linkname is None or is_skipped(name, roots):
            continue
        target = link_target(name, linkname)
        keep.update(root for root in roots if target == root or target.startswith(root + "/"))
    return keep


# --- I/O ---------------------------------------------------------------------------------------------

def read_save_manifest(path: str) -> List[Dict[str, Any]]:
    try:
        with tarfile.open(path, "r:") as archive:
            handle = archive.extractfile("manifest.json")
            if handle is None:
                raise ImageError(f"{path}: manifest.json is not a regular file")
            data = json.load(handle)
    except (KeyError, tarfile.TarError, ValueError, OSError) as exc:
        raise ImageError(f"{path} is not a readable docker save archive: {exc}") from exc
    if not isinstance(data, list):
        raise ImageError(f"{path}: manifest.json is not a list")
    return data


def _tmp_path(dest: str) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dest)}.", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(dest)))
    os.close(fd)
    return tmp


def save_image(run: Runner, docker: str, image: str, image_id: str, dest: str, check_mode: bool) -> Dict[str, Any]:
    """Ensure dest is a `docker save` of image with ID image_id (kept when it already is)."""
    if os.path.isfile(dest):
        try:
            if manifest_matches(read_save_manifest(dest), image_id):
                return {"changed": False, "path": dest, "size": os.path.getsize(dest)}
        except ImageError:
            pass  # a damaged archive is replaced
    if check_mode:
        return {"changed": True, "path": dest, "size": None}
    tmp = _tmp_path(dest)
    try:
        rc, _, err = run([docker, "image", "save", "--output", tmp, image])
        if rc != 0:
            raise ImageError(f"docker image save {image} failed (rc={rc}): {err.strip()[-500:]}")
        if not manifest_matches(read_save_manifest(tmp), image_id):
            raise ImageError(f"docker image save {image} did not produce image {image_id} (the tag moved?)")
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {"changed": True, "path": dest, "size": os.path.getsize(dest)}


def _plan_members(src: str, depth: int) -> Tuple[List[tarfile.TarInfo], List[tarfile.TarInfo]]:
    manifest = read_save_manifest(src)
    roots = skip_roots(save_members_to_skip(manifest, depth))
    with tarfile.open(src, "r:") as archive:
        members = archive.getmembers()
    links = [(m.name, m.linkname if (m.issym() or m.islnk()) else None) for m in members]
    roots -= protected_roots(links, roots)
    kept = [m for m in members if not is_skipped(m.name, roots)]
    dropped = [m for m in members if is_skipped(m.name, roots)]
    return kept, dropped


def _member_names(path: str) -> Optional[List[str]]:
    if not os.path.isfile(path):
        return None
    try:
        with tarfile.open(path, "r:") as archive:
            return archive.getnames()
    except (tarfile.TarError, OSError):
        return None


def same_file(src: str, dest: str) -> bool:
    """dest names src itself: the same path once resolved (`..`, symlinks), or another link to its inode."""
    if os.path.realpath(src) == os.path.realpath(dest):
        return True
    try:
        return os.path.samefile(src, dest)
    except OSError:
        return False


def write_thin(src: str, dest: str, depth: int, check_mode: bool) -> Dict[str, Any]:
    """Write dest = src without the layers of the first `depth` (shared) layers; idempotent."""
    if same_file(src, dest):
        # The thin copy is written to a temporary file and renamed over dest: with dest == src the full
        # archive would be replaced by its thin copy, and every later rank would get a broken image.
        raise ImageError(f"path {dest} is its source {src}: a thin archive needs a path of its own")
    kept, dropped = _plan_members(src, depth)
    result = {"path": dest, "depth": depth, "skipped_members": len(dropped),
              "skipped_bytes": sum(m.size for m in dropped if m.isfile()),
              "kept_bytes": sum(m.size for m in kept if m.isfile())}
    if _member_names(dest) == [m.name for m in kept]:
        return {**result, "changed": False, "size": os.path.getsize(dest)}
    if check_mode:
        return {**result, "changed": True, "size": None}
    tmp = _tmp_path(dest)
    try:
        with tarfile.open(src, "r:") as source, tarfile.open(tmp, "w:", format=tarfile.PAX_FORMAT) as target:
            for member in kept:
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {**result, "changed": True, "size": os.path.getsize(dest)}
