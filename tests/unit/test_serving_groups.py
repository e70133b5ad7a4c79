"""Several serving groups in one inventory: each validated and planned as a one-group inventory is, the refusals only
several groups can need (each naming host or group and the variable), and one-group inventories unchanged."""
from __future__ import annotations

import copy
import re
from typing import Any, Callable

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

fabric = load_source("filter", "sparkfleet_fabric")
site = load_source("filter", "sparkfleet_site_plan")
serving = load_source("filter", "sparkfleet_serving_groups")
declaration = load_source("module_utils", "spark_serving_groups")

Inventory = tuple[dict[str, dict[str, Any]], dict[str, list[str]]]


def inventory(*shapes: tuple[str, str, int], **group_vars: dict[str, Any]) -> Inventory:
    """hostvars and groups of serving groups (name, topology, size); hosts <name with - for _><n>, ranks 0..n-1, every Spark
    in group spark and spark_serving_groups naming the groups in order. group_vars: extra settings per group."""
    hostvars: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {"all": [], "ungrouped": [], "spark": []}
    for index, (name, topology, size) in enumerate(shapes):
        groups[name] = [f"{name.replace('_', '-')}{r + 1}" for r in range(size)]
        for rank, host in enumerate(groups[name]):
            hostvars[host] = {"spark_rank": rank, "ansible_host": f"10.0.{index + 1}.{rank + 1}",
                              "spark_topology": topology, **copy.deepcopy(group_vars.get(name, {}))}
        groups["spark"] += groups[name]
    for hv in hostvars.values():
        hv["spark_serving_groups"] = [name for name, _, _ in shapes]
    groups["all"] = list(groups["spark"])
    return hostvars, groups


def lone(hostvars: dict[str, dict[str, Any]], groups: dict[str, list[str]], name: str) -> dict[str, Any]:
    """The plan of group `name` as an inventory of that group alone would have it (as group spark)."""
    hosts = groups[name]
    hv = {h: {k: v for k, v in hostvars[h].items() if k != "spark_serving_groups"} for h in hosts}
    return site.spark_site_plan(hv, {"all": hosts, "spark": hosts}, "spark")


def triangle() -> Inventory:
    hostvars = {f"dgx{r + 1}": {"spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": "triangle"}
                for r in range(3)}
    return hostvars, {"all": list(hostvars), "spark": list(hostvars)}


# --- one serving group: exactly as before -----------------------------------------------------------------

@pytest.mark.parametrize("declared", [None, ["spark"]], ids=["unset", "spark"])
@pytest.mark.parametrize("change,expected", [
    (lambda hv: None, []),
    (lambda hv: hv["dgx3"].update(spark_rank=5), ["spark_rank must be exactly 0..2 (one per host), got [0, 1, 5]"]),
    (lambda hv: [h.update(spark_topology="ring") for h in hv.values()],
     ["spark_topology ring needs 4-9 hosts in group spark, found 3"]),
], ids=["valid", "ranks", "size"])
def test_one_group_is_validated_and_planned_as_before(declared: Any, change: Callable[[Any], Any],
                                                      expected: list[str]) -> None:
    hostvars, groups = triangle()
    change(hostvars)
    if declared is not None:
        for hv in hostvars.values():
            hv["spark_serving_groups"] = declared
    raw = fabric.spark_inventory(hostvars, groups["spark"])
    assert serving.spark_serving_validate(hostvars, groups) == fabric.spark_validate(raw) == expected
    assert declaration.group_spark_refusal(hostvars, groups) == ""
    if not expected:
        plans = serving.spark_serving_plans(hostvars, groups)
        assert plans == {"spark": site.spark_site_plan(hostvars, groups, "spark")}
        layout = serving.spark_render_layout(plans)
        assert [(u["group"], u["dir"], u["serve"]) for u in layout] == [("spark", "", True)]
        assert layout[0]["directories"] == ["dgx1", "dgx2", "dgx3"]
        assert layout[0]["files"] == fabric.spark_render_files(plans["spark"], True)


