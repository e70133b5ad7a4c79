"""spark_model_manifest: create (symlink refusal, idempotence, stamp reuse, check/diff) and verify."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_manifest import (
    FileInfo, ManifestError, Problem, build_manifest, extra_files, parse_manifest, reusable_hashes, size_problems)

REV = "dba1be0a40aa45a94ad051997016db3960a90277"
BIG = 6 * 1024 * 1024 + 123  # several 1 MiB chunks plus a tail


def make_model(root: Path) -> Dict[str, bytes]:
    files = {
        "config.json": b'{"model_type": "standin"}\n',
        "model.safetensors.index.json": b'{"metadata": {"total_size": 6291579}}\n',
        "model-00001-of-00002.safetensors": os.urandom(BIG),
        "model-00002-of-00002.safetensors": os.urandom(200_000),
        "engram/table-layer01.bin": os.urandom(300_000),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


@pytest.fixture
def model(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    root.mkdir()
    make_model(root)
    return root


def create(run_module: Any, root: Path, check: bool = False, **over: Any) -> tuple[bool, Dict[str, Any]]:
    return run_module("spark_model_manifest", {"mode": "create", "path": str(root), "revision": REV, **over},
                      check_mode=check)


def verify(run_module: Any, root: Path, **over: Any) -> tuple[bool, Dict[str, Any]]:
    return run_module("spark_model_manifest", {"mode": "verify", "path": str(root), "node": "dgx2", **over})


# --- create ------------------------------------------------------------------------------------

def test_create_records_path_size_sha256_and_stamp(model: Path, run_module: Any) -> None:
    failed, result = create(run_module, model)
    assert not failed and result["changed"] is True
    manifest = json.loads((model / "sparkfleet-manifest.json").read_text())
    assert manifest["revision"] == REV and manifest["kind"] == "sparkfleet-model-manifest"
    by_path = {e["path"]: e for e in manifest["files"]}
    assert sorted(by_path) == ["config.json", "engram/table-layer01.bin", "model-00001-of-00002.safetensors",
                               "model-00002-of-00002.safetensors", "model.safetensors.index.json"]
    shard = model / "model-00001-of-00002.safetensors"
    assert by_path[shard.name] == {"path": shard.name, "size": BIG,
                                   "sha256": hashlib.sha256(shard.read_bytes()).hexdigest()}
    assert manifest["total_size"] == sum(e["size"] for e in manifest["files"]) == result["total_size"]
    assert result["hashed_files"] == 5 and result["hashed_bytes"] == manifest["total_size"]
    stamp = json.loads((model / "sparkfleet-stamp.json").read_text())
    manifest_hash = hashlib.sha256((model / "sparkfleet-manifest.json").read_bytes()).hexdigest()
    assert stamp["revision"] == REV and stamp["manifest_sha256"] == manifest_hash
    assert stamp["files"][shard.name] == [BIG, shard.stat().st_mtime_ns]


def test_second_create_reuses_hashes_and_reports_unchanged(model: Path, run_module: Any) -> None:
    create(run_module, model)
    before = (model / "sparkfleet-manifest.json").stat().st_mtime_ns
    failed, again = create(run_module, model)
    assert not failed and again["changed"] is False
    assert again["hashed_files"] == 0 and again["hashed_bytes"] == 0
    assert (model / "sparkfleet-manifest.json").stat().st_mtime_ns == before
    failed, forced = create(run_module, model, rehash=True)
    assert not failed and forced["changed"] is False and forced["hashed_files"] == 5


def test_create_notices_a_changed_file_with_the_same_size(model: Path, run_module: Any) -> None:
    create(run_module, model)
    shard = model / "model-00002-of-00002.safetensors"
    shard.write_bytes(os.urandom(200_000))
    os.utime(shard, ns=(1, 1))  # new mtime: the stamp no longer vouches for the stored hash
    failed, result = create(run_module, model)
    assert not failed and result["changed"] is True and result["hashed_files"] == 5
    entry = next(e for e in json.loads((model / "sparkfleet-manifest.json").read_text())["files"]
                 if e["path"] == shard.name)
    assert entry["sha256"] == hashlib.sha256(shard.read_bytes()).hexdigest()


def test_create_with_a_new_revision_rewrites(model: Path, run_module: Any) -> None:
    create(run_module, model)
    failed, result = create(run_module, model, revision="f" * 40)
    assert not failed and result["changed"] is True and result["hashed_files"] == 5
    assert json.loads((model / "sparkfleet-stamp.json").read_text())["revision"] == "f" * 40


def test_create_check_mode_writes_nothing_and_diff_shows_manifest(model: Path, run_module: Any) -> None:
    failed, result = run_module("spark_model_manifest", {"mode": "create", "path": str(model), "revision": REV,
                                                         "_ansible_diff": True}, check_mode=True)
    assert not failed and result["changed"] is True
    assert not (model / "sparkfleet-manifest.json").exists() and not (model / "sparkfleet-stamp.json").exists()
    assert result["diff"]["before"] == ""
    assert json.loads(result["diff"]["after"])["file_count"] == 5


def test_create_refuses_cache_symlinks_naming_each(model: Path, tmp_path: Path, run_module: Any) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "abc123").write_bytes(b"weights")
    (model / "model-00003-of-00003.safetensors").symlink_to(blobs / "abc123")
    (model / "tokenizer.json").symlink_to(tmp_path / "blobs" / "gone")
    failed, result = create(run_module, model)
    assert failed
    assert f"model-00003-of-00003.safetensors: is a symlink to {blobs / 'abc123'}" in result["msg"]
    assert f"tokenizer.json: is a symlink to {tmp_path / 'blobs' / 'gone'}" in result["msg"]
    assert "holds 2 entries that are not regular files" in result["msg"]
    assert "Materialise real files first" in result["msg"]
    assert not (model / "sparkfleet-manifest.json").exists()


def test_create_warns_about_zero_length_files(model: Path, run_module: Any, module_warnings: list[str]) -> None:
    (model / "generation_config.json").write_bytes(b"")
    failed, result = create(run_module, model, node="dgx1")
    assert not failed and result["file_count"] == 6
    assert "dgx1: generation_config.json is zero-length; recorded as such (is the source complete?)" in module_warnings


def test_create_requires_revision_and_directory(tmp_path: Path, run_module: Any) -> None:
    failed, result = run_module("spark_model_manifest", {"mode": "create", "path": str(tmp_path)})
    assert failed and "revision" in result["msg"]
    failed, result = create(run_module, tmp_path / "absent", node="dgx1")
    assert failed
    assert result["msg"] == f"dgx1: model directory {tmp_path / 'absent'} does not exist or is not a directory"
    failed, result = create(run_module, tmp_path, revision="  ", node="dgx1")
    assert failed and "field 'revision' is empty" in result["msg"]


def test_manifest_outside_the_directory(model: Path, tmp_path: Path, run_module: Any) -> None:
    manifest, stamp = tmp_path / "state" / "m.json", tmp_path / "state" / "s.json"
    manifest.parent.mkdir()
    failed, result = create(run_module, model, manifest=str(manifest), stamp=str(stamp))
    assert not failed and result["file_count"] == 5 and manifest.exists() and stamp.exists()
    failed, checked = verify(run_module, model, manifest=str(manifest), stamp=str(stamp), hashes=True)
    assert not failed and checked["ok"] and checked["hashed_files"] == 5


# --- verify ------------------------------------------------------------------------------------

def test_verify_clean_copy_with_and_without_hashes(model: Path, run_module: Any) -> None:
    create(run_module, model)
    failed, sizes = verify(run_module, model, expected_revision=REV)
    assert not failed and sizes["ok"] and sizes["hashed_files"] == 0 and sizes["checked_files"] == 5
    assert sizes["msg"] == f"dgx2: 5 file(s) in {model} match the manifest of revision {REV} (sizes)"
    failed, full = verify(run_module, model, hashes=True, jobs=2)
    total = json.loads((model / "sparkfleet-manifest.json").read_text())["total_size"]
    assert not failed and full["ok"] and full["hashed_files"] == 5 and full["hashed_bytes"] == total


def test_verify_names_every_bad_file(model: Path, run_module: Any, module_warnings: list[str]) -> None:
    create(run_module, model)
    corrupted = model / "model-00001-of-00002.safetensors"
    data = bytearray(corrupted.read_bytes())
    data[BIG // 2] ^= 0xFF  # same size, one flipped byte: only a hash can tell
    corrupted.write_bytes(bytes(data))
    truncated = model / "model-00002-of-00002.safetensors"
    truncated.write_bytes(truncated.read_bytes()[:1000])
    (model / "engram" / "table-layer01.bin").unlink()
    (model / "config.json").write_bytes(b"")
    (model / "notes.txt").write_text("left over\n")

    failed, sizes = verify(run_module, model)
    assert failed
    assert [p["path"] for p in sizes["problems"]] == [
        "config.json", "engram/table-layer01.bin", "model-00002-of-00002.safetensors"]
    assert sizes["msg"] == (
        f"dgx2: model verification failed in {model} for 3 file(s): "
        "config.json: zero-length (expected 26 bytes); "
        "engram/table-layer01.bin: missing; "
        "model-00002-of-00002.safetensors: short (1000 of 200000 bytes)")
    assert sizes["extra_files"] == ["notes.txt"]
    assert "dgx2: notes.txt is not in the manifest" in module_warnings

    failed, hashed = verify(run_module, model, hashes=True)
    assert failed and len(hashed["problems"]) == 4
    flipped = hashed["problems"][-1]
    assert flipped["path"] == corrupted.name
    assert flipped["problem"].startswith("sha256 ") and "differs from the manifest's" in flipped["problem"]
    assert f"{corrupted.name}: sha256 " in hashed["msg"] and "for 4 file(s)" in hashed["msg"]
    assert hashed["hashed_files"] == 2  # bad-size files are not read


def test_verify_flags_a_symlinked_copy(model: Path, tmp_path: Path, run_module: Any) -> None:
    create(run_module, model)
    shard = model / "model-00002-of-00002.safetensors"
    shard.unlink()
    shard.symlink_to(tmp_path / "blobs" / "dangling")
    failed, result = verify(run_module, model)
    assert failed
    assert result["problems"] == [{"path": shard.name, "problem": f"is a symlink to {tmp_path / 'blobs' / 'dangling'}",
                                   "expected_size": 200_000, "actual_size": None}]


def test_verify_longer_file_and_wrong_revision(model: Path, run_module: Any) -> None:
    create(run_module, model)
    with open(model / "config.json", "ab") as handle:
        handle.write(b"x")
    failed, result = verify(run_module, model)
    assert failed and result["problems"][0]["problem"] == "too long (27 bytes, expected 26)"
    (model / "config.json").write_bytes(b'{"model_type": "standin"}\n')
    failed, result = verify(run_module, model, expected_revision="0" * 40)
    assert failed and result["msg"] == f"dgx2: manifest is for revision {REV}, expected {'0' * 40}"


def test_verify_without_manifest_or_with_a_broken_one(model: Path, run_module: Any) -> None:
    failed, result = verify(run_module, model)
    assert failed and result["msg"] == f"dgx2: manifest {model / 'sparkfleet-manifest.json'} does not exist"
    (model / "sparkfleet-manifest.json").write_text('{"kind": "sparkfleet-model-manifest", "format": 1, '
                                                    '"revision": "r", "files": [{"path": "../etc/passwd", '
                                                    '"size": 1, "sha256": "' + "0" * 64 + '"}]}')
    failed, result = verify(run_module, model)
    assert failed and "files[0]: 'path' must be a relative path inside the model directory" in result["msg"]


# --- pure helpers ------------------------------------------------------------------------------

def test_size_problems_and_extra_files_are_pure() -> None:
    files = [FileInfo("a", 10, 1), FileInfo("b", 0, 1), FileInfo("c", 5, 1), FileInfo("z", 1, 1)]
    manifest = build_manifest("r", [FileInfo("a", 10, 0), FileInfo("b", 4, 0), FileInfo("c", 9, 0),
                                    FileInfo("d", 1, 0), FileInfo("e", 3, 0)], {k: "0" * 64 for k in "abcde"})
    odd = [Problem("e", "is a symlink to /x")]
    assert [p.text() for p in size_problems(manifest, files, odd)] == [
        "b: zero-length (expected 4 bytes)", "c: short (5 of 9 bytes)", "d: missing", "e: is a symlink to /x"]
    assert extra_files(manifest, files, odd) == ["z"]


def test_reusable_hashes_requires_matching_stamp() -> None:
    files = [FileInfo("a", 3, 7)]
    text = json.dumps(build_manifest("r", files, {"a": "1" * 64}))
    stamp = {"revision": "r", "manifest_sha256": hashlib.sha256(text.encode()).hexdigest(), "files": {"a": [3, 7]}}
    assert reusable_hashes(text, json.dumps(stamp), "r", files) == {"a": "1" * 64}
    assert reusable_hashes(text, json.dumps(stamp), "other", files) is None
    assert reusable_hashes(text, json.dumps(stamp), "r", [FileInfo("a", 3, 8)]) is None
    assert reusable_hashes(text + " ", json.dumps(stamp), "r", files) is None
    assert reusable_hashes(text, None, "r", files) is None


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "not JSON"),
    ('{"kind": "other"}', "not a sparkfleet-model-manifest of format 1"),
    ('{"kind": "sparkfleet-model-manifest", "format": 1, "revision": 3, "files": []}', "'revision' (string)"),
    ('{"kind": "sparkfleet-model-manifest", "format": 1, "revision": "r", "files": [{"path": "a", "size": -1, '
     '"sha256": ""}]}', "files[0] (a): 'size' must be a non-negative integer"),
])
def test_parse_manifest_errors(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(text, "m.json")
    assert message in str(info.value) and str(info.value).startswith("m.json: ")


def test_verify_before_first_sync_reports_transfer_bytes(model: Path, tmp_path: Path, run_module: Any) -> None:
    state = tmp_path / "state"
    state.mkdir()
    manifest, stamp = state / "m.json", state / "s.json"
    create(run_module, model, manifest=str(manifest), stamp=str(stamp))
    total = json.loads(manifest.read_text())["total_size"]
    target = tmp_path / "rank1" / "model"
    failed, plan = verify(run_module, target, manifest=str(manifest), stamp=str(stamp), fail_on_problems=False)
    assert not failed and plan["ok"] is False
    assert plan["transfer_bytes"] == total and len(plan["problems"]) == 5
    assert {p["problem"] for p in plan["problems"]} == {"missing"}
    failed, result = verify(run_module, target, manifest=str(manifest), stamp=str(stamp))
    assert failed and "for 5 file(s)" in result["msg"]
    # Half a copy: only the files that are not right count.
    target.mkdir(parents=True)
    (target / "config.json").write_bytes((model / "config.json").read_bytes())
    (target / "model-00002-of-00002.safetensors").write_bytes(b"\0" * 10)
    failed, plan = verify(run_module, target, manifest=str(manifest), stamp=str(stamp), fail_on_problems=False)
    assert not failed and plan["transfer_bytes"] == total - len((model / "config.json").read_bytes())
