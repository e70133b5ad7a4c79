"""spark_image_archive: verified save, thin archives without shared layers (legacy docker save layout)."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from conftest import FIXTURES

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image_archive import (
    is_skipped, link_target, protected_roots, skip_roots)

MANIFEST = json.loads((FIXTURES / "docker-save-manifest.json").read_text())
LAYERS = MANIFEST[0]["Layers"]
IMAGE_ID = "sha256:" + MANIFEST[0]["Config"].removesuffix(".json")
SIZES = [4_000_000, 30_000, 500]


def build_archive(path: Path, link_last_to_first: bool = False) -> None:
    """The member layout Docker 20.10's `docker save` writes (captured manifest, synthetic layer bytes)."""
    with tarfile.open(path, "w:") as archive:
        for index, layer in enumerate(LAYERS):
            top = layer.split("/")[0]
            archive.addfile(_info(top, tarfile.DIRTYPE))
            _add(archive, f"{top}/VERSION", b"1.0")
            _add(archive, f"{top}/json", json.dumps({"id": top}).encode())
            if link_last_to_first and index == len(LAYERS) - 1:
                link = _info(layer, tarfile.SYMTYPE)
                link.linkname = f"../{LAYERS[0]}"
                archive.addfile(link)
            else:
                _add(archive, layer, bytes([index]) * SIZES[index])
        _add(archive, MANIFEST[0]["Config"], b'{"architecture": "amd64"}')
        _add(archive, "manifest.json", json.dumps(MANIFEST).encode())
        _add(archive, "repositories", b"{}")