def test_an_inventory_without_sparks_is_the_one_clear_line() -> None:
    assert serving.spark_serving_validate({}, {"all": []}) == [
        "group spark has no hosts: the inventory defines no cluster node"]


# --- several groups: each planned as it would be alone ----------------------------------------------------

MIXED = {
    "ring-and-triangle": (("ring_a", "ring", 4), ("tri_b", "triangle", 3)),
    "ring-and-switched": (("ring_a", "ring", 4), ("sw_b", "switched", 3)),
    "two-rings": (("ring_a", "ring", 4), ("ring_b", "ring", 4)),
    "three-triangles": (("t1", "triangle", 3), ("t2", "triangle", 3), ("t3", "triangle", 3)),
}


@pytest.mark.parametrize("shapes", MIXED.values(), ids=MIXED.keys())
def test_every_group_is_planned_as_an_inventory_of_it_alone(shapes: tuple[tuple[str, str, int], ...]) -> None:
    hostvars, groups = inventory(*shapes)
    assert serving.spark_serving_validate(hostvars, groups) == []
    assert serving.spark_serving_groups(hostvars, groups) == [name for name, _, _ in shapes]
    plans = serving.spark_serving_plans(hostvars, groups)
    assert list(plans) == [name for name, _, _ in shapes]
    for name, topology, size in shapes:
        plan = plans[name]
        assert (plan["group"], plan["topology"], len(plan["nodes"])) == (name, topology, size)
        assert [n["rank"] for n in plan["nodes"]] == list(range(size))
        assert plan | {"group": "spark"} == lone(hostvars, groups, name)


def test_cabled_groups_restart_their_node_ids_and_reuse_cable_subnets() -> None:
    """A cable subnet exists on its two ports only and cables never cross groups, so two rings may both use
    10.12.1.0/24: each host sees only its own cables."""
    hostvars, groups = inventory(("ring_a", "ring", 4), ("ring_b", "ring", 4))
    plans = serving.spark_serving_plans(hostvars, groups)
    assert [n["node_id"] for n in plans["ring_a"]["nodes"]] == [n["node_id"] for n in plans["ring_b"]["nodes"]] == [1, 2, 3, 4]
    first = {i["subnet"] for i in plans["ring_a"]["nodes"][0]["interfaces"]}
    assert first == {i["subnet"] for i in plans["ring_b"]["nodes"][0]["interfaces"]}
    assert "10.12.1.0/24" in first


@pytest.mark.parametrize("size", [2, 8, 16])
def test_a_switched_group_beside_a_ring_gets_the_switched_plan(size: int) -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("sw_b", "switched", size))
    assert serving.spark_serving_validate(hostvars, groups) == []
    plan = serving.spark_serving_plans(hostvars, groups)["sw_b"]
    assert plan["topology"] == "switched" and len(plan["nodes"]) == size
    assert [r["subnet"] for r in plan["rails"]] == ["10.100.1.0/24", "10.100.2.0/24", "10.101.1.0/24", "10.101.2.0/24"]
    for node in plan["nodes"]:
        assert [i["address"] for i in node["interfaces"]] == [
            f"10.{100 + port}.{path}.{node['node_id']}/24" for port in (0, 1) for path in (1, 2)]
        assert all("peer_host" not in i for i in node["interfaces"])


def test_fabric_plans_hold_every_group_without_its_serving_part() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("sw_b", "switched", 2))
    plans = serving.spark_fabric_plans(hostvars, groups)
    assert list(plans) == ["ring_a", "sw_b"]
    for name, plan in plans.items():
        assert plan == site.spark_fabric_plan(serving.spark_serving_plans(hostvars, groups)[name])
        assert "serve" not in plan and [n["host"] for n in plan["nodes"]] == groups[name]


