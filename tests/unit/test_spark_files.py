"""spark_files: what differs at a path (pure, data-driven) and the module on a real temporary tree."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_files import Observed, Wanted, differences, parse_mode

FILE = Wanted(path="/x/f", mode=0o644, uid=0, gid=0, content="a\n")
DIR = Wanted(path="/x/d", mode=0o755, uid=0, gid=0)


def seen(is_dir: bool = False, mode: int = 0o644, uid: int = 0, gid: int = 0, text: str | None = "a\n") -> Observed:
    return Observed(is_dir=is_dir, is_file=not is_dir, mode=mode, uid=uid, gid=gid, text=None if is_dir else text)


@pytest.mark.parametrize(("wanted", "observed", "expected"), [
    (FILE, None, ["create"]),
    (FILE, seen(), []),
    (FILE, seen(text="b\n"), ["content"]),
    (FILE, seen(text=None), ["content"]),
    (FILE, seen(mode=0o600), ["mode"]),
    (FILE, seen(uid=1000), ["owner"]),
    (FILE, seen(text="b\n", mode=0o600, gid=5), ["content", "mode", "owner"]),
    (FILE, seen(is_dir=True, mode=0o755), ["replace"]),
    (Wanted(path="/x/f", mode=0o644, uid=None, gid=None, content="a\n"), seen(uid=1000, gid=1000), []),
    (Wanted(path="/x/f", mode=0o644, uid=None, gid=0, content="a\n"), seen(uid=1000, gid=1000), ["owner"]),
    (DIR, None, ["create"]),
    (DIR, seen(is_dir=True, mode=0o755), []),
    (DIR, seen(is_dir=True, mode=0o700), ["mode"]),
], ids=["missing", "same", "text", "binary", "mode", "owner", "all-three", "dir-where-file", "owner-unmanaged",
        "group-managed", "dir-missing",
        "dir-same", "dir-mode"])
def test_differences(wanted: Wanted, observed: Observed | None, expected: list[str]) -> None:
    assert differences(wanted, observed) == expected


def test_a_file_where_a_directory_is_wanted_is_refused() -> None:
    with pytest.raises(ValueError, match="/x/d: a directory is wanted"):
        differences(DIR, seen())


@pytest.mark.parametrize(("value", "expected"), [("0644", 0o644), ("755", 0o755), (0o600, 0o600)])
def test_parse_mode(value: Any, expected: int) -> None:
    assert parse_mode(value, "/p") == expected


@pytest.mark.parametrize("value", ["u+rw", "", "0999", "12345", True])
def test_parse_mode_refuses_what_is_not_octal(value: Any) -> None:
    with pytest.raises(ValueError, match="/p: mode must be octal"):
        parse_mode(value, "/p")


def args(root: Path, text: str = "one\n", mode: str = "0644") -> dict[str, Any]:
    return {
        "directories": [{"path": str(root / "etc" / "conf.d"), "mode": "0750", "owner": "root", "group": "root"}],
        "files": [
            {"path": str(root / "etc" / "conf.d" / "a.conf"), "content": text, "mode": mode, "owner": "root"},
            {"path": str(root / "etc" / "b.json"), "content": "{}\n", "mode": "0600"},
        ],
    }


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_first_run_creates_in_order_and_the_second_changes_nothing(run_module: Any, tmp_path: Path) -> None:
    failed, result = run_module("spark_files", args(tmp_path))
    assert not failed and result["changed"]
    conf = tmp_path / "etc" / "conf.d"
    assert result["changed_paths"] == [str(conf), str(conf / "a.conf"), str(tmp_path / "etc" / "b.json")]
    assert (conf / "a.conf").read_text() == "one\n"
    assert mode_of(conf) == 0o750 and mode_of(conf / "a.conf") == 0o644 and mode_of(tmp_path / "etc" / "b.json") == 0o600
    failed, again = run_module("spark_files", args(tmp_path))
    assert not failed and not again["changed"] and again["changed_paths"] == []


def test_check_mode_reports_and_writes_nothing(run_module: Any, tmp_path: Path) -> None:
    run_module("spark_files", args(tmp_path))
    failed, result = run_module("spark_files", args(tmp_path, text="two\n", mode="0640"), check_mode=True)
    target = tmp_path / "etc" / "conf.d" / "a.conf"
    assert not failed and result["changes"] == {str(target): ["content", "mode"]}
    assert target.read_text() == "one\n" and mode_of(target) == 0o644


def test_diff_shows_old_and_new_text(run_module: Any, tmp_path: Path) -> None:
    run_module("spark_files", args(tmp_path))
    failed, result = run_module("spark_files", {**args(tmp_path, text="two\n"), "_ansible_diff": True})
    assert not failed
    assert result["diff"] == [{"before_header": str(tmp_path / "etc" / "conf.d" / "a.conf"),
                               "after_header": str(tmp_path / "etc" / "conf.d" / "a.conf"),
                               "before": "one\n", "after": "two\n"}]


def test_a_mode_change_keeps_the_file_and_its_inode(run_module: Any, tmp_path: Path) -> None:
    run_module("spark_files", args(tmp_path))
    target = tmp_path / "etc" / "conf.d" / "a.conf"
    inode = os.stat(target).st_ino
    failed, result = run_module("spark_files", args(tmp_path, mode="0600"))
    assert not failed and result["changes"] == {str(target): ["mode"]}
    assert os.stat(target).st_ino == inode and mode_of(target) == 0o600


def test_a_symlink_is_replaced_by_the_file_and_its_target_left_alone(run_module: Any, tmp_path: Path) -> None:
    run_module("spark_files", args(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep\n")
    target = tmp_path / "etc" / "b.json"
    target.unlink()
    target.symlink_to(elsewhere)
    failed, result = run_module("spark_files", args(tmp_path))
    assert not failed and result["changes"] == {str(target): ["replace"]}
    assert not target.is_symlink() and target.read_text() == "{}\n" and elsewhere.read_text() == "keep\n"


@pytest.mark.parametrize(("change", "message"), [
    ({"owner": "no-such-user-here"}, "unknown owner or group"),
    ({"mode": "u=rw"}, "mode must be octal"),
])
def test_bad_entries_fail_naming_the_path_before_writing(run_module: Any, tmp_path: Path, change: dict[str, str],
                                                          message: str) -> None:
    bad = args(tmp_path)
    bad["files"][1].update(change)
    failed, result = run_module("spark_files", bad)
    assert failed and message in result["msg"] and str(tmp_path / "etc" / "b.json") in result["msg"]
    assert not (tmp_path / "etc").exists()


def test_a_missing_directory_fails_and_says_what_was_already_done(run_module: Any, tmp_path: Path) -> None:
    bad = {"files": [{"path": str(tmp_path / "a"), "content": "x", "mode": "0644"},
                     {"path": str(tmp_path / "no" / "b"), "content": "y", "mode": "0644"}]}
    failed, result = run_module("spark_files", bad)
    assert failed and str(tmp_path / "no") in result["msg"] and result["changed_paths"] == [str(tmp_path / "a")]
