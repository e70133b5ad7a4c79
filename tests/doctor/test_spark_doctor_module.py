"""plugins/modules/spark_doctor.py in check mode against a fixture sysfs tree and stand-in docker, systemctl and
nvidia-smi executables (test doubles on PATH)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Tuple

import pytest

from testlib import run_module  # noqa: F401  (pytest fixture)

IMAGE_ID = "sha256:" + "a" * 64
INSPECT = [{"Image": IMAGE_ID, "RestartCount": 0,
            "State": {"Status": "running", "Running": True, "ExitCode": 0, "StartedAt": "2026-11-29T10:00:00Z"},
            "Config": {"Cmd": ["/models", "--node-rank", "1"], "Env": ["NCCL_IB_GID_INDEX=3"], "Labels": {}}}]


def executable(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tuple[Path, Path]:
    """A Spark-like node: GPU device, four RDMA devices, EFI, nvidia_drm with modeset/fbdev on."""
    sys_root = tmp_path / "sys"
    for dev in ("rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"):
        (sys_root / "class" / "infiniband" / dev).mkdir(parents=True)
    (sys_root / "firmware" / "efi").mkdir(parents=True)
    params = sys_root / "module" / "nvidia_drm" / "parameters"
    params.mkdir(parents=True)
    (params / "modeset").write_text("Y\n")
    (params / "fbdev").write_text("Y\n")
    (tmp_path / "nvidia0").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    executable(bin_dir, "docker", f'echo "docker $*" >> {log}\n'
                                  f'[ "$6" = dsv41-karmic-kraken ] || {{ echo "Error: No such container: $6" >&2; exit 1; }}\n'
                                  f"cat <<'JSON'\n{json.dumps(INSPECT)}\nJSON")
    executable(bin_dir, "systemctl", f'echo "systemctl $*" >> {log}\n'
                                     'printf "LoadState=loaded\\nActiveState=active\\nUnitFileState=enabled\\n"')
    executable(bin_dir, "nvidia-smi", f'echo "nvidia-smi $*" >> {log}\necho 2171')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path, log


def test_spark_node_in_check_mode(run_module: Callable[..., Any], node: Tuple[Path, Path]) -> None:
    root, log = node
    failed, result = run_module("spark_doctor", {
        "devices": [str(root / "nvidia0")], "container": "dsv41-karmic-kraken", "sys_root": str(root / "sys")},
        check_mode=True)
    assert not failed and result["changed"] is False
    assert result["devices"] == {str(root / "nvidia0"): True}
    assert result["rdma_devices"] == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    assert result["efi"] is True and result["nvidia_drm"] == {"modeset": "Y", "fbdev": "Y"}
    assert result["units"]["dgx-fan-control.service"] == {"found": True, "load": "loaded", "active": "active",
                                                          "enabled": "enabled"}
    container = result["container"]
    assert container["running"] and container["image"] == IMAGE_ID
    assert container["cmd"] == ["/models", "--node-rank", "1"] and container["env"] == {"NCCL_IB_GID_INDEX": "3"}
    assert result["gpu"] == {"sm_clock_mhz": 2171, "reason": None}
    calls = log.read_text().splitlines()
    assert "docker inspect --type container --format {{json .}} dsv41-karmic-kraken" in calls
    assert "systemctl show -p LoadState -p ActiveState -p UnitFileState -- dgx-fan-control.service" in calls
    assert "nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits" in calls


def test_lab_node_reports_absence_without_failing(run_module: Callable[..., Any], node: Tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    root, log = node
    empty_sys = tmp_path / "empty-sys"
    empty_sys.mkdir()
    failed, result = run_module("spark_doctor", {
        "devices": [str(root / "no-such-nvidia0")], "container": "sparkfleet-missing", "sys_root": str(empty_sys)},
        check_mode=True)
    assert not failed and result["changed"] is False
    assert result["devices"] == {str(root / "no-such-nvidia0"): False}
    assert result["rdma_devices"] == [] and result["efi"] is False
    assert result["nvidia_drm"] == {"modeset": None, "fbdev": None}
    assert result["container"]["exists"] is False and result["container"]["running"] is False
    assert result["gpu"] == {"sm_clock_mhz": None, "reason": "no GPU device node"}
    assert not any(line.startswith("nvidia-smi") for line in log.read_text().splitlines())


def test_no_container_option_inspects_nothing(run_module: Callable[..., Any], node: Tuple[Path, Path]) -> None:
    root, log = node
    failed, result = run_module("spark_doctor", {"devices": [], "units": [], "sys_root": str(root / "sys")},
                                check_mode=True)
    assert not failed and result["container"] == {} and result["units"] == {}
    assert not log.exists() or not any(line.startswith("docker") for line in log.read_text().splitlines())


def test_missing_tools_are_reported_not_raised(run_module: Callable[..., Any], node: Tuple[Path, Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = node
    empty = root / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    failed, result = run_module("spark_doctor", {
        "devices": [str(root / "nvidia0")], "container": "dsv41-karmic-kraken", "sys_root": str(root / "sys")},
        check_mode=True)
    assert not failed, result
    assert [t["tool"] for t in result["missing_tools"]] == ["systemctl", "docker", "nvidia-smi"]
    assert "dsv41-karmic-kraken" in result["missing_tools"][1]["needed_for"]
    failed, result = run_module("spark_doctor", {"devices": [], "units": [], "sys_root": str(root / "sys")},
                                check_mode=True)
    assert not failed and result["missing_tools"] == []