def test_fabric_plans_of_one_group_are_group_spark() -> None:
    hostvars, groups = triangle()
    assert serving.spark_fabric_plans(hostvars, groups) == {
        "spark": site.spark_fabric_plan(site.spark_site_plan(hostvars, groups, "spark"))}


def switched_pair(ids_b: list[int] | None = None, **group_vars: dict[str, Any]) -> Inventory:
    """Two switched groups of eight; group sw_b's node ids given, or the default 1..8 (colliding with sw_a's)."""
    hostvars, groups = inventory(("sw_a", "switched", 8), ("sw_b", "switched", 8), **group_vars)
    for host, node_id in zip(groups["sw_b"], ids_b or []):
        hostvars[host]["spark_node_id"] = node_id
    return hostvars, groups


@pytest.mark.parametrize("ids_b,group_vars", [
    (list(range(9, 17)), {}),
    ([100 + r for r in range(8)], {}),
    (None, {"sw_b": {"spark_fabric_prefix": 11}}),
    (None, {"sw_a": {"spark_fabric_switch_ports": [0]}, "sw_b": {"spark_fabric_switch_ports": [1]}}),
], ids=["ids-9-16", "ids-100-107", "own-prefix", "a-port-each"])
def test_switched_groups_share_a_switch_without_sharing_an_address(ids_b: list[int] | None,
                                                                   group_vars: dict[str, dict[str, Any]]) -> None:
    hostvars, groups = switched_pair(ids_b, **group_vars)
    assert serving.spark_serving_validate(hostvars, groups) == []


def test_switched_groups_sharing_rails_refuse_one_host_octet_for_two_hosts() -> None:
    hostvars, groups = switched_pair([3] + list(range(10, 17)))
    assert serving.spark_serving_validate(hostvars, groups) == [
        "hosts sw-a3 (group sw_a), sw-b1 (group sw_b): spark_node_id 3 gives each the rail address 10.100.1.3 on "
        "the switch: switched groups sharing rails need distinct node ids (or their own spark_fabric_prefix)"]


# --- refusals ---------------------------------------------------------------------------------------------

def declare(value: Any) -> Callable[[Inventory], None]:
    def _change(inv: Inventory) -> None:
        for hv in inv[0].values():
            hv["spark_serving_groups"] = copy.deepcopy(value)
    return _change


def add_group(name: str, hosts: list[str]) -> Callable[[Inventory], None]:
    def _change(inv: Inventory) -> None:
        inv[1][name] = hosts
    return _change


def add_spark(host: str, in_spark: bool = True, **hv: Any) -> Callable[[Inventory], None]:
    def _change(inv: Inventory) -> None:
        inv[0][host] = {"spark_rank": 0, "ansible_host": "10.0.9.9", "spark_topology": "triangle",
                        "spark_serving_groups": ["ring_a", "tri_b"], **hv}
        if in_spark:
            inv[1]["spark"].append(host)
    return _change


def set_host(host: str, **values: Any) -> Callable[[Inventory], None]:
    return lambda inv: inv[0][host].update(values)


def set_group(name: str, **values: Any) -> Callable[[Inventory], None]:
    return lambda inv: [inv[0][h].update(copy.deepcopy(values)) for h in inv[1][name]]


def both(*changes: Callable[[Inventory], None]) -> Callable[[Inventory], None]:
    return lambda inv: [c(inv) for c in changes]


