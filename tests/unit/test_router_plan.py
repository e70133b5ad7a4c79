"""The router's plan: the one host of group spark_router, its port and policy, every serving group's head a
backend; every refusal names the host or group and the variable. One group or several."""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

router = load_source("filter", "sparkfleet_router")

Inventory = tuple[dict[str, dict[str, Any]], dict[str, list[str]]]


def triangle(router_host: str | None = "dgx2", **settings: Any) -> Inventory:
    hostvars = {f"dgx{r + 1}": {"spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": "triangle"}
                for r in range(3)}
    groups: dict[str, list[str]] = {"all": list(hostvars), "spark": list(hostvars)}
    if router_host:
        groups["spark_router"] = [router_host]
        hostvars.setdefault(router_host, {"ansible_host": "10.0.1.90"}).update(settings)
        groups["all"] = sorted(set(groups["all"]) | {router_host})
    return hostvars, groups


def two_groups(**tri_vars: Any) -> Inventory:
    """A ring of four (ring_a) and a triangle (tri_b), the router on a host of its own."""
    hostvars: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {"spark": []}
    for index, (name, topology, size) in enumerate((("ring_a", "ring", 4), ("tri_b", "triangle", 3))):
        groups[name] = [f"{name.replace('_', '-')}{r}" for r in range(size)]
        for rank, host in enumerate(groups[name]):
            hostvars[host] = {"spark_rank": rank, "ansible_host": f"10.0.{index + 1}.{rank + 1}",
                              "spark_topology": topology, **(copy.deepcopy(tri_vars) if name == "tri_b" else {})}
        groups["spark"] += groups[name]
    for hv in hostvars.values():
        hv["spark_serving_groups"] = ["ring_a", "tri_b"]
    hostvars["gateway"] = {"ansible_host": "10.0.9.1", "spark_router_policy": "round_robin"}
    groups["spark_router"] = ["gateway"]
    groups["all"] = groups["spark"] + ["gateway"]
    return hostvars, groups


def test_no_router_group_is_no_router() -> None:
    hostvars, groups = triangle(router_host=None)
    assert router.spark_router_plan(hostvars, groups) is None
    assert router.spark_router_validate(hostvars, groups) == []


def test_one_group_behind_the_router_on_a_worker() -> None:
    assert router.spark_router_plan(*triangle()) == {
        "host": "dgx2", "address": "10.0.1.72", "port": 8080, "policy": "cache_aware", "url": "http://10.0.1.72:8080",
        "model": "deepseek-v4.1-flash", "backends": [{"group": "spark", "host": "dgx1", "url": "http://10.0.1.71:8000"}]}


def test_every_group_head_is_a_backend_in_declared_order() -> None:
    plan = router.spark_router_plan(*two_groups())
    assert plan["url"] == "http://10.0.9.1:8080" and plan["policy"] == "round_robin"
    assert plan["backends"] == [{"group": "ring_a", "host": "ring-a0", "url": "http://10.0.1.1:8000"},
                                {"group": "tri_b", "host": "tri-b0", "url": "http://10.0.2.1:8000"}]


def test_the_management_address_wins_over_ansible_host() -> None:
    plan = router.spark_router_plan(*triangle("dgx3", spark_mgmt_address="192.168.7.3", spark_router_port=9090))
    assert plan["url"] == "http://192.168.7.3:9090"


def test_a_port_from_the_command_line_is_a_number() -> None:
    assert router.spark_router_plan(*triangle(spark_router_port="8081"))["port"] == 8081


@pytest.mark.parametrize("change,expected", [
    (lambda hv, g: g.update(spark_router=["dgx1", "dgx2"]), "group spark_router: one router host, found dgx1, dgx2"),
    (lambda hv, g: hv["dgx2"].update(spark_router_port="80x"),
     "host dgx2: spark_router_port must be an integer port 1-65535, got '80x'"),
    (lambda hv, g: hv["dgx2"].update(spark_router_port=True), "host dgx2: spark_router_port must be an integer port"),
    (lambda hv, g: hv["dgx2"].update(spark_router_port=70000), "got 70000"),
    (lambda hv, g: hv["dgx2"].update(spark_router_policy="least_load"),
     "host dgx2: spark_router_policy must be one of cache_aware, round_robin, power_of_two, random, got 'least_load'"),
    (lambda hv, g: hv["dgx2"].pop("ansible_host"),
     "host dgx2: the router listens on its management address: set spark_mgmt_address or ansible_host"),
    (lambda hv, g: g.update(spark_router=["ghost"]), "group spark_router: host ghost has no variables"),
], ids=["two-hosts", "port-not-a-number", "port-bool", "port-range", "policy", "address", "unknown-host"])
def test_settings_are_refused_naming_host_and_variable(change: Callable[[Any, Any], Any], expected: str) -> None:
    hostvars, groups = triangle()
    change(hostvars, groups)
    errors = router.spark_router_validate(hostvars, groups)
    assert any(expected in e for e in errors), errors
    with pytest.raises(AnsibleFilterError, match="the router cannot be planned"):
        router.spark_router_plan(hostvars, groups)