def _info(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = _info(name, tarfile.REGTYPE)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def names(path: Path) -> List[str]:
    with tarfile.open(path) as archive:
        return archive.getnames()


def thin(run_module: Any, src: Path, dest: Path, depth: int, check_mode: bool = False) -> Tuple[bool, Dict]:
    return run_module("spark_image_archive", {"mode": "thin", "src": str(src), "path": str(dest), "depth": depth},
                      check_mode=check_mode)


# --- pure ------------------------------------------------------------------------------------

def test_skip_roots_and_membership() -> None:
    roots = skip_roots(["abc/layer.tar", "blobs/sha256/ff"])
    assert roots == {"abc", "blobs/sha256/ff"}
    assert is_skipped("abc", roots) and is_skipped("abc/", roots) and is_skipped("abc/json", roots)
    assert not is_skipped("abcd/json", roots) and not is_skipped("blobs/sha256/ffe", roots)
    assert link_target("c/layer.tar", "../a/layer.tar") == "a/layer.tar"
    assert protected_roots([("c/layer.tar", "../a/layer.tar"), ("a/layer.tar", None)], {"a"}) == {"a"}
    assert protected_roots([("a/x", "../b/y")], {"a", "b"}) == set()  # a skipped link protects nothing


# --- thin archives -----------------------------------------------------------------------------

def test_thin_archive_drops_shared_layer_directories(tmp_path: Path, run_module: Any) -> None:
    full, small = tmp_path / "full.tar", tmp_path / "dgx2.tar"
    build_archive(full)
    failed, result = thin(run_module, full, small, 1)
    assert not failed and result["changed"] is True
    base_dir = LAYERS[0].split("/")[0]
    assert [n for n in names(full) if not n.startswith(base_dir)] == names(small)
    assert result["skipped_members"] == 4
    assert result["skipped_bytes"] == SIZES[0] + len(b"1.0") + len(json.dumps({"id": base_dir}))
    assert result["size"] == small.stat().st_size < full.stat().st_size - SIZES[0] + 10_240
    with tarfile.open(small) as archive:
        handle = archive.extractfile(LAYERS[1])
        assert handle is not None and handle.read() == bytes([1]) * SIZES[1]
        manifest = archive.extractfile("manifest.json")
        assert manifest is not None and json.load(manifest) == MANIFEST
    assert oct(small.stat().st_mode & 0o777) == "0o600"
    failed, again = thin(run_module, full, small, 1)
    assert not failed and again["changed"] is False


def test_thin_archive_depth_zero_and_depth_change(tmp_path: Path, run_module: Any) -> None:
    full, copy = tmp_path / "full.tar", tmp_path / "copy.tar"
    build_archive(full)
    failed, result = thin(run_module, full, copy, 0)
    assert not failed and result["skipped_members"] == 0 and names(copy) == names(full)
    failed, result = thin(run_module, full, copy, 2)
    assert not failed and result["changed"] is True and len(names(copy)) == len(names(full)) - 8


def test_linked_layer_keeps_its_target(tmp_path: Path, run_module: Any) -> None:
    full, small = tmp_path / "full.tar", tmp_path / "small.tar"
    build_archive(full, link_last_to_first=True)
    failed, result = thin(run_module, full, small, 1)
    assert not failed and result["skipped_members"] == 0  # the only shared layer is still linked to
    assert LAYERS[0] in names(small)


def test_thin_check_mode_and_errors(tmp_path: Path, run_module: Any) -> None:
    full, small = tmp_path / "full.tar", tmp_path / "small.tar"
    build_archive(full)
    failed, result = thin(run_module, full, small, 1, check_mode=True)
    assert not failed and result["changed"] is True and result["size"] is None and not small.exists()
    failed, result = thin(run_module, full, small, 4)
    assert failed and result["msg"] == "the node shares 4 layers but the image has only 3"
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    failed, result = thin(run_module, tmp_path / "junk.tar", small, 1)
    assert failed and result["msg"].startswith(f"{tmp_path / 'junk.tar'} is not a readable docker save archive")



@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink", "hardlink"])
def test_thin_refuses_to_overwrite_its_source(tmp_path: Path, run_module: Any, spelling: str) -> None:
    full = tmp_path / "full.tar"
    build_archive(full)
    before = full.read_bytes()
    dest = {"same": full, "dotted": tmp_path / "sub" / ".." / "full.tar", "symlink": tmp_path / "link.tar",
            "hardlink": tmp_path / "hard.tar"}[spelling]
    (tmp_path / "sub").mkdir()
    if spelling == "symlink":
        dest.symlink_to(full)
    if spelling == "hardlink":
        dest.hardlink_to(full)
    for check_mode in (True, False):
        failed, result = thin(run_module, full, dest, 1, check_mode=check_mode)
        assert failed and "is its source" in result["msg"] and str(full) in result["msg"], result
    assert full.read_bytes() == before


# --- save ----------------------------------------------------------------------------------------

class FakeSave:
    def __init__(self, source: Optional[Path], rc: int = 0) -> None:
        self.source, self.rc, self.calls = source, rc, []

    def __call__(self, args: List[str]) -> Tuple[int, str, str]:
        self.calls.append(list(args))
        if self.rc:
            return self.rc, "", "Error response from daemon: reference does not exist"
        out = args[args.index("--output") + 1]
        assert self.source is not None
        Path(out).write_bytes(self.source.read_bytes())
        return 0, "", ""


@pytest.fixture
def fake_save(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeSave:
    from ansible.module_utils import basic
    source = tmp_path / "from-engine.tar"
    build_archive(source)
    fake = FakeSave(source)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: fake(args))
    return fake


def save(run_module: Any, dest: Path, image_id: str = IMAGE_ID, check_mode: bool = False) -> Tuple[bool, Dict]:
    return run_module("spark_image_archive", {"mode": "save", "image": "sparkfleet/serve:lab1-0123456789ab",
                                              "image_id": image_id, "path": str(dest),
                                              "docker_bin": "/usr/bin/docker"}, check_mode=check_mode)


def test_save_once_then_keep(fake_save: FakeSave, tmp_path: Path, run_module: Any) -> None:
    dest = tmp_path / "image.tar"
    failed, result = save(run_module, dest, check_mode=True)
    assert not failed and result["changed"] is True and not dest.exists() and fake_save.calls == []
    failed, result = save(run_module, dest)
    assert not failed and result["changed"] is True and result["size"] == dest.stat().st_size
    assert fake_save.calls[0][:4] == ["/usr/bin/docker", "image", "save", "--output"]
    assert fake_save.calls[0][-1] == "sparkfleet/serve:lab1-0123456789ab"
    failed, again = save(run_module, dest)
    assert not failed and again["changed"] is False and len(fake_save.calls) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_save_refuses_an_archive_of_another_image(fake_save: FakeSave, tmp_path: Path, run_module: Any) -> None:
    other = "sha256:" + "0" * 64
    failed, result = save(run_module, tmp_path / "image.tar", image_id=other)
    assert failed and result["msg"] == (f"docker image save sparkfleet/serve:lab1-0123456789ab did not produce image "
                                        f"{other} (the tag moved?)")
    assert not (tmp_path / "image.tar").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_save_reports_docker_failure(fake_save: FakeSave, tmp_path: Path, run_module: Any) -> None:
    fake_save.rc = 1
    failed, result = save(run_module, tmp_path / "image.tar")
    assert failed and result["msg"].startswith("docker image save sparkfleet/serve:lab1-0123456789ab failed (rc=1)")