REFUSALS = {
    "host-in-two-groups": (add_group("tri_b", ["tri-b1", "tri-b2", "tri-b3", "ring-a4"]),
                           "host ring-a4: in serving groups ring_a, tri_b (spark_serving_groups): a Spark serves in one group"),
    "spark-in-no-group": (add_spark("spare1"),
                          "host spare1: in group spark but in no serving group (spark_serving_groups: ring_a, tri_b): "
                          "list it in one, or take it out of group spark"),
    "serving-host-not-a-spark": (both(add_spark("stray1", in_spark=False), add_group("tri_b", ["tri-b1", "tri-b2", "tri-b3", "stray1"])),
                                 "host stray1: in serving group tri_b but not in group spark (spark_serving_groups): "
                                 "every serving host is a Spark of group spark"),
    "unknown-group": (declare(["ring_a", "tri_b", "nope"]), "spark_serving_groups: group nope is not defined by the inventory"),
    "empty-group": (both(add_group("idle", []), declare(["ring_a", "tri_b", "idle"])),
                    "spark_serving_groups: group idle has no hosts"),
    "spark-beside-others": (declare(["spark", "ring_a"]),
                            "spark_serving_groups: lists group spark beside other groups; spark holds every Spark, a "
                            "serving group the hosts of one engine"),
    "reserved-name": (declare(["ring_a", "tri_b", "all"]), "spark_serving_groups: 'all' cannot be a serving group"),
    "not-a-directory-name": (both(add_group("ring-a", ["ring-a1"]), declare(["ring-a", "tri_b"])),
                             "spark_serving_groups: 'ring-a' cannot be a serving group (letters, digits and _"),
    "not-a-list": (declare("ring_a,tri_b"), "host ring-a1: spark_serving_groups must be a non-empty list of group "
                                            "names, each once, got 'ring_a,tri_b'"),
    "empty-list": (declare([]), "host ring-a1: spark_serving_groups must be a non-empty list of group names, each once, got []"),
    "twice": (declare(["ring_a", "ring_a", "tri_b"]), "host ring-a1: spark_serving_groups must be a non-empty list"),
    "differs-between-hosts": (set_host("tri-b2", spark_serving_groups=["tri_b"]),
                              "host tri-b2: spark_serving_groups ['tri_b'] differs from host ring-a1's ['ring_a', 'tri_b']: "
                              "it is an inventory-wide setting (set it for group spark or all)"),
    "ranks-not-0-to-n-1": (set_host("tri-b3", spark_rank=3),
                           "spark_rank must be exactly 0..2 (one per host of group tri_b), got [0, 1, 3]"),
    "rank-duplicated": (set_host("ring-a4", spark_rank=0), "hosts ring-a1, ring-a4: spark_rank 0 is duplicated"),
    "topology-size": (set_group("tri_b", spark_topology="ring"), "spark_topology ring needs 4-9 hosts in group tri_b, found 3"),
    "topology-differs-in-group": (set_host("ring-a2", spark_topology="triangle"),
                                  "host ring-a2: spark_topology 'triangle' differs from host ring-a1's 'ring'"),
    "profile-size": (set_group("tri_b", spark_serve_profile="tp4-r6"),
                     "group tri_b, host tri-b1: spark_serve_profile does not fit the group: profile tp4-r6 is for a "
                     "ring of 4 nodes, the plan is a triangle of 3 nodes"),
    "profile-tp-size": (set_group("ring_a", spark_serve_overrides={"args": {"--tensor-parallel-size": 3}}),
                        "group ring_a, host ring-a1: spark_serve_profile does not fit the group: profile tp4-r6d-1m: "
                        "--tensor-parallel-size must appear once with the node count 4, found ['3']"),
    "mgmt-address-across-groups": (set_host("tri-b1", ansible_host="10.0.1.1"),
                                   "hosts ring-a1 (group ring_a), tri-b1 (group tri_b): spark_mgmt_address 10.0.1.1 is "
                                   "duplicated across serving groups"),
    "host-field-in-a-group": (set_host("tri-b2", spark_roce_gid_index=300),
                              "host tri-b2: spark_roce_gid_index must be an integer 0-255"),
}


