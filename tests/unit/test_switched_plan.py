"""The switched fabric (hardware-and-fabric.md section 4.4): one /24 per rail shared by every node, and the
inventory refusals that keep a switch plan and a cabled plan apart."""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source, set_all, set_one

fabric = load_source("filter", "sparkfleet_fabric")

RAILS = [("enp1s0f0np0", "rocep1s0f0", 0, 1, "10.100.1"), ("enP2p1s0f0np0", "roceP2p1s0f0", 0, 2, "10.100.2"),
         ("enp1s0f1np1", "rocep1s0f1", 1, 1, "10.101.1"), ("enP2p1s0f1np1", "roceP2p1s0f1", 1, 2, "10.101.2")]


def switched(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"host": f"dgx{r + 1}", "spark_rank": r, "ansible_host": f"10.0.1.{r + 11}",
             "spark_topology": "switched", **copy.deepcopy(extra)} for r in range(count)]


@pytest.mark.parametrize("count", [2, 8, 16])
def test_every_node_has_its_id_as_host_octet_on_every_rail(count: int) -> None:
    plan = fabric.spark_plan(switched(count))
    assert plan["topology"] == "switched"
    assert plan["rails"] == [{"port": port, "path": path, "subnet": f"{net}.0/24"} for _, _, port, path, net in RAILS]
    assert [n["host"] for n in plan["nodes"]] == [f"dgx{r + 1}" for r in range(count)]
    for node in plan["nodes"]:
        n = node["node_id"]
        assert n == node["rank"] + 1 and node["switch_ports"] == [0, 1]
        assert node["interfaces"] == [
            {"netdev": netdev, "rdma": rdma, "port": port, "path": path, "address": f"{net}.{n}/24",
             "subnet": f"{net}.0/24"} for netdev, rdma, port, path, net in RAILS]


def test_a_rail_is_one_subnet_with_every_node_in_it_and_no_peers() -> None:
    plan = fabric.spark_plan(switched(16))
    by_subnet: dict[str, list[str]] = {}
    for node in plan["nodes"]:
        for iface in node["interfaces"]:
            assert not {k for k in iface if k.startswith("peer_")}, iface
            by_subnet.setdefault(iface["subnet"], []).append(iface["address"])
    assert sorted(by_subnet) == ["10.100.1.0/24", "10.100.2.0/24", "10.101.1.0/24", "10.101.2.0/24"]
    for addresses in by_subnet.values():
        assert len(set(addresses)) == 16
    last = fabric.spark_plan_node(plan, "dgx16")
    assert [i["address"] for i in last["interfaces"]] == ["10.100.1.16/24", "10.100.2.16/24", "10.101.1.16/24",
                                                           "10.101.2.16/24"]


def test_node_ids_prefix_ports_and_one_port_on_the_switch() -> None:
    ports = copy.deepcopy(fabric.DEFAULT_PORTS)
    ports[0]["paths"][1]["netdev"] = "eth9"
    raw = switched(3, spark_fabric_prefix=172, spark_fabric_ports=ports, spark_fabric_switch_ports=[0])
    raw[2]["spark_node_id"] = 254
    plan = fabric.spark_plan(raw)
    assert plan["rails"] == [{"port": 0, "path": 1, "subnet": "172.100.1.0/24"},
                             {"port": 0, "path": 2, "subnet": "172.100.2.0/24"}]
    node = plan["nodes"][2]
    assert node["switch_ports"] == [0]
    assert [(i["netdev"], i["address"]) for i in node["interfaces"]] == [
        ("enp1s0f0np0", "172.100.1.254/24"), ("eth9", "172.100.2.254/24")]


