"""spark_swap_file: the steps a swap file needs (pure) and the module on a real file, with a stand-in mkswap
(fake_mkswap) that writes the signature where mkswap --pagesize does."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import has_swap_header, swap_file_steps

FAKE_MKSWAP = """#!/bin/sh
# fake_mkswap --pagesize N --label L FILE: SWAPSPACE2 in the last 10 bytes of the first page.
page=$2; file=$5
printf 'SWAPSPACE2' | dd of="$file" bs=1 seek=$((page - 10)) conv=notrunc status=none
"""


@pytest.mark.parametrize(("exists", "mode", "uid", "header", "expected"), [
    (False, 0, 0, False, ["allocate", "restrict", "mkswap"]),
    (True, 0o600, 0, True, []),
    (True, 0o644, 0, True, ["restrict"]),
    (True, 0o600, 1000, True, ["restrict"]),
    (True, 0o600, 0, False, ["mkswap"]),
    (True, 0o666, 0, False, ["restrict", "mkswap"]),
], ids=["missing", "ready", "world-readable", "not-root", "no-header", "both"])
def test_swap_file_steps(exists: bool, mode: int, uid: int, header: bool, expected: list[str]) -> None:
    assert swap_file_steps(exists, mode, uid, 0, header) == expected


@pytest.mark.parametrize(("offset", "page", "expected"), [(65526, 65536, True), (4086, 65536, False),
                                                           (4086, 4096, True), (None, 65536, False)])
def test_has_swap_header(offset: int | None, page: int, expected: bool) -> None:
    head = bytearray(65536)
    if offset is not None:
        head[offset:offset + 10] = b"SWAPSPACE2"
    assert has_swap_header(bytes(head), page) is expected


@pytest.fixture
def swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mkswap").write_text(FAKE_MKSWAP)
    (bindir / "mkswap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return tmp_path / "swap-64k.img"


def run(run_module: Any, path: Path, check_mode: bool = False) -> tuple[bool, dict[str, Any]]:
    return run_module("spark_swap_file", {"path": str(path), "size_mib": 1, "page_size": 65536}, check_mode)


def test_a_new_file_is_allocated_restricted_and_given_a_64k_header(run_module: Any, swap: Path) -> None:
    failed, result = run(run_module, swap)
    assert not failed and result["steps"] == ["allocate", "restrict", "mkswap"] and result["header"]
    assert swap.stat().st_size == 1024 * 1024 and stat.S_IMODE(swap.stat().st_mode) == 0o600
    assert swap.read_bytes()[65526:65536] == b"SWAPSPACE2"
    failed, again = run(run_module, swap)
    assert not failed and not again["changed"] and again["steps"] == []


def test_check_mode_reports_the_steps_and_creates_nothing(run_module: Any, swap: Path) -> None:
    failed, result = run(run_module, swap, check_mode=True)
    assert not failed and result["changed"] and result["steps"] == ["allocate", "restrict", "mkswap"]
    assert not swap.exists()


def test_a_4k_header_is_rewritten_and_the_file_kept(run_module: Any, swap: Path) -> None:
    data = bytearray(1024 * 1024)
    data[4086:4096] = b"SWAPSPACE2"
    swap.write_bytes(bytes(data))
    swap.chmod(0o600)
    failed, result = run(run_module, swap)
    assert not failed and result["steps"] == ["mkswap"] and result["header"]
    assert swap.stat().st_size == 1024 * 1024


def test_a_directory_at_the_path_is_refused(run_module: Any, swap: Path) -> None:
    swap.mkdir()
    failed, result = run(run_module, swap)
    assert failed and "is not a regular file" in result["msg"]


def test_a_header_that_does_not_appear_fails(run_module: Any, swap: Path) -> None:
    (swap.parent / "bin" / "mkswap").write_text("#!/bin/sh\nexit 0\n")
    failed, result = run(run_module, swap)
    assert failed and "no SWAPSPACE2 signature at offset 65526" in result["msg"]
