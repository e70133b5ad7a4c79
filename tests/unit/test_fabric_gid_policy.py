"""The fabric's GID verdict under the device policy, wired as roles/fabric/tasks/verify.yml wires it: a stat of
/sys/class/infiniband, spark_roce_gid only where it exists, the node's policy through spark_device_policy, then
spark_fabric_gid_verdict, spark_fabric_problems (the failure lines) and spark_fabric_gid_summary (the success
message), against fixture sysfs trees of a Spark with and without its RDMA driver loaded."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source
from spark_fixtures import default_slots, roce_device, sysfs_with_devices, write_tree

FABRIC = load_source("filter", "sparkfleet_fabric")
VERIFY = load_source("filter", "sparkfleet_fabric_verify")
POLICY = load_source("filter", "sparkfleet_policy")
GID_SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def _node(host: str) -> dict[str, Any]:
    raw = [{"host": f"dgx{i + 1}", "spark_rank": i, "ansible_host": f"10.0.1.{71 + i}", "spark_topology": "triangle"}
           for i in range(3)]
    return FABRIC.spark_plan_node(FABRIC.spark_plan(raw), host)


def _planned(node: dict[str, Any]) -> list[str]:
    return [i["rdma"] for i in node["interfaces"]]


def _sysfs_without_rdma(root: Path, node: dict[str, Any]) -> Path:
    """A Spark whose mlx5_ib did not load: the fabric netdevs are there, /sys/class/infiniband is not."""
    return write_tree(root, {"class": {"net": {i["netdev"]: {"mtu": "9000\n"} for i in node["interfaces"]}}})


def _healthy(node: dict[str, Any]) -> dict[str, Any]:
    return {i["rdma"]: roce_device(default_slots(i["address"].split("/")[0], i["netdev"]), netdev=i["netdev"])
            for i in node["interfaces"]}


def _verify(run_module: Any, root: Path, node: dict[str, Any], host: str, policy: Any) -> dict[str, Any]:
    """What verify.yml records as fabric_gid for this node."""
    exists = (root / "class" / "infiniband").is_dir()
    gid_check = GID_SKIPPED
    if exists:
        failed, gid_check = run_module("spark_roce_gid", {
            "sysfs_root": str(root), "devices": _planned(node), "expect": VERIFY.spark_fabric_gid_expect(node),
            "gid_index": 3, "fail_on_error": False})
        assert not failed
    settled = POLICY.spark_device_policy(policy, host)
    return VERIFY.spark_fabric_gid_verdict(gid_check, exists, _planned(node), settled, host)


def test_a_node_without_rdma_devices_fails_verify_under_the_default_policy(run_module: Any, tmp_path: Path) -> None:
    node = _node("dgx2")
    root = _sysfs_without_rdma(tmp_path / "sys", node)
    verdict = _verify(run_module, root, node, "dgx2", None)  # nothing sets the policy: require
    lines = VERIFY.spark_fabric_problems({"dgx2": {"fabric_gid": verdict}}, ["dgx2"], "fabric_gid")
    assert len(lines) == 1, lines
    assert lines[0].startswith("dgx2 no /sys/class/infiniband")
    assert all(device in lines[0] for device in _planned(node)), lines[0]
    assert "spark_device_policy=require" in lines[0]


def test_the_same_node_under_available_is_reported_not_checked(run_module: Any, tmp_path: Path) -> None:
    node = _node("dgx2")
    root = _sysfs_without_rdma(tmp_path / "sys", node)
    verdict = _verify(run_module, root, node, "dgx2", "available")
    hostvars = {"dgx2": {"fabric_gid": verdict}}
    assert VERIFY.spark_fabric_problems(hostvars, ["dgx2"], "fabric_gid") == []
    assert verdict["skipped"] is True and verdict["ok"] is None
    assert "not checked under spark_device_policy=available" in verdict["msg"] and "rocep1s0f0" in verdict["msg"]
    summary = VERIFY.spark_fabric_gid_summary(hostvars, ["dgx2"], "fabric_gid")
    assert summary == "GIDs checked on 0 of 1 nodes; not checked (no RDMA devices, spark_device_policy=available): dgx2"


@pytest.mark.parametrize("policy", ["require", "available"])
def test_a_node_with_its_rdma_devices_is_checked_under_either_policy(run_module: Any, tmp_path: Path, policy: str) -> None:
    node = _node("dgx1")
    root = sysfs_with_devices(tmp_path / "sys", _healthy(node))
    verdict = _verify(run_module, root, node, "dgx1", policy)
    hostvars = {"dgx1": {"fabric_gid": verdict}}
    assert verdict["ok"] is True and not verdict.get("skipped")
    assert VERIFY.spark_fabric_problems(hostvars, ["dgx1"], "fabric_gid") == []
    assert VERIFY.spark_fabric_gid_summary(hostvars, ["dgx1"], "fabric_gid") == "GIDs checked on 1 of 1 nodes"


@pytest.mark.parametrize("policy", ["require", "available"])
def test_a_planned_device_missing_beside_others_fails_under_either_policy(run_module: Any, tmp_path: Path,
                                                                          policy: str) -> None:
    node = _node("dgx3")
    devices = _healthy(node)
    devices.pop("roceP2p1s0f1")
    root = sysfs_with_devices(tmp_path / "sys", devices)
    verdict = _verify(run_module, root, node, "dgx3", policy)
    lines = VERIFY.spark_fabric_problems({"dgx3": {"fabric_gid": verdict}}, ["dgx3"], "fabric_gid")
    assert len(lines) == 1 and lines[0].startswith("dgx3 ") and "roceP2p1s0f1" in lines[0], lines


@pytest.mark.parametrize(("exists", "gid_check", "policy", "skipped", "problems"), [
    (False, GID_SKIPPED, "require", False, 1),
    (False, GID_SKIPPED, "available", True, 0),
    (True, {"ok": True, "problems": []}, "require", None, 0),
    (True, {"ok": False, "problems": ["rocep1s0f0: GID index 3 holds nothing"]}, "available", None, 1),
])
def test_gid_verdict_table(exists: bool, gid_check: dict[str, Any], policy: str, skipped: Any, problems: int) -> None:
    verdict = VERIFY.spark_fabric_gid_verdict(gid_check, exists, ["rocep1s0f0"], policy, "dgx1")
    assert verdict.get("skipped") is skipped or (skipped is None and not verdict.get("skipped"))
    assert len(VERIFY.spark_fabric_problems({"dgx1": {"fabric_gid": verdict}}, ["dgx1"], "fabric_gid")) == problems


def test_gid_verdict_refuses_a_bad_policy_and_a_check_that_did_not_run() -> None:
    with pytest.raises(AnsibleFilterError, match="host dgx1: spark_device_policy must be one of"):
        VERIFY.spark_fabric_gid_verdict(GID_SKIPPED, False, ["rocep1s0f0"], "true", "dgx1")
    with pytest.raises(AnsibleFilterError, match="host dgx1: /sys/class/infiniband exists but the GID check did not run"):
        VERIFY.spark_fabric_gid_verdict(GID_SKIPPED, True, ["rocep1s0f0"], "require", "dgx1")


def test_gid_summary_names_every_unchecked_node() -> None:
    checked = {"ok": True, "problems": []}
    unchecked = VERIFY.spark_fabric_gid_verdict(GID_SKIPPED, False, ["rocep1s0f0"], "available", "x")
    hostvars = {"dgx1": {"g": checked}, "dgx3": {"g": unchecked}, "dgx2": {"g": unchecked}}
    assert VERIFY.spark_fabric_gid_summary(hostvars, ["dgx1", "dgx3", "dgx2"], "g") == (
        "GIDs checked on 1 of 3 nodes; not checked (no RDMA devices, spark_device_policy=available): dgx2, dgx3")