@pytest.mark.parametrize("change,expected", REFUSALS.values(), ids=REFUSALS.keys())
def test_validation_refuses_naming_host_or_group_and_field(change: Callable[[Inventory], None], expected: str) -> None:
    inv = inventory(("ring_a", "ring", 4), ("tri_b", "triangle", 3))
    change(inv)
    errors = serving.spark_serving_validate(*inv)
    assert any(e.startswith(expected) for e in errors), errors
    assert len(errors) == len(set(errors)), "each error once"


def test_a_host_in_two_groups_has_each_of_its_own_errors_once() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("tri_b", "triangle", 3))
    groups["tri_b"].append("ring-a4")
    hostvars["ring-a4"]["spark_roce_gid_index"] = -1
    errors = serving.spark_serving_validate(hostvars, groups)
    assert [e for e in errors if e.startswith("host ring-a4: spark_roce_gid_index must")] == [
        "host ring-a4: spark_roce_gid_index must be an integer 0-255 (the RoCE GID table of a ConnectX-7 port), got -1"]


def test_an_invalid_declaration_is_raised_where_the_groups_are_read() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("tri_b", "triangle", 3))
    declare(["ring_a", "nope"])((hostvars, groups))
    with pytest.raises(AnsibleFilterError, match="group nope is not defined by the inventory"):
        serving.spark_serving_plans(hostvars, groups)


# --- group spark has no plan of its own among several groups -------------------------------------------------

def test_group_spark_has_no_plan_in_an_inventory_of_several_groups() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("tri_b", "triangle", 3))
    with pytest.raises(AnsibleFilterError, match=re.escape(
            "spark_site_plan: This inventory declares serving groups (spark_serving_groups: ring_a, tri_b): group spark "
            "holds every Spark, not one engine, and has no plan of its own.")):
        site.spark_site_plan(hostvars, groups, "spark")
    # A serving group's own plan is what every stage uses.
    assert site.spark_site_plan(hostvars, groups, "tri_b")["group"] == "tri_b"


def test_an_invalid_declaration_leaves_group_spark_without_a_plan_too() -> None:
    hostvars, groups = triangle()
    declare("spark")((hostvars, groups))
    with pytest.raises(AnsibleFilterError, match="spark_serving_groups: an invalid list"):
        site.spark_site_plan(hostvars, groups, "spark")


# --- where render writes ---------------------------------------------------------------------------------------

def test_render_writes_a_directory_per_group() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("sw_b", "switched", 2))
    layout = serving.spark_render_layout(serving.spark_serving_plans(hostvars, groups))
    assert [(u["group"], u["dir"], u["serve"]) for u in layout] == [("ring_a", "ring_a/", True), ("sw_b", "sw_b/", False)]
    assert layout[1]["directories"] == ["sw_b", "sw_b/sw-b1", "sw_b/sw-b2"]
    assert layout[1]["files"] == ["sw_b/plan.json", "sw_b/sw-b1/netplan.yaml", "sw_b/sw-b1/nccl.env",
                                  "sw_b/sw-b2/netplan.yaml", "sw_b/sw-b2/nccl.env"]
    assert layout[0]["files"][:2] == ["ring_a/plan.json", "ring_a/ring-a1/netplan.yaml"]
    assert "ring_a/ring-a4/serve.json" in layout[0]["files"]


def test_render_layout_refuses_what_is_not_a_set_of_plans() -> None:
    with pytest.raises(AnsibleFilterError, match="expected the output of spark_serving_plans"):
        serving.spark_render_layout({})


# --- one group at a time: the serving plays' batches ------------------------------------------------------

