"""spark_disk and spark_free_space: free space from statvfs numbers, margins, messages naming host and path."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_disk import (
    GIB, DiskError, free_from_statvfs, human_bytes, nearest_existing, required_bytes, space_verdict)


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 * 1024 ** 2, 510_300_000_000, 3 * 1024 ** 4)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 MiB", "475.3 GiB", "3.0 TiB"]


def test_free_space_uses_bavail_not_bfree() -> None:
    assert free_from_statvfs(f_bavail=1000, f_frsize=4096) == 4_096_000
    with pytest.raises(DiskError, match="f_frsize=0"):
        free_from_statvfs(1, 0)


def test_required_bytes_adds_both_margins() -> None:
    assert required_bytes(100 * GIB, 10 * GIB, 0.05) == 115 * GIB
    with pytest.raises(DiskError, match="margin_fraction must be between 0 and 1, got 1.5"):
        required_bytes(1, 0, 1.5)
    with pytest.raises(DiskError, match="needed_bytes must be >= 0, got -1"):
        required_bytes(-1)


def test_space_verdict_refuses_naming_host_path_and_shortfall() -> None:
    # A Spark with ~480 GiB free cannot take the full 510 GB model plus a 20 GiB margin.
    free = free_from_statvfs(f_bavail=480 * GIB // 4096, f_frsize=4096)
    verdict = space_verdict("dgx3", "/var/lib/sparkfleet/models/ds41f", free, 510_300_000_000, 20 * GIB)
    assert verdict["ok"] is False
    assert verdict["shortfall_bytes"] == 510_300_000_000 + 20 * GIB - 480 * GIB
    assert verdict["msg"] == ("dgx3: not enough free space for /var/lib/sparkfleet/models/ds41f: 480.0 GiB free, "
                              "495.3 GiB required (475.3 GiB to write + 20.0 GiB margin); free 15.3 GiB more")
    fine = space_verdict("dgx3", "/m", free, 100 * GIB, 0, 0.1)
    assert fine["ok"] and fine["shortfall_bytes"] == 0 and fine["required_bytes"] == 110 * GIB
    assert fine["msg"] == "dgx3: 480.0 GiB free for /m, 110.0 GiB required (100.0 GiB to write + 10.0 GiB margin)"


def test_nearest_existing_walks_up(tmp_path: Path) -> None:
    assert nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path)
    assert nearest_existing(str(tmp_path)) == str(tmp_path)
    assert nearest_existing("/x/y", exists=lambda p: p == "/") == "/"


def test_module_measures_the_real_file_system(tmp_path: Path, run_module: Any) -> None:
    stats = os.statvfs(tmp_path)
    free = stats.f_bavail * stats.f_frsize
    failed, result = run_module("spark_free_space", {"path": str(tmp_path / "new" / "dir"), "needed_bytes": 1024,
                                                     "node": "dgx1"})
    assert not failed and result["ok"] and result["changed"] is False
    assert result["checked_path"] == str(tmp_path)
    assert abs(result["free_bytes"] - free) < 64 * 1024 ** 2  # other writers may move it a little
    failed, result = run_module("spark_free_space", {"path": str(tmp_path), "needed_bytes": free + 100 * GIB,
                                                     "node": "dgx1"}, check_mode=True)
    assert failed and result["msg"].startswith(f"dgx1: not enough free space for {tmp_path}: ")
    assert result["shortfall_bytes"] >= 100 * GIB - 64 * 1024 ** 2


def test_module_rejects_bad_margin(tmp_path: Path, run_module: Any) -> None:
    failed, result = run_module("spark_free_space", {"path": str(tmp_path), "needed_bytes": 1,
                                                     "margin_fraction": 2.0, "node": "dgx1"})
    assert failed and result["msg"] == f"dgx1: free-space check of {tmp_path}: margin_fraction must be between 0 " \
                                       "and 1, got 2.0"
