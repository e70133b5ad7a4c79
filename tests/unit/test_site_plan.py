"""The site plan: one serving group's fabric, every node's files and its serving, computed once from the inventory."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

fabric = load_source("filter", "sparkfleet_fabric")
nccl = load_source("filter", "sparkfleet_nccl")
serve = load_source("filter", "sparkfleet_serve")
site = load_source("filter", "sparkfleet_site_plan")


def hostvars(topology: str, count: int, **group: Any) -> dict[str, dict[str, Any]]:
    return {f"dgx{r + 1}": {"spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": topology, **group}
            for r in range(count)}


def plan_of(hv: dict[str, dict[str, Any]], group: str = "spark") -> dict[str, Any]:
    return site.spark_site_plan(hv, {group: list(hv), "all": list(hv)}, group)


def env_as_serve_built_it(hv: dict[str, dict[str, Any]], host: str) -> dict[str, str]:
    """The serve role's former assembly: overrides and GID index only, neither profile nor traffic class."""
    fabric_plan = fabric.spark_plan(fabric.spark_inventory(hv, list(hv)))
    return nccl.spark_nccl_env(fabric.spark_plan_node(fabric_plan, host), fabric_plan["topology"],
                               len(fabric_plan["nodes"]), hv[host].get("spark_nccl_overrides", {}),
                               hv[host].get("spark_roce_gid_index", 3))


# Each case: (topology, nodes, group settings, NCCL profile, whether serve may launch).
CASES = [
    ("pair", 2, {}, "tp2-direct", False),
    ("triangle", 3, {}, "tp3-triangle", True),
    ("triangle", 3, {"spark_roce_gid_index": 5, "spark_nccl_overrides": {"NCCL_DEBUG": "INFO"}}, "tp3-triangle", True),
    ("ring", 4, {}, "tp4-ring", True),
    ("ring", 5, {}, "ring-nccl-only", False),
    ("switched", 2, {"spark_roce_traffic_class": 96}, "switched", False),
    ("switched", 3, {"spark_nccl_profile": "switched-nccl-only"}, "switched-nccl-only", False),
]
IDS = ["pair", "triangle", "triangle-gid5", "ring4", "ring5", "switched-tc96", "switched-nccl-only"]


@pytest.mark.parametrize("topology,count,group,profile,serves", CASES, ids=IDS)
def test_every_node_carries_its_files_values(topology: str, count: int, group: dict[str, Any], profile: str,
                                             serves: bool) -> None:
    hv = hostvars(topology, count, **group)
    plan = plan_of(hv)
    fabric_plan = fabric.spark_plan(fabric.spark_inventory(hv, list(hv)))
    assert plan["group"] == "spark" and plan["topology"] == topology
    assert site.spark_fabric_plan(plan) == {"group": "spark"} | fabric_plan | {"nodes": plan["nodes"]}
    for node, fabric_node in zip(plan["nodes"], fabric_plan["nodes"]):
        assert {k: node[k] for k in fabric_node} == fabric_node
        assert node["netplan_renderer"] == "NetworkManager" and node["device_policy"] == "require"
        assert node["gid_index"] == group.get("spark_roce_gid_index", 3)
        # Exactly what render.yml computed before the plan existed, profile and traffic class included.
        assert node["nccl"] == {"profile": profile, "env": nccl.spark_nccl_env(
            fabric_node, topology, count, group.get("spark_nccl_overrides", {}), node["gid_index"],
            group.get("spark_nccl_profile"), group.get("spark_roce_traffic_class"))}
    assert (plan["serve"]["refusals"] == []) is serves
    assert plan["serve"]["error"] is None


@pytest.mark.parametrize("topology,count,group,profile,serves", [c for c in CASES if c[4]],
                         ids=[i for i, c in zip(IDS, CASES) if c[4]])
