"""spark_upstream: lock validation, patch-set fingerprint, reproducible git am, idempotence, check mode."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict

import pytest
from conftest import Upstream, git, subprocess_runner

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_upstream import (
    GitIO, UpstreamError, patchset_sha256, prepare, validate_entry)


def lock(up: Upstream, dest: Path, **over: Any) -> Dict[str, Any]:
    args: Dict[str, Any] = {
        "name": "standin", "repository": str(up.repo), "commit": up.base, "patches": list(up.patches),
        "patch_dir": str(up.patch_dir), "patchset_sha256": patchset_sha256([str(up.patch_dir / p) for p in up.patches]),
        "tree": up.expected_tree, "dest": str(dest),
    }
    args.update(over)
    return args


# --- fingerprint -------------------------------------------------------------------------------

def test_patchset_sha256_is_the_documented_framing(tmp_path: Path) -> None:
    one, two = tmp_path / "0001-a.patch", tmp_path / "0002-b.patch"
    one.write_bytes(b"first\n")
    two.write_bytes(b"second patch\n")
    expected = hashlib.sha256(b"0001-a.patch\n6\nfirst\n0002-b.patch\n13\nsecond patch\n").hexdigest()
    assert patchset_sha256([str(one), str(two)]) == expected


def test_patchset_sha256_changes_with_order_name_and_boundaries(tmp_path: Path) -> None:
    a, b = tmp_path / "a.patch", tmp_path / "b.patch"
    a.write_bytes(b"xy")
    b.write_bytes(b"z")
    base = patchset_sha256([str(a), str(b)])
    assert patchset_sha256([str(b), str(a)]) != base
    moved_a, moved_b = tmp_path / "m" / "a.patch", tmp_path / "m" / "b.patch"
    moved_a.parent.mkdir()
    moved_a.write_bytes(b"x")
    moved_b.write_bytes(b"yz")
    assert patchset_sha256([str(moved_a), str(moved_b)]) != base
    renamed = tmp_path / "c.patch"
    renamed.write_bytes(b"xy")
    assert patchset_sha256([str(renamed), str(b)]) != base
    assert patchset_sha256([]) == hashlib.sha256(b"").hexdigest()


def test_patchset_sha256_streams_large_files(tmp_path: Path) -> None:
    big = tmp_path / "big.patch"
    data = os.urandom(3 * 1024 * 1024 + 17)
    big.write_bytes(data)
    expected = hashlib.sha256(f"big.patch\n{len(data)}\n".encode() + data).hexdigest()
    assert patchset_sha256([str(big)]) == expected


# --- validation --------------------------------------------------------------------------------

GOOD = {"name": "vllm", "repository": "/srv/vllm", "commit": "a" * 40, "patches": [],
        "patchset_sha256": "b" * 64, "tree": "c" * 40}


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "VLLM"}, "lock entry name 'VLLM'"),
    ({"repository": ""}, "upstream vllm: field 'repository' is empty"),
    ({"repository": "src/vllm"}, "upstream vllm: repository 'src/vllm' is a relative path"),
    ({"repository": "--upload-pack=touch /tmp/x:y"}, "starts with '-' (it would be read as a git option)"),
    ({"commit": "abc123"}, "upstream vllm: field 'commit' must be a full 40- or 64-digit"),
    ({"commit": None}, "upstream vllm: field 'commit' is empty"),
    ({"tree": "C" * 40}, "upstream vllm: field 'tree' must be"),
    ({"patchset_sha256": "12"}, "upstream vllm: field 'patchset_sha256' must be 64"),
    ({"tree": None}, "upstream vllm: the lock entry has no tree"),
    ({"patchset_sha256": None, "tree": None}, "no patchset_sha256 and no tree"),
    ({"patches": ["0001.patch"]}, "upstream vllm: patch '0001.patch' is relative but no patch_dir"),
])
def test_validate_entry_names_upstream_and_field(change: Dict[str, Any], message: str) -> None:
    with pytest.raises(UpstreamError, match=None) as info:
        validate_entry({**GOOD, **change}, None, require_pins=True)
    assert message in str(info.value)


@pytest.mark.parametrize("repository", ["file:///srv/vllm", "https://example.org/v.git", "git@host:org/v.git",
                                        "ssh://git@host/org/v.git"])
def test_validate_entry_accepts_urls(repository: str) -> None:
    entry = validate_entry({**GOOD, "repository": repository, "patches": ["p/0001.patch"]}, "/lock", True)
    assert entry.repository == repository
    assert entry.patches == ("/lock/p/0001.patch",)


def test_validate_entry_without_pins_when_allowed() -> None:
    entry = validate_entry({**GOOD, "tree": None, "patchset_sha256": ""}, None, require_pins=False)
    assert entry.tree is None and entry.patchset_sha256 is None


# --- preparing a tree through the module --------------------------------------------------------

def test_prepare_applies_series_to_expected_tree_then_is_idempotent(upstream: Upstream, tmp_path: Path,
                                                                    run_module: Any) -> None:
    dest = tmp_path / "work" / "standin"
    failed, first = run_module("spark_upstream", lock(upstream, dest))
    assert not failed, first
    assert first["changed"] is True
    assert first["tree"] == upstream.expected_tree
    assert first["patches"] == 2
    assert first["actions"][-2:] == [f"git am {p}" for p in upstream.patches]
    assert (dest / "extra.txt").read_text() == "added by patch two\n"
    assert "sparkfleet" in (dest / "server.py").read_text()
    assert git(dest, "rev-parse", "HEAD~2") == upstream.base
    assert git(dest, "log", "-1", "--format=%cn|%ce|%cI|%aI") == \
        "sparkfleet|sparkfleet@localhost|2026-02-04T05:06:07+00:00|2026-02-04T05:06:07+00:00"

    failed, second = run_module("spark_upstream", lock(upstream, dest))
    assert not failed and second["changed"] is False
    assert second["actions"] == []
    assert (second["tree"], second["head"]) == (first["tree"], first["head"])


def test_two_builders_get_identical_commits(upstream: Upstream, tmp_path: Path, run_module: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _, one = run_module("spark_upstream", lock(upstream, tmp_path / "builder-a"))
    # A second builder with a different ambient git identity and clock must not change the result.
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2030-12-31T23:59:59+00:00")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    monkeypatch.setenv("EMAIL", "else@example.org")
    url = "file://" + str(upstream.repo)
    _, two = run_module("spark_upstream", lock(upstream, tmp_path / "builder-b", repository=url))
    assert one["changed"] and two["changed"]
    assert one["tree"] == two["tree"] == upstream.expected_tree
    assert one["head"] == two["head"]
    assert len(one["head"]) == 40


def test_head_pin_is_checked(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    _, first = run_module("spark_upstream", lock(upstream, tmp_path / "a"))
    failed, ok = run_module("spark_upstream", lock(upstream, tmp_path / "b", head=first["head"]))
    assert not failed and ok["head"] == first["head"]
    failed, bad = run_module("spark_upstream", lock(upstream, tmp_path / "c", head=first["head"],
                                                      committer_name="Other Committer"))
    assert failed
    assert f"patched HEAD {bad['msg'].split('patched HEAD ')[1][:40]}" in bad["msg"]
    assert f"differs from the lock's head {first['head']}" in bad["msg"]


def test_tree_mismatch_names_upstream_and_both_ids(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    wrong = "0" * 40
    failed, result = run_module("spark_upstream", lock(upstream, tmp_path / "w", tree=wrong))
    assert failed
    assert result["msg"].startswith(f"upstream standin: patched tree {upstream.expected_tree} differs from "
                                    f"the lock's tree {wrong}")
    # Left for inspection but not stamped: the correct lock rebuilds it.
    failed, again = run_module("spark_upstream", lock(upstream, tmp_path / "w"))
    assert not failed and again["changed"] is True and again["tree"] == upstream.expected_tree


def test_patchset_mismatch_fails_before_anything_changes(upstream: Upstream, tmp_path: Path,
                                                         run_module: Any) -> None:
    dest = tmp_path / "never"
    failed, result = run_module("spark_upstream", lock(upstream, dest, patchset_sha256="f" * 64))
    assert failed
    assert "upstream standin: patch-set sha256" in result["msg"] and "differs from the lock's " + "f" * 64 in \
        result["msg"]
    assert not dest.exists()


def test_missing_patch_file_is_named(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    failed, result = run_module("spark_upstream", lock(upstream, tmp_path / "d", patches=["0009-gone.patch"]))
    assert failed
    assert result["msg"] == f"upstream standin: patch file(s) missing: {upstream.patch_dir / '0009-gone.patch'}"


def test_patch_that_does_not_apply_is_named(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    broken = upstream.patch_dir / "0003-broken.patch"
    text = (upstream.patch_dir / upstream.patches[0]).read_text().replace("NAME = 'standin'", "NAME = 'other'")
    broken.write_text(text)
    patches = [*upstream.patches, broken.name]
    failed, result = run_module("spark_upstream", lock(
        upstream, tmp_path / "d", patches=patches,
        patchset_sha256=patchset_sha256([str(upstream.patch_dir / p) for p in patches])))
    assert failed
    assert result["msg"].startswith("upstream standin: patch 0003-broken.patch does not apply")
    assert not (tmp_path / "d" / ".git" / "rebase-apply").exists()


def test_check_mode_changes_nothing(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    dest = tmp_path / "checked"
    failed, result = run_module("spark_upstream", lock(upstream, dest), check_mode=True)
    assert not failed and result["changed"] is True
    assert result["actions"][0] == f"git init {dest}"
    assert not dest.exists()
    run_module("spark_upstream", lock(upstream, dest))
    failed, again = run_module("spark_upstream", lock(upstream, dest), check_mode=True)
    assert not failed and again["changed"] is False


def test_drift_in_the_work_tree_is_repaired(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    dest = tmp_path / "drift"
    run_module("spark_upstream", lock(upstream, dest))
    (dest / "server.py").write_text("tampered\n")
    (dest / "stray.o").write_bytes(b"\0")
    failed, result = run_module("spark_upstream", lock(upstream, dest))
    assert not failed and result["changed"] is True
    assert "sparkfleet" in (dest / "server.py").read_text() and not (dest / "stray.o").exists()
    assert run_module("spark_upstream", lock(upstream, dest))[1]["changed"] is False


def test_new_pin_reprepares_the_same_directory(upstream: Upstream, tmp_path: Path, run_module: Any,
                                              module_warnings: list[str]) -> None:
    dest = tmp_path / "moving"
    run_module("spark_upstream", lock(upstream, dest))
    newer = git(upstream.repo, "rev-parse", "main")
    failed, result = run_module("spark_upstream", lock(upstream, dest, commit=newer, patches=[], tree=None,
                                                         patchset_sha256=None, require_pins=False))
    assert not failed and result["changed"] is True
    assert result["head"] == newer
    assert result["tree"] == git(upstream.repo, "rev-parse", "main^{tree}")
    assert result["patchset_sha256"] == hashlib.sha256(b"").hexdigest()
    assert f"upstream standin: the lock has no tree; record tree: {result['tree']}" in module_warnings
    assert not (dest / "extra.txt").exists()


def test_unknown_commit_fails_naming_repository(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    missing = "1234567890" * 4
    failed, result = run_module("spark_upstream", lock(upstream, tmp_path / "m", commit=missing))
    assert failed
    assert result["msg"].startswith(f"upstream standin: commit {missing} is not in {upstream.repo}")


def test_foreign_non_empty_directory_is_refused(upstream: Upstream, tmp_path: Path, run_module: Any) -> None:
    dest = tmp_path / "occupied"
    dest.mkdir()
    (dest / "keep.txt").write_text("user data\n")
    failed, result = run_module("spark_upstream", lock(upstream, dest))
    assert failed and "is not empty and is not a git work directory of its own" in result["msg"]
    assert (dest / "keep.txt").read_text() == "user data\n"


def test_prepare_through_subprocess_runner(upstream: Upstream, tmp_path: Path) -> None:
    """module_utils is usable without AnsibleModule (the runner is injected)."""
    args = lock(upstream, tmp_path / "direct")
    entry = validate_entry(args, args["patch_dir"], True)
    io = GitIO(subprocess_runner, "git", args["dest"], "sparkfleet", "sparkfleet@localhost")
    outcome = prepare(io, entry, depth=0, check_mode=False)
    assert outcome.changed and outcome.tree == upstream.expected_tree
    assert prepare(io, entry, depth=0, check_mode=False).changed is False