def test_switched_netplan_names_the_node_port_and_path() -> None:
    node = fabric.spark_plan_node(fabric.spark_plan(switched(8)), "dgx5")
    eth = fabric.spark_netplan(node)["network"]["ethernets"]
    assert eth["enP2p1s0f1np1"] == {
        "addresses": ["10.101.2.5/24"], "mtu": 9000, "dhcp4": False, "dhcp6": False, "accept-ra": False,
        "link-local": [], "optional": True,
        "networkmanager": {"name": "cx7 dgx5 switch port1 path2", "passthrough": {"ipv6.method": "disabled"}}}
    assert all(e["mtu"] == 9000 for e in fabric.spark_netplan(node, "networkd")["network"]["ethernets"].values())


# --- refusals ----------------------------------------------------------------------------------------


def resize(count: int) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        raw[:] = switched(count)
    return _change


def triangle_with(key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        raw[:] = [dict(e, spark_topology="triangle", **{key: value}) for e in switched(3)]
    return _change


# (name, change to a valid 4-node switched inventory, an expected error)
REFUSED: list[tuple[str, Callable[[list[dict[str, Any]]], None], str]] = [
    # node count
    ("one node", resize(1), "spark_topology switched needs 2-16 hosts in group spark, found 1"),
    ("seventeen nodes", resize(17), "spark_topology switched needs 2-16 hosts in group spark, found 17"),
    # node ids as host octets
    ("node id 0", set_one(1, "spark_node_id", 0),
     "host dgx2: spark_node_id must be within 1-254 (the host octet of every rail address), got 0"),
    ("node id 255", set_one(3, "spark_node_id", 255),
     "host dgx4: spark_node_id must be within 1-254 (the host octet of every rail address), got 255"),
    ("node id duplicated", set_one(3, "spark_node_id", 1), "hosts dgx1, dgx4: spark_node_id 1 is duplicated"),
    ("node id not an integer", set_one(0, "spark_node_id", "12"), "host dgx1: spark_node_id must be an integer, got '12'"),
    # rails
    ("fewer rails on one node", set_one(2, "spark_fabric_switch_ports", [1]),
     "host dgx3: spark_fabric_switch_ports gives 2 rails, host dgx1 4: every node on a switch needs the same rail count"),
    ("other port on one node", lambda raw: [e.update(spark_fabric_switch_ports=[0 if i < 3 else 1])
                                            for i, e in enumerate(raw)],
     "host dgx4: spark_fabric_switch_ports [1] differs from host dgx1's [0]: each rail's subnet belongs to one port"),
    ("no switch port", set_all("spark_fabric_switch_ports", []),
     "host dgx1: spark_fabric_switch_ports must list the QSFP ports cabled to the switch (0, 1 or both, each once), got []"),
    ("unknown port", set_one(1, "spark_fabric_switch_ports", [0, 2]),
     "host dgx2: spark_fabric_switch_ports must list the QSFP ports cabled to the switch"),
    ("port twice", set_all("spark_fabric_switch_ports", [0, 0]),
     "host dgx1: spark_fabric_switch_ports must list the QSFP ports cabled to the switch"),
    ("ports not a list", set_all("spark_fabric_switch_ports", "0,1"),
     "host dgx1: spark_fabric_switch_ports must list the QSFP ports cabled to the switch"),
    # traffic class
    ("traffic class too large", set_all("spark_roce_traffic_class", 256),
     "host dgx1: spark_roce_traffic_class must be an integer 0-255, got 256"),
    ("traffic class string", set_all("spark_roce_traffic_class", "106"),
     "host dgx1: spark_roce_traffic_class must be an integer 0-255, got '106'"),
    ("traffic class differs", set_one(1, "spark_roce_traffic_class", 104),
     "host dgx2: spark_roce_traffic_class 104 differs from host dgx1's 106: it is a cluster-wide setting"),
    # profile against topology
    ("direct profile on a switch", set_all("spark_nccl_profile", "tp3-triangle"),
     "host dgx1: spark_nccl_profile tp3-triangle is for a triangle of 3 nodes, not spark_topology switched with 4 "
     "nodes: use switched or switched-nccl-only"),
    ("ring profile on a switch", set_all("spark_nccl_profile", "tp4-ring"),
     "host dgx1: spark_nccl_profile tp4-ring is for a ring of 4 nodes, not spark_topology switched with 4 nodes"),
    ("switched profile on a triangle", triangle_with("spark_nccl_profile", "switched"),
     "host dgx1: spark_nccl_profile switched is for a switched cluster of 2-16 nodes, not spark_topology triangle "
     "with 3 nodes: use tp3-triangle"),
    ("switched control on a triangle", triangle_with("spark_nccl_profile", "switched-nccl-only"),
     "host dgx1: spark_nccl_profile switched-nccl-only is for a switched cluster of 2-16 nodes"),
    ("unknown profile", set_all("spark_nccl_profile", "oneshot-switched"),
     "host dgx1: spark_nccl_profile must be one of tp2-direct, tp3-triangle, tp4-ring, ring-nccl-only, switched, "
     "switched-nccl-only, got 'oneshot-switched'"),
    ("profile differs", set_one(2, "spark_nccl_profile", "switched-nccl-only"),
     "host dgx3: spark_nccl_profile 'switched-nccl-only' differs from host dgx1's None: it is a cluster-wide setting"),
    # switch settings on a cabled fabric
    ("switch ports on a triangle", triangle_with("spark_fabric_switch_ports", [0]),
     "host dgx1: spark_fabric_switch_ports is only for spark_topology switched (a cabled topology has no switch)"),
    ("traffic class on a triangle", triangle_with("spark_roce_traffic_class", 106),
     "host dgx2: spark_roce_traffic_class is only for spark_topology switched"),
    # what the one-shot transport may not be given on a switch
    ("peer HCA map on a switch", set_all("spark_nccl_overrides", {"SPARKNET_ROCE_PEER_HCAS": '{"1":["rocep1s0f0"]}'}),
     "host dgx1: spark_nccl_overrides: SPARKNET_ROCE_PEER_HCAS must not be set on a switch"),
    ("one-shot route on the NCCL-only control",
     lambda raw: [e.update(spark_nccl_profile="switched-nccl-only", spark_nccl_overrides={"SPARKNET_ROCE_HCA": "x"})
                  for e in raw],
     "host dgx1: spark_nccl_overrides: SPARKNET_ROCE_HCA must not be set with switched-nccl-only"),
]


@pytest.mark.parametrize("change,expected", [pytest.param(c, e, id=name) for name, c, e in REFUSED])
def test_validate_refuses(change: Callable[[list[dict[str, Any]]], None], expected: str) -> None:
    raw = switched(4)
    change(raw)
    errors = fabric.spark_validate(raw)
    assert any(expected in e for e in errors), errors
    with pytest.raises(AnsibleFilterError, match="inventory is invalid"):
        fabric.spark_plan(raw)


@pytest.mark.parametrize("values", [
    {"spark_nccl_profile": "switched"},
    {"spark_nccl_profile": "switched-nccl-only", "spark_roce_traffic_class": 0},
    {"spark_fabric_switch_ports": [1, 0], "spark_roce_traffic_class": 255},
    {"spark_nccl_overrides": {"NCCL_IB_TIMEOUT": 22, "SPARKNET_ROCE_HCA": "rocep1s0f0"}},
], ids=["profile", "control", "ports-any-order", "overrides"])
def test_usable_switch_settings_pass(values: dict[str, Any]) -> None:
    assert fabric.spark_validate(switched(4, **values)) == []


def test_node_ids_up_to_254_are_usable_and_cabled_topologies_keep_1_to_9() -> None:
    raw = switched(2)
    raw[0]["spark_node_id"], raw[1]["spark_node_id"] = 10, 254
    assert fabric.spark_validate(raw) == []
    cabled = [dict(e, spark_topology="pair") for e in raw]
    assert "host dgx1: spark_node_id must be within 1-9, got 10" in fabric.spark_validate(cabled)


def test_sixteen_nodes_pass_and_the_plan_lists_every_one() -> None:
    assert fabric.spark_validate(switched(16)) == []
    assert len(fabric.spark_plan(switched(16))["nodes"]) == 16