def test_each_serve_spec_carries_the_nodes_collective_environment(topology: str, count: int, group: dict[str, Any],
                                                                  profile: str, serves: bool) -> None:
    hv = hostvars(topology, count, **group)
    plan = plan_of(hv)
    profiles = serve.spark_serve_profiles(hv, list(hv))
    for node in plan["nodes"]:
        spec = plan["serve"]["specs"][node["host"]]
        assert {k: spec["env"][k] for k in node["nccl"]["env"]} == node["nccl"]["env"]
        assert spec == serve.spark_serve_spec(node, plan, profiles[node["host"]], node["nccl"]["env"])
        guard = node["guard"]
        assert guard == {f: profiles[node["host"]][f"guard_{f}"] for f in site.GUARD_FIELDS}


def test_serve_and_the_doctor_read_the_profile_and_traffic_class_render_writes() -> None:
    """serve and the doctor built the NCCL environment without spark_nccl_profile and spark_roce_traffic_class:
    on a switch a serving spec carried the one-shot profile and class 106 while render's nccl.env said
    switched-nccl-only and class 96. (A triangle and a ring of four fit one profile each and no class, which is
    why the shipped inventories' files are unchanged.)"""
    hv = hostvars("switched", 3, spark_nccl_profile="switched-nccl-only", spark_roce_traffic_class=96,
                  spark_serve_profile="tp3-r6-64k")
    plan = plan_of(hv)
    assert "the plan is a switched of 3 nodes" in plan["serve"]["refusals"][0]
    for node in plan["nodes"]:
        spec_env = plan["serve"]["specs"][node["host"]]["env"]
        assert {k: spec_env[k] for k in node["nccl"]["env"]} == node["nccl"]["env"]
        assert spec_env["NCCL_IB_TC"] == "96" and not [k for k in spec_env if k.startswith("SPARKNET_")]
        before = env_as_serve_built_it(hv, node["host"])
        assert (before["NCCL_IB_TC"], before["SPARKNET_ROCE_TOPOLOGY"]) == ("106", "direct")


def test_the_switch_traffic_class_reaches_the_collective_environment() -> None:
    plan = plan_of(hostvars("switched", 2, spark_roce_traffic_class=96))
    for node in plan["nodes"]:
        env = node["nccl"]["env"]
        assert (env["NCCL_IB_TC"], env["SPARKNET_ROCE_TRAFFIC_CLASS"]) == ("96", "96")


def test_a_plan_serve_refuses_lists_why_and_keeps_the_specs_of_named_profiles() -> None:
    pair = plan_of(hostvars("pair", 2))
    assert pair["serve"]["specs"] == {} and [n["guard"] for n in pair["nodes"]] == [None, None]
    assert pair["serve"]["refusals"][0].startswith("topology pair has no serving profile: ")
    # A 64 KiB profile on hosts planned with the 4 KiB kernel: serve refuses, the doctor still checks the specs.
    planned_4k = plan_of(hostvars("triangle", 3, spark_kernel_candidate_release="7.0.0-1019-nvidia"))
    assert "requires the 64k kernel" in planned_4k["serve"]["refusals"][0]
    assert sorted(planned_4k["serve"]["specs"]) == ["dgx1", "dgx2", "dgx3"]


@pytest.mark.parametrize("group,message", [
    ({"spark_serve_overrides": {"env": {"NCCL_DEBUG": "INFO"}}},
     "host dgx1: spark_serve_env.NCCL_DEBUG (INFO) conflicts with the collective environment (WARN)"),
    ({"spark_serve_profile": "tp9"}, "host dgx1: spark_serve_profile 'tp9' is not a serving profile"),
    ({"spark_serve_api_port": "8000"}, "host dgx1: spark_serve_api_port must be a port number 1-65535, got '8000'"),
], ids=["env-conflict", "unknown-profile", "port-as-string"])
def test_a_serving_setting_that_cannot_be_read_is_kept_as_the_plans_error(group: dict[str, Any], message: str) -> None:
    plan = plan_of(hostvars("triangle", 3, **group))
    assert plan["serve"]["error"].startswith(message)
    assert (plan["serve"]["profiles"], plan["serve"]["refusals"], plan["serve"]["specs"]) == ({}, [], {})
    assert len(plan["nodes"]) == 3 and all(n["nccl"]["env"] for n in plan["nodes"])


