"""Build memory floor and compile-job bound (reference §2.4 formula), pure and through the module."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import GIB, BuildLimits, build_jobs

REFERENCE = BuildLimits()


@pytest.mark.parametrize(("cpus", "avail_gib", "jobs"), [
    (20, 110, 8),   # a GB10 at rest: CPU bound (20 - 4) // 2 = 8
    (20, 64, 5),    # at the floor: (64 - 24) // 8 = 5
    (32, 200, 10),  # the cap
    (20, 70.5, 5),  # fractional memory rounds down
])
def test_reference_formula(cpus: int, avail_gib: float, jobs: int) -> None:
    verdict = build_jobs("dgx4", cpus, int(avail_gib * GIB), REFERENCE)
    assert verdict["ok"] and verdict["jobs"] == jobs


def test_refuses_below_floor_naming_node() -> None:
    verdict = build_jobs("dgx4", 20, int(63.9 * GIB), REFERENCE)
    assert not verdict["ok"]
    assert verdict["msg"] == "dgx4: refusing to build: MemAvailable 63.9 GiB is below the floor of 64 GiB"


def test_refuses_when_no_job_fits() -> None:
    verdict = build_jobs("lab1", 2, 20 * GIB, BuildLimits(floor_gib=1, reserve_gib=1, per_job_gib=2))
    assert not verdict["ok"] and verdict["by_cpu"] == -1
    assert verdict["msg"].startswith("lab1: refusing to build: no compile job fits (2 CPUs leave -1 by CPU")


def write_meminfo(root: Path, kib: int) -> Path:
    (root / "meminfo").write_text(f"MemTotal:       131072000 kB\nMemFree:         1000000 kB\n"
                                  f"MemAvailable:   {kib} kB\nBuffers:           1000 kB\n")
    return root


def test_module_reads_meminfo(tmp_path: Path, run_module: Any) -> None:
    proc = write_meminfo(tmp_path, 100 * 1024 * 1024)  # 100 GiB
    failed, result = run_module("spark_build_limits", {"proc_root": str(proc), "cpus": 20, "node": "dgx4"},
                                check_mode=True)
    assert not failed and result["changed"] is False
    assert (result["jobs"], result["by_cpu"], result["by_memory"]) == (8, 8, 9)
    assert result["mem_available"] == 100 * GIB


def test_module_refuses(tmp_path: Path, run_module: Any) -> None:
    proc = write_meminfo(tmp_path, 10 * 1024 * 1024)
    failed, result = run_module("spark_build_limits", {"proc_root": str(proc), "cpus": 20, "node": "dgx4"})
    assert failed and result["msg"] == "dgx4: refusing to build: MemAvailable 10.0 GiB is below the floor of 64 GiB"
    (tmp_path / "meminfo").write_text("MemTotal: 1 kB\n")
    failed, result = run_module("spark_build_limits", {"proc_root": str(proc), "node": "dgx4"})
    assert failed and result["msg"] == "dgx4: cannot read MemAvailable: /proc/meminfo has no MemAvailable line"
