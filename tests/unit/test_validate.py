"""Every validation error of the inventory contract names the host and the variable."""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

fabric = load_source("filter", "sparkfleet_fabric")


def triangle() -> list[dict[str, Any]]:
    return [{"host": f"dgx{r + 1}", "spark_rank": r, "ansible_host": f"10.0.1.{71 + r}",
             "spark_topology": "triangle"} for r in range(3)]


def mutate(change: Callable[[list[dict[str, Any]]], None]) -> list[str]:
    raw = triangle()
    change(raw)
    return fabric.spark_validate(raw)


def set_all(key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        for e in raw:
            e[key] = copy.deepcopy(value)
    return _change


def set_one(index: int, key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        raw[index][key] = value
    return _change


def broken_ports(raw: list[dict[str, Any]]) -> None:
    ports = copy.deepcopy(fabric.DEFAULT_PORTS)
    del ports[1]["paths"][1]
    ports[0]["paths"][0].pop("rdma")
    for e in raw:
        e["spark_fabric_ports"] = copy.deepcopy(ports)


def test_valid_inventory_has_no_errors() -> None:
    assert fabric.spark_validate(triangle()) == []


@pytest.mark.parametrize("change,expected", [
    (set_all("spark_topology", "mesh"), "host dgx1: spark_topology must be one of pair, triangle, ring, got 'mesh'"),
    (set_all("spark_topology", "ring"), "spark_topology ring needs 4-9 hosts in group spark, found 3"),
    (set_all("spark_topology", "pair"), "spark_topology pair needs 2 hosts in group spark, found 3"),
    (set_one(2, "spark_rank", 1), "hosts dgx2, dgx3: spark_rank 1 is duplicated"),
    (set_one(2, "spark_rank", 5), "spark_rank must be exactly 0..2 (one per host), got [0, 1, 5]"),
    (set_one(1, "spark_rank", "1"), "host dgx2: spark_rank must be an integer, got '1'"),
    (set_one(1, "spark_rank", True), "host dgx2: spark_rank must be an integer, got True"),
    (lambda raw: raw[0].pop("spark_rank"), "host dgx1: spark_rank is not set"),
    (set_one(0, "spark_node_id", "x"), "host dgx1: spark_node_id must be an integer, got 'x'"),
    (set_one(0, "spark_node_id", 10), "host dgx1: spark_node_id must be within 1-9, got 10"),
    (set_one(0, "spark_node_id", 2), "hosts dgx1, dgx2: spark_node_id 2 is duplicated"),
    (set_one(1, "ansible_host", "10.0.1.71"), "hosts dgx1, dgx2: spark_mgmt_address 10.0.1.71 is duplicated"),
    (set_one(1, "spark_mgmt_address", "10.0.1.999"), "host dgx2: spark_mgmt_address must be an IPv4 address"),
    (lambda raw: raw[1].pop("ansible_host"), "host dgx2: spark_mgmt_address (or ansible_host) is not set"),
    (set_all("spark_fabric_prefix", 300), "host dgx1: spark_fabric_prefix must be a first octet 1-223"),
    (set_all("spark_fabric_prefix", 127), "host dgx3: spark_fabric_prefix must be a first octet 1-223 (not 127)"),
    (set_all("spark_fabric_prefix", "ten"), "host dgx2: spark_fabric_prefix must be a first octet"),
    (set_one(0, "spark_fabric_prefix", 11), "spark_fabric_prefix differs between hosts"),
    (broken_ports, "host dgx1: spark_fabric_ports port 1 must define paths 1 and 2, found [1]"),
    (broken_ports, "host dgx1: spark_fabric_ports port 0 path 1 is missing 'rdma'"),
    (set_all("spark_fabric_ports", [fabric.DEFAULT_PORTS[0]]), "host dgx1: spark_fabric_ports must define ports 0 and 1"),
    (set_all("spark_fabric_ports", {"0": {}}), "host dgx1: spark_fabric_ports must be a list of ports"),
    (set_all("spark_mgmt_interface", "enp1s0f0np0"), "host dgx1: spark_mgmt_interface enp1s0f0np0 is also a fabric netdev"),
    (set_all("spark_mgmt_interface", ""), "host dgx1: spark_mgmt_interface must be an interface name"),
])
def test_each_error_names_host_and_variable(change: Callable[[list[dict[str, Any]]], None], expected: str) -> None:
    errors = mutate(change)
    assert any(expected in e for e in errors), errors


def test_duplicate_device_names_in_the_port_table() -> None:
    ports = copy.deepcopy(fabric.DEFAULT_PORTS)
    ports[1]["paths"][0]["netdev"] = "enp1s0f0np0"
    errors = mutate(set_all("spark_fabric_ports", ports))
    assert any("names a device twice: enp1s0f0np0" in e for e in errors), errors


def test_empty_group() -> None:
    assert fabric.spark_validate([]) == ["group spark has no hosts"]


def test_all_errors_are_reported_at_once() -> None:
    def several(raw: list[dict[str, Any]]) -> None:
        raw[0]["spark_node_id"] = 0
        raw[1]["spark_mgmt_address"] = "nope"
    assert len(mutate(several)) == 2


def test_plan_refuses_invalid_inventory_with_every_error() -> None:
    raw = triangle()
    raw[0]["spark_rank"] = "zero"
    with pytest.raises(AnsibleFilterError) as exc:
        fabric.spark_plan(raw)
    assert "host dgx1: spark_rank must be an integer" in str(exc.value)


def test_validate_rejects_wrong_input_type() -> None:
    with pytest.raises(AnsibleFilterError, match="expected the output of spark_inventory"):
        fabric.spark_validate("dgx1")