@pytest.mark.parametrize("play,expected", [
    (None, [("ring_a", ["ring-a1", "ring-a2", "ring-a3", "ring-a4"]), ("tri_b", ["tri-b1", "tri-b2", "tri-b3"])]),
    (["tri-b3", "ring-a2", "tri-b1"], [("ring_a", ["ring-a2"]), ("tri_b", ["tri-b1", "tri-b3"])]),
    (["tri-b2"], [("tri_b", ["tri-b2"])]),
    ([], []),
], ids=["all", "limited", "one-group-left", "none"])
def test_batches_split_the_play_by_group_in_declared_order(play: list[str] | None,
                                                           expected: list[tuple[str, list[str]]]) -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("tri_b", "triangle", 3))
    hosts = groups["spark"] if play is None else play
    assert [(b["group"], b["hosts"]) for b in serving.spark_serving_batches(hostvars, groups, hosts)] == expected
    for batch in serving.spark_serving_batches(hostvars, groups, hosts):
        assert {serving.spark_serving_group_of(hostvars, groups, h) for h in batch["hosts"]} == {batch["group"]}


def test_one_group_is_one_batch_of_group_spark() -> None:
    hostvars, groups = triangle()
    assert serving.spark_serving_batches(hostvars, groups, ["dgx3", "dgx1", "dgx2"]) == [
        {"group": "spark", "hosts": ["dgx1", "dgx2", "dgx3"]}]
    assert serving.spark_serving_group_of(hostvars, groups, "dgx2") == "spark"


def test_batches_refuse_what_they_cannot_split() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("tri_b", "triangle", 3))
    with pytest.raises(AnsibleFilterError, match="expected the play's host names, got 'ring-a1'"):
        serving.spark_serving_batches(hostvars, groups, "ring-a1")
    with pytest.raises(AnsibleFilterError, match="host elsewhere is in no serving group .spark_serving_groups: "
                                                 "ring_a, tri_b."):
        serving.spark_serving_group_of(hostvars, groups, "elsewhere")
    hostvars["tri-b1"]["spark_serving_groups"] = ["tri_b"]
    with pytest.raises(AnsibleFilterError, match="the serving groups are invalid"):
        serving.spark_serving_batches(hostvars, groups, groups["spark"])


def test_site_fabric_holds_every_spark_group_after_group() -> None:
    hostvars, groups = inventory(("ring_a", "ring", 4), ("sw_b", "switched", 2))
    plans = serving.spark_fabric_plans(hostvars, groups)
    assert serving.spark_site_fabric(hostvars, groups) == {"nodes": plans["ring_a"]["nodes"] + plans["sw_b"]["nodes"]}
    hostvars, groups = triangle()
    assert serving.spark_site_fabric(hostvars, groups)["nodes"] == site.spark_site_plan(hostvars, groups, "spark")["nodes"]


GROUP_REPORT_CASES = [
    # (hosts' variables, files, failed)
    ([], [], []),
    ([{"r": {"ok": True}, "f": "a/x.json"}, {"r": {"ok": True}, "f": "a/x.json"}], ["a/x.json"], []),
    ([{"r": {"ok": True}, "f": "a/x.json"}, {"r": {"ok": False}, "f": "b/x.json"}, {"r": {"ok": False}, "f": "b/x.json"},
      {"other": 1}], ["a/x.json", "b/x.json"], ["b/x.json"]),
    ([{"r": {}, "f": "c.json"}], ["c.json"], ["c.json"]),  # no verdict is no pass
]


@pytest.mark.parametrize(("hosts", "files", "failed"), GROUP_REPORT_CASES)
def test_group_reports_list_each_report_once_and_the_failed_ones(hosts: list[dict[str, Any]], files: list[str],
                                                                 failed: list[str]) -> None:
    assert serving.spark_group_reports(hosts, "r", "f", "ok") == {"files": files, "failed": failed}


@pytest.mark.parametrize(("hosts", "match"), [
    ({"r": {}}, "expected a list of host variables, got dict"),
    ([{"inventory_hostname": "dgx2", "r": "bad", "f": "x"}], "host dgx2: r must be a mapping written to f"),
    ([{"inventory_hostname": "dgx3", "r": {"ok": True}}], "host dgx3: r must be a mapping written to f"),
])
def test_group_reports_refuse_what_is_not_a_report(hosts: Any, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=match):
        serving.spark_group_reports(hosts, "r", "f", "ok")
