"""plugins/modules/spark_roce_gid.py against fixture sysfs trees in the kernel's exact formats."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_fixtures import V1, V2, default_slots, gid, link_local, roce_device, sysfs_with_devices

DEV0, NET0, ADDR0 = "rocep1s0f0", "enp1s0f0np0", "10.12.1.1"
DEV1, NET1, ADDR1 = "roceP2p1s0f0", "enP2p1s0f0np0", "10.12.2.1"
DEV2, NET2, ADDR2 = "rocep1s0f1", "enp1s0f1np1", "10.13.1.1"


def _args(root: Path, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"sysfs_root": str(root), "devices": [DEV0], "expect": {DEV0: ADDR0 + "/24"}}
    args.update(extra)
    return args



@pytest.fixture
def healthy(tmp_path: Path) -> Path:
    return sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(default_slots(ADDR0, NET0), netdev=NET0)})


def test_ok_at_index_3(run_module: Any, healthy: Path) -> None:
    failed, result = run_module("spark_roce_gid", _args(healthy))
    assert not failed and result["ok"] is True and result["changed"] is False
    assert result["devices"][DEV0] == {
        "ok": True, "gid": "0000:0000:0000:0000:0000:ffff:0a0c:0101", "type": "RoCE v2", "ipv4": ADDR0,
        "ndev": NET0, "index_of_ipv4": 3, "problem": None}
    assert result["msg"] == "All 1 RDMA device(s) hold the IPv4 RoCE v2 GID at index 3."
    assert result["gid_index"] == 3 and result["port"] == 1


def test_check_mode_same_result(run_module: Any, healthy: Path) -> None:
    normal = run_module("spark_roce_gid", _args(healthy))
    checked = run_module("spark_roce_gid", _args(healthy), check_mode=True)
    assert checked == normal and checked[1]["changed"] is False


def test_moved_to_index_4(run_module: Any, tmp_path: Path) -> None:
    # Link flap while RDMA held the old entry: slot 3 is still in use by a stale v1 copy, v2 re-filed at 4.
    slots = {0: (link_local(), V1, NET0), 1: (link_local(), V2, NET0),
             2: (gid(ADDR0), V1, NET0), 4: (gid(ADDR0), V2, NET0)}
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(slots, netdev=NET0)})
    failed, result = run_module("spark_roce_gid", _args(root))
    dev = result["devices"][DEV0]
    assert failed and result["ok"] is False and result["changed"] is False
    assert dev["ok"] is False and dev["index_of_ipv4"] == 4 and dev["gid"] is None
    assert dev["problem"].startswith(f"GID index 3 of {DEV0} port 1 is empty.")
    assert "It sits at index 4 (the GID moved): stop serving, re-activate enp1s0f0np0" in dev["problem"]
    assert "`netplan apply` of that interface" in dev["problem"] and "nothing uses RDMA" in dev["problem"]
    assert "re-check that index 3 holds it" in dev["problem"]
    assert DEV0 in result["msg"] and "index 4" in result["msg"]


def test_roce_v1_in_slot(run_module: Any, tmp_path: Path) -> None:
    slots = {0: (link_local(), V1, NET0), 1: (link_local(), V2, NET0),
             3: (gid(ADDR0), V1, NET0), 4: (gid(ADDR0), V2, NET0)}
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(slots)})
    failed, result = run_module("spark_roce_gid", _args(root))
    dev = result["devices"][DEV0]
    assert failed and dev["type"] == "IB/RoCE v1" and dev["ipv4"] == ADDR0 and dev["index_of_ipv4"] == 4
    assert f"holds a IB/RoCE v1 entry for {ADDR0}; NCCL needs the RoCE v2 entry." in dev["problem"]


def test_link_local_in_slot(run_module: Any, tmp_path: Path) -> None:
    # An unaddressed twin advertises only fe80:: GIDs.
    slots = {i: (link_local(), (V1, V2)[i % 2], NET0) for i in range(4)}
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(slots)})
    failed, result = run_module("spark_roce_gid", _args(root))
    dev = result["devices"][DEV0]
    assert failed and dev["ipv4"] is None and dev["index_of_ipv4"] is None
    assert dev["gid"].startswith("fe80:")
    assert f"holds the link-local GID {link_local()}" in dev["problem"]
    assert f"No slot of {DEV0} holds the IPv4-mapped RoCE v2 GID of {ADDR0}" in dev["problem"]


def test_ipv6_global_in_slot(run_module: Any, tmp_path: Path) -> None:
    v6 = "2001:0db8:0012:0001:0000:0000:0000:0001"
    slots = {0: (link_local(), V1, NET0), 1: (link_local(), V2, NET0), 2: (v6, V1, NET0), 3: (v6, V2, NET0),
             4: (gid(ADDR0), V1, NET0), 5: (gid(ADDR0), V2, NET0)}
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(slots)})
    failed, result = run_module("spark_roce_gid", _args(root))
    dev = result["devices"][DEV0]
    assert failed and dev["gid"] == v6 and dev["index_of_ipv4"] == 5
    assert f"holds the IPv6 GID {v6}" in dev["problem"] and "It sits at index 5" in dev["problem"]


def test_empty_slot_and_no_ipv4(run_module: Any, tmp_path: Path) -> None:
    slots = {0: (link_local(), V1, NET0), 1: (link_local(), V2, NET0)}
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(slots)})
    failed, result = run_module("spark_roce_gid", _args(root))
    dev = result["devices"][DEV0]
    assert failed and dev["gid"] is None and dev["type"] is None and dev["index_of_ipv4"] is None
    assert dev["problem"].startswith(f"GID index 3 of {DEV0} port 1 is empty. No slot of {DEV0} holds")


def test_missing_device(run_module: Any, healthy: Path) -> None:
    failed, result = run_module("spark_roce_gid", _args(healthy, devices=[DEV0, DEV1]))
    assert failed and result["devices"][DEV0]["ok"] is True
    missing = result["devices"][DEV1]
    assert missing["ok"] is False and missing["gid"] is None
    assert missing["problem"] == (f"RDMA device {DEV1} is missing "
                                  f"({healthy}/class/infiniband/{DEV1} does not exist).")
    assert "failed on 1 of 2 device(s)" in result["msg"]


def test_missing_port(run_module: Any, healthy: Path) -> None:
    failed, result = run_module("spark_roce_gid", _args(healthy, port=2))
    assert failed and f"{DEV0} has no port 2" in result["devices"][DEV0]["problem"]


def test_outside_planned_subnet(run_module: Any, tmp_path: Path) -> None:
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(default_slots("10.12.9.1", NET0))})
    failed, result = run_module("spark_roce_gid", {"sysfs_root": str(root), "devices": [DEV0],
                                                   "subnets": {DEV0: "10.12.1.0/24"}})
    dev = result["devices"][DEV0]
    assert failed and dev["ipv4"] == "10.12.9.1" and dev["index_of_ipv4"] is None
    assert "holds 10.12.9.1, outside the planned subnet 10.12.1.0/24." in dev["problem"]


def test_without_expect_any_ipv4_v2_passes(run_module: Any, tmp_path: Path) -> None:
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(default_slots("10.77.3.9", NET0))})
    failed, result = run_module("spark_roce_gid", {"sysfs_root": str(root), "devices": [DEV0]})
    assert not failed and result["devices"][DEV0]["ipv4"] == "10.77.3.9"


def test_several_devices_mixed(run_module: Any, tmp_path: Path) -> None:
    moved = {0: (link_local(), V1, NET2), 1: (link_local(), V2, NET2), 2: (gid(ADDR2), V1, NET2),
             3: (gid("10.13.1.9"), V2, NET2), 6: (gid(ADDR2), V2, NET2)}
    root = sysfs_with_devices(tmp_path / "sys", {
        DEV0: roce_device(default_slots(ADDR0, NET0)),
        DEV1: roce_device(default_slots(ADDR1, NET1)),
        DEV2: roce_device(moved, table_size=16),
    })
    args = {"sysfs_root": str(root), "devices": [DEV0, DEV1, DEV2, "rocep9s0f0"],
            "expect": {DEV0: ADDR0, DEV1: ADDR1 + "/24", DEV2: ADDR2}, "subnets": {DEV0: "10.12.1.0/24"}}
    failed, result = run_module("spark_roce_gid", args)
    devices = result["devices"]
    assert failed and [devices[d]["ok"] for d in args["devices"]] == [True, True, False, False]
    assert devices[DEV1]["gid"].endswith("0a0c:0201")
    assert devices[DEV2]["ipv4"] == "10.13.1.9" and devices[DEV2]["index_of_ipv4"] == 6
    assert "holds 10.13.1.9, not the expected 10.13.1.1" in devices[DEV2]["problem"]
    assert "re-activate enp1s0f1np1" in devices[DEV2]["problem"]
    assert result["msg"].startswith("GID index 3 check failed on 2 of 4 device(s): ")
    assert f"{DEV2}: " in result["msg"] and "rocep9s0f0: RDMA device rocep9s0f0 is missing" in result["msg"]


def test_other_gid_index(run_module: Any, tmp_path: Path) -> None:
    slots = {4: (gid(ADDR0), V2, NET0)}
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device(slots)})
    failed, result = run_module("spark_roce_gid", _args(root, gid_index=4))
    assert not failed and result["devices"][DEV0]["index_of_ipv4"] == 4


def test_fail_on_error_false_returns_not_ok(run_module: Any, tmp_path: Path) -> None:
    root = sysfs_with_devices(tmp_path / "sys", {DEV0: roce_device({4: (gid(ADDR0), V2, NET0)})})
    failed, result = run_module("spark_roce_gid", _args(root, fail_on_error=False))
    assert not failed and result["ok"] is False and result["changed"] is False
    assert result["devices"][DEV0]["index_of_ipv4"] == 4
    checked = run_module("spark_roce_gid", _args(root, fail_on_error=False), check_mode=True)
    assert checked == (failed, result)


def test_read_only(run_module: Any, healthy: Path) -> None:
    def snapshot() -> dict[str, tuple[float, bytes]]:
        return {str(p): (p.stat().st_mtime, p.read_bytes()) for p in healthy.rglob("*") if p.is_file()}

    before = snapshot()
    run_module("spark_roce_gid", _args(healthy))
    assert snapshot() == before


@pytest.mark.parametrize(("extra", "words"), [
    ({"expect": {DEV0: "10.12.1.1/24"}, "subnets": {DEV0: "10.12.2.0/24"}}, f"device {DEV0}: expect"),
    ({"expect": {"rocep7s0f0": "10.12.1.1"}}, "expect names device(s) not in devices: rocep7s0f0"),
    ({"subnets": {DEV0: "10.12.1.1/33"}}, f"device {DEV0}"),
    ({"gid_index": -1}, "gid_index >= 0"),
])
def test_bad_input_is_refused_before_reading(run_module: Any, tmp_path: Path, extra: dict, words: str) -> None:
    failed, result = run_module("spark_roce_gid", _args(tmp_path / "does-not-exist", **extra))
    assert failed and words in result["msg"] and "devices" not in result