def test_a_port_the_engine_listens_on_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match=r"host dgx1: spark_router_port 8000 is a port its serving engine "
                                                 r"listens on \(8000, 9999\)"):
        router.spark_router_plan(*triangle("dgx1", spark_router_port=8000))
    # A worker's engine listens on the same ports: the master port too.
    with pytest.raises(AnsibleFilterError, match="host dgx3: spark_router_port 9999"):
        router.spark_router_plan(*triangle("dgx3", spark_router_port=9999))


def test_a_group_without_an_endpoint_is_refused() -> None:
    hostvars, groups = triangle()
    for hv in hostvars.values():
        hv["spark_serve_profile"] = "tp4-r6"    # a ring profile on a triangle: serve refuses it
    with pytest.raises(AnsibleFilterError, match="group spark: serves no endpoint"):
        router.spark_router_plan(hostvars, groups)


def test_groups_serving_different_models_are_refused() -> None:
    with pytest.raises(AnsibleFilterError, match=r"groups ring_a, tri_b: serve different models \(deepseek-v4.1-flash, "
                                                 r"other-model; spark_serve_model_name\)"):
        router.spark_router_plan(*two_groups(spark_serve_model_name="other-model"))


def test_planned_reports_what_plan_raises() -> None:
    assert router.spark_router_planned(*triangle(router_host=None)) == {"plan": None, "errors": []}
    assert router.spark_router_planned(*triangle())["plan"]["url"] == "http://10.0.1.72:8080"
    refused = router.spark_router_planned(*triangle("dgx1", spark_router_port=8000))
    assert refused["plan"] is None and refused["errors"] == [
        "host dgx1: spark_router_port 8000 is a port its serving engine listens on (8000, 9999): choose another"]


def test_rotation_names_the_group_head_in_the_router_calls() -> None:
    assert router.spark_router_rotation(*two_groups(), "tri_b") == {
        "router": "http://10.0.9.1:8080", "worker": "http://10.0.2.1:8000",
        "remove": "http://10.0.9.1:8080/remove_worker?url=http%3A%2F%2F10.0.2.1%3A8000",
        "add": "http://10.0.9.1:8080/add_worker?url=http%3A%2F%2F10.0.2.1%3A8000"}


@pytest.mark.parametrize("inventory,group", [
    (triangle(router_host=None), "spark"),       # no router
    (triangle(), "other"),                        # not one of its backends
    (triangle(spark_router_port="80x"), "spark"),  # a router that cannot be planned: router.yml refuses it
])
def test_no_rotation_without_a_router_that_routes_to_the_group(inventory: Inventory, group: str) -> None:
    assert router.spark_router_rotation(*inventory, group) is None


@pytest.mark.parametrize("text,expected", [
    ('vllm:num_requests_running{engine="0",model_name="m"} 2.0\nvllm:num_requests_waiting{engine="0",model_name="m"} 1.0\n', 3),
    ("# HELP vllm:num_requests_running Number of requests.\nvllm:num_requests_running 0.0\n", 0),
    ('vllm:num_requests_running{engine="0"} 1.0\nvllm:num_requests_running{engine="1"} 1.0\n', 2),
    ("", 0),
])
def test_requests_in_flight_sums_running_and_waiting(text: str, expected: int) -> None:
    assert router.spark_requests_in_flight(text) == expected


def test_requests_in_flight_refuses_what_is_not_metrics_text() -> None:
    with pytest.raises(AnsibleFilterError, match="expected the /metrics text, got NoneType"):
        router.spark_requests_in_flight(None)
