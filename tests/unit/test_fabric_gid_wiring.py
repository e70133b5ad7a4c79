"""The fabric role's GID check, wired as verify.yml wires it: devices and expectations straight from the plan
(spark_fabric_gid_expect of spark_plan_node), run through spark_roce_gid against fixture sysfs trees.
The lab has no RDMA devices, so this is where the real-hardware path of the verification is exercised."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from testlib import load_source
from spark_fixtures import V1, V2, default_slots, gid, link_local, roce_device, sysfs_with_devices

FABRIC = load_source("filter", "sparkfleet_fabric")
VERIFY = load_source("filter", "sparkfleet_fabric_verify")


def _node(host: str) -> dict[str, Any]:
    raw = [{"host": f"dgx{i + 1}", "spark_rank": i, "ansible_host": f"10.0.1.{71 + i}", "spark_topology": "ring"}
           for i in range(4)]
    return FABRIC.spark_plan_node(FABRIC.spark_plan(raw), host)


def _args(node: dict[str, Any], root: Path) -> dict[str, Any]:
    expect = VERIFY.spark_fabric_gid_expect(node)
    return {"sysfs_root": str(root), "devices": [i["rdma"] for i in node["interfaces"]], "expect": expect,
            "gid_index": 3, "fail_on_error": False}


def _healthy(node: dict[str, Any]) -> dict[str, Any]:
    return {i["rdma"]: roce_device(default_slots(i["address"].split("/")[0], i["netdev"]), netdev=i["netdev"])
            for i in node["interfaces"]}


def test_planned_devices_pass_at_index_3(run_module: Any, tmp_path: Path) -> None:
    node = _node("dgx3")
    root = sysfs_with_devices(tmp_path / "sys", _healthy(node))
    failed, result = run_module("spark_roce_gid", _args(node, root))
    assert not failed and result["ok"] is True
    assert {d: v["ipv4"] for d, v in result["devices"].items()} == {
        "rocep1s0f0": "10.34.1.3", "roceP2p1s0f0": "10.34.2.3", "rocep1s0f1": "10.23.1.3", "roceP2p1s0f1": "10.23.2.3"}


def test_moved_gid_is_reported_for_the_host(run_module: Any, tmp_path: Path) -> None:
    node = _node("dgx4")
    devices = _healthy(node)
    moved = {0: (link_local(), V1, "enP2p1s0f1np1"), 1: (link_local(), V2, "enP2p1s0f1np1"),
             4: (gid("10.34.2.4"), V1, "enP2p1s0f1np1"), 5: (gid("10.34.2.4"), V2, "enP2p1s0f1np1")}
    devices["roceP2p1s0f1"] = roce_device(moved, netdev="enP2p1s0f1np1")
    root = sysfs_with_devices(tmp_path / "sys", devices)
    failed, result = run_module("spark_roce_gid", _args(node, root))
    assert not failed and result["ok"] is False
    assert result["devices"]["roceP2p1s0f1"]["index_of_ipv4"] == 5
    assert [d for d, v in result["devices"].items() if not v["ok"]] == ["roceP2p1s0f1"]
    lines = VERIFY.spark_fabric_problems({"dgx4": {"fabric_gid": result}}, ["dgx4"], "fabric_gid")
    assert len(lines) == 1 and lines[0].startswith("dgx4 ") and "roceP2p1s0f1" in lines[0]


def test_wrong_address_in_slot_is_reported(run_module: Any, tmp_path: Path) -> None:
    node = _node("dgx1")
    devices = _healthy(node)
    devices["rocep1s0f0"] = roce_device(default_slots("10.12.1.9", "enp1s0f0np0"), netdev="enp1s0f0np0")
    root = sysfs_with_devices(tmp_path / "sys", devices)
    failed, result = run_module("spark_roce_gid", _args(node, root))
    assert not failed and result["ok"] is False and not result["devices"]["rocep1s0f0"]["ok"]
    assert result["devices"]["rocep1s0f0"]["ipv4"] == "10.12.1.9"
