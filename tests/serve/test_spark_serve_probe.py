"""One-call rank probe: pure parsing (module_utils/spark_serve_probe.py) and the module with stand-in tools."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from spark_fixtures import default_slots, roce_device, sysfs_with_devices

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serve_probe as probe

IMAGE_DOC = {"Id": "sha256:abc", "Config": {"Labels": {"local.spark3.vllm.tree": "20c7c758"}}}


def test_parse_image_present_and_missing() -> None:
    assert probe.parse_image(0, json.dumps(IMAGE_DOC), "") == {
        "present": True, "id": "sha256:abc", "labels": {"local.spark3.vllm.tree": "20c7c758"}, "error": ""}
    missing = probe.parse_image(1, "", "Error: No such image: x:1\n")
    assert missing["present"] is False and missing["error"] == "Error: No such image: x:1"
    assert probe.parse_image(0, json.dumps({"Id": "sha256:d", "Config": {"Labels": None}}), "")["labels"] == {}


def test_parse_runtimes_and_containers() -> None:
    assert probe.parse_runtimes(0, '{"runc": {}, "nvidia": {}}') == ["nvidia", "runc"]
    assert probe.parse_runtimes(1, "") == []
    states = probe.parse_containers("c\trunning\nc-pre-20261129T101010Z\texited\n\n")
    assert probe.container_summary(states, "c") == ("running", ["c-pre-20261129T101010Z"])
    assert probe.container_summary({}, "c") == ("absent", [])


def test_guard_summary_sees_every_leftover() -> None:
    loaded_failed = probe.parse_unit("LoadState=loaded\nActiveState=failed\n")
    assert probe.guard_summary(loaded_failed, False)["present"] is True
    gone = probe.parse_unit("LoadState=not-found\nActiveState=inactive\n")
    assert probe.guard_summary(gone, True)["present"] is True
    assert probe.guard_summary(gone, False)["present"] is False


def test_host_subset_keeps_only_what_serve_compares() -> None:
    facts = {"kernel_release": "6.17.0-1008-nvidia-64k", "page_size": 65536, "page_size_flavour": "64k",
             "uvm_packing": "Y", "driver_running": None, "machine": "aarch64", "kho_off": True,
             "cmdline": "BOOT_IMAGE=/vmlinuz ro kho=off",
             "unavailable": {"driver_running": "nvidia module not loaded", "cmdline": "x"}}
    assert probe.host_subset(facts) == {
        "kernel_release": "6.17.0-1008-nvidia-64k", "page_size": 65536, "page_size_flavour": "64k",
        "uvm_packing": "Y", "driver_running": None, "kho_off": True,
        "unavailable": {"driver_running": "nvidia module not loaded"}}


def test_rank_problems_name_host_thing_and_next_step() -> None:
    image = probe.parse_image(1, "", "No such image")
    problems = probe.rank_problems("dgx2", image, "img:1", ["/models"], ["c-pre-1"], "absent",
                                   ["LISTEN 0 4096 0.0.0.0:8000"], [8000, 9999])
    assert problems == [
        "dgx2: image img:1 is not present (No such image); run playbooks/image.yml",
        "dgx2: bind-mount sources missing: /models (run playbooks/model.yml)",
        "dgx2: stray container(s) c-pre-1 left by an interrupted replace; start the one you want back with "
        "`docker rename` + `docker start`, or remove them with docker rm",
        "dgx2: port 8000 or 9999 is in use but the serving container is not running (LISTEN 0 4096 0.0.0.0:8000); "
        "stop what holds it"]
    present = probe.parse_image(0, json.dumps(IMAGE_DOC), "")
    # Our own running container holds the ports: not a problem.
    assert probe.rank_problems("dgx1", present, "img:1", [], [], "running", ["LISTEN :8000"], [8000]) == []


def test_ss_filter() -> None:
    assert probe.ss_filter([8000, 9999]) == "( sport = :8000 or sport = :9999 )"


def _tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-in docker, ss and systemctl answering like a rank with the image and a stray backup."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "image.json").write_text(json.dumps(IMAGE_DOC))
    _tool(bin_dir, "docker", f"""case "$1" in
  image) cat {tmp_path}/image.json ;;
  info) echo '{{"runc": {{}}}}' ;;
  ps) printf 'c\\texited\\nc-pre-20261129T000000Z\\texited\\n' ;;
esac
""")
    _tool(bin_dir, "ss", "echo 'LISTEN 0 4096 0.0.0.0:8000 0.0.0.0:*'\n")
    _tool(bin_dir, "systemctl", "printf 'LoadState=loaded\\nActiveState=failed\\n'\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "models").mkdir()
    return tmp_path


def test_module_answers_everything_in_one_call(run_module: Any, node: Path) -> None:
    failed, result = run_module("spark_serve_probe", {
        "image": "img:1", "container": "c", "name": "dgx3", "paths": [str(node / "models"), "/dev/no-such-dev"],
        "binds": [str(node / "models"), str(node / "cache")], "ports": [8000, 9999], "state_dir": str(node / "guards")})
    assert not failed and result["changed"] is False
    assert result["image"]["id"] == "sha256:abc" and result["runtimes"] == ["runc"]
    assert result["paths"] == {str(node / "models"): True, "/dev/no-such-dev": False}
    assert result["missing_binds"] == [str(node / "cache")]
    assert result["container"] == "exited" and result["strays"] == ["c-pre-20261129T000000Z"]
    assert result["guard"] == {"load_state": "loaded", "active_state": "failed", "status_file": False, "present": True}
    assert result["host"]["kernel_release"] == os.uname().release
    assert "Max locked memory" in result["proc_limits"] and "CapBnd:" in result["proc_status"]
    assert [p.split(":")[0] for p in result["problems"]] == ["dgx3", "dgx3", "dgx3"]
    assert "cache" in result["problems"][0] and "stray" in result["problems"][1] and "port 8000" in result["problems"][2]


def test_module_reads_the_planned_gids_from_a_sysfs_tree(run_module: Any, node: Path) -> None:
    sysfs = sysfs_with_devices(node / "sys", {
        "rocep1s0f0": roce_device(default_slots("10.12.1.1", "enp1s0f0np0")),
        "roceP2p1s0f0": roce_device(default_slots("10.12.2.9", "enP2p1s0f0np0"))})
    args = {"image": "img:1", "container": "c", "name": "dgx1", "state_dir": str(node / "guards"),
            "sysfs_root": str(sysfs), "gid_expect": {"rocep1s0f0": "10.12.1.1/24", "roceP2p1s0f0": "10.12.2.1/24"}}
    failed, result = run_module("spark_serve_probe", args)
    assert not failed and result["gid"]["rdma_class"] is True and result["gid"]["ok"] is False
    assert result["gid"]["devices"]["rocep1s0f0"]["ok"] is True
    assert "roceP2p1s0f0" in result["gid"]["msg"] and "10.12.2.1" in result["gid"]["msg"]
    failed, result = run_module("spark_serve_probe", dict(args, sysfs_root=str(node / "no-sys")))
    assert not failed and result["gid"] == {"rdma_class": False, "ok": None, "msg": "no RDMA device class", "devices": {}}
    assert result["host"]["kho_off"] in (True, False)