def test_the_error_is_kept_with_every_secret_of_the_group_redacted() -> None:
    """plan.json and doctor.json are shared and a failed assert prints its message even under no_log: the plan
    itself holds the error redacted, with the secrets any host of the group marks (here only dgx3's)."""
    hv = hostvars("triangle", 3, spark_serve_profile="tp3-sk-live-4242")
    hv["dgx3"]["spark_site_secrets"] = ["tp3-sk-live-4242"]
    error = plan_of(hv)["serve"]["error"]
    assert error.startswith("host dgx1: spark_serve_profile '<redacted>' is not a serving profile")
    assert "sk-live" not in error
    hv["dgx2"]["spark_site_secrets"] = "tp3-sk-live-4242"
    with pytest.raises(AnsibleFilterError, match="spark_site_plan: host dgx2: spark_site_secrets must be a list"):
        plan_of(hv)


@pytest.mark.parametrize("address,port,url", [
    ("10.0.1.71", None, "http://10.0.1.71:8000"),
    ("192.168.9.1", 8080, "http://192.168.9.1:8080"),
], ids=["default", "mgmt-and-port"])
def test_the_head_is_the_endpoint_serve_the_doctor_and_the_bench_ask(address: str, port: int | None, url: str) -> None:
    group = {} if port is None else {"spark_serve_api_port": port}
    hv = hostvars("triangle", 3, **group)
    hv["dgx1"]["spark_mgmt_address"] = address
    plan = plan_of(hv)
    assert plan["serve"]["head"] == {"host": "dgx1", "profile": plan["serve"]["profiles"]["dgx1"]["profile"], "url": url}


def test_no_head_without_a_profile_or_readable_settings() -> None:
    assert plan_of(hostvars("pair", 2))["serve"]["head"] is None
    assert plan_of(hostvars("triangle", 3, spark_serve_profile="tp9"))["serve"]["head"] is None


def test_node_settings_the_inventory_sets_per_host() -> None:
    hv = hostvars("triangle", 3)
    hv["dgx2"] |= {"spark_fabric_netplan_renderer": "networkd", "spark_device_policy": "available"}
    nodes = {n["host"]: n for n in plan_of(hv)["nodes"]}
    assert [nodes[h]["netplan_renderer"] for h in hv] == ["NetworkManager", "networkd", "NetworkManager"]
    assert [nodes[h]["device_policy"] for h in hv] == ["require", "available", "require"]


def test_the_plan_is_of_the_group_it_is_asked_for() -> None:
    hv = hostvars("triangle", 3)
    plan = plan_of(hv, group="inference")
    assert plan["group"] == "inference" and [n["host"] for n in plan["nodes"]] == list(hv)
    with pytest.raises(AnsibleFilterError, match="the inventory has no group 'spark'"):
        site.spark_site_plan(hv, {"inference": list(hv)}, "spark")
    with pytest.raises(AnsibleFilterError, match="the serving group must be a group name, got None"):
        site.spark_site_plan(hv, {"inference": list(hv)}, None)


@pytest.mark.parametrize("change,message", [
    (lambda hv: hv["dgx2"].update(spark_device_policy=True),
     "host dgx2: spark_device_policy must be one of require, available, got True"),
    (lambda hv: hv["dgx3"].update(spark_rank=0), "inventory is invalid:\n  hosts dgx1, dgx3: spark_rank 0 is duplicated"),
    (lambda hv: hv["dgx1"].update(spark_roce_gid_index=300), "host dgx1: spark_roce_gid_index must be an integer 0-255"),
], ids=["device-policy", "rank", "gid-index"])
def test_errors_name_the_host_and_the_field(change: Any, message: str) -> None:
    hv = hostvars("triangle", 3)
    change(hv)
    with pytest.raises(AnsibleFilterError) as err:
        plan_of(hv)
    assert message in str(err.value)


def test_the_fabric_part_is_refused_anything_but_a_plan() -> None:
    with pytest.raises(AnsibleFilterError, match="expected the output of spark_site_plan"):
        site.spark_fabric_plan({"topology": "triangle"})
