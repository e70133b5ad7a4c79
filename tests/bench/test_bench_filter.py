"""Bench filters: the serving group's endpoint from its site plan, the monitor stream of every rank."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

head = load_source("filter", "sparkfleet_bench").spark_bench_head
site = load_source("filter", "sparkfleet_site_plan")


def site_plan(**group: object) -> dict:
    hostvars = {f"dgx{r + 1}": {"spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": "triangle",
                                **group} for r in range(3)}
    return site.spark_site_plan(hostvars, {"spark": list(hostvars)}, "spark")


def test_the_endpoint_is_the_plans_head() -> None:
    plan = site_plan()
    assert head(plan) == plan["serve"]["head"] and head(plan)["url"] == "http://10.0.1.71:8000"
    assert head(site_plan(spark_serve_api_port=8080))["url"] == "http://10.0.1.71:8080"


@pytest.mark.parametrize("plan,match", [
    ({"topology": "triangle"}, "expected the output of spark_site_plan"),
    (site_plan(spark_serve_profile="tp9"), "the serving settings cannot be read: host dgx1: spark_serve_profile 'tp9'"),
    ({"nodes": [{"host": "dgx1", "rank": 0}], "serve": {"head": None, "error": None}},
     "dgx1: the head .spark_rank 0. serves no profile"),
], ids=["not-a-plan", "unreadable", "no-profile"])
def test_no_endpoint_says_why(plan: dict, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=match):
        head(plan)


target = load_source("filter", "sparkfleet_bench").spark_bench_target
ROUTER = {"url": "http://10.0.1.72:8080"}


def two_groups() -> dict:
    return {"pair_a": site_plan(), "pair_b": site_plan(spark_serve_api_port=8100)}


@pytest.mark.parametrize("plans,router,group,via,expected", [
    ({"spark": site_plan()}, None, "", False, ("http://10.0.1.71:8000", "spark")),
    ({"spark": site_plan()}, ROUTER, "", False, ("http://10.0.1.71:8000", "spark")),
    ({"spark": site_plan()}, ROUTER, "", True, ("http://10.0.1.72:8080", None)),
    (two_groups(), ROUTER, "", False, ("http://10.0.1.72:8080", None)),
    (two_groups(), ROUTER, "pair_b", False, ("http://10.0.1.71:8100", "pair_b")),
    (two_groups(), None, "pair_b", False, ("http://10.0.1.71:8100", "pair_b")),
    ({}, None, "", False, ("", None)),
], ids=["one-group", "one-group-router-not-asked", "asked-router", "several-router", "named-group",
        "named-group-no-router", "no-inventory"])
def test_the_target_is_the_router_the_named_group_or_the_only_one(plans: dict, router: object, group: str, via: bool,
                                                                  expected: tuple) -> None:
    found = target(plans, router, group, via)
    assert (found["url"], found["group"]) == expected
    assert found["head"] == ({} if found["group"] is None else plans[found["group"]]["serve"]["head"])


@pytest.mark.parametrize("plans,router,group,via,match", [
    (two_groups(), None, "", False, r"several serving groups \(pair_a, pair_b\) and no router: name the one to measure"),
    (two_groups(), ROUTER, "pair_c", False, r"spark_bench_group pair_c is not a serving group of the inventory \(pair_a, pair_b\)"),
    ({"spark": site_plan()}, None, "", True, "spark_bench_via_router is true and the inventory has no group spark_router"),
    ({"spark": site_plan()}, None, "", "true", "via_router must be a boolean"),
    ([site_plan()], None, "", False, "expected {group: spark_site_plan}"),
], ids=["several-no-router", "unknown-group", "asked-no-router", "string-switch", "not-plans"])
def test_a_target_it_cannot_choose_says_why(plans: object, router: object, group: str, via: object, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=match):
        target(plans, router, group, via)


monitors = load_source("filter", "sparkfleet_bench").spark_bench_monitors
site_monitors = load_source("filter", "sparkfleet_bench").spark_bench_site_monitors


def _plan(*nodes: tuple[str, int, str, object]) -> dict:
    """A site plan's nodes as spark_site_plan gives them: host, rank, device policy, guard (None: no profile)."""
    return {"nodes": [{"host": host, "rank": rank, "device_policy": policy,
                       "guard": None if steady is None else {"steady_threshold": steady}}
                      for host, rank, policy, steady in nodes]}


def test_monitors_reach_every_rank_as_ansible_does_in_rank_order() -> None:
    hostvars = {
        "dgx2": {"spark_rank": 1, "ansible_host": "10.0.1.72", "ansible_user": "admin", "ansible_port": 2222,
                 "ansible_ssh_private_key_file": "~/.ssh/fleet", "ansible_ssh_common_args": "-o ProxyJump=bastion",
                 "ansible_python_interpreter": "/usr/bin/python3"},
        "dgx1": {"spark_rank": 0, "ansible_host": "10.0.1.71", "ansible_python_interpreter": "auto_silent"},
        "lab1": {"spark_rank": 2, "ansible_connection": "community.docker.docker", "ansible_host": "lab-node-1",
                 "ansible_user": "root"},
        "ctl": {"ansible_connection": "local"},  # not in the plan: not part of the serving group
    }
    plan = _plan(("lab1", 2, "available", None), ("dgx2", 1, "require", "5 GiB"), ("dgx1", 0, "require", "3GiB"))
    got = monitors(plan, hostvars, "1.5")
    assert [m["node"] for m in got] == ["dgx1", "dgx2", "lab1"]
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5"]
    assert got[0] == {"node": "dgx1", "argv": ssh + ["10.0.1.71"], "remote_shell": True, "memory_floor_gib": 4.5,
                      "gpu_required": True, "python": "python3"}
    assert got[1]["argv"] == ssh + ["-p", "2222", "-i", "~/.ssh/fleet", "-o", "ProxyJump=bastion", "admin@10.0.1.72"]
    assert (got[1]["memory_floor_gib"], got[1]["python"]) == (6.5, "/usr/bin/python3")
    # no serving profile: the default steady guard (3 GiB) plus the margin
    assert got[2] == {"node": "lab1", "argv": ["docker", "exec", "-i", "-u", "root", "lab-node-1"],
                      "remote_shell": False, "memory_floor_gib": 4.5, "gpu_required": False, "python": "python3"}
    assert monitors({"nodes": []}, hostvars) == []


@pytest.mark.parametrize("hostvars,margin,match", [
    ({"dgx1": {"spark_rank": 0, "ansible_connection": "winrm"}}, 1,
     "host dgx1: ansible_connection 'winrm' cannot carry the bench monitor stream"),
    ({"dgx1": {"spark_rank": 0}}, "lots", "host dgx1: bench memory floor"),
    ({"dgx1": {"spark_rank": 0}}, -1, "host dgx1: spark_bench_monitor_margin_gib must not be negative"),
    ({"dgx1": {"spark_rank": 0, "ansible_ssh_common_args": "-o 'broken"}}, 1,
     "host dgx1: ansible_ssh_common_args does not parse"),
])
def test_monitor_errors_name_host_and_field(hostvars: dict, margin: object, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=match):
        monitors(_plan(("dgx1", 0, "require", "3GiB")), hostvars, margin)


def test_monitors_need_the_site_plan() -> None:
    with pytest.raises(AnsibleFilterError, match="expected the output of spark_site_plan"):
        monitors({"dgx1": {"spark_rank": 0}}, {})


bench_options = load_source("filter", "sparkfleet_bench").spark_bench_options


@pytest.mark.parametrize("given,typed", [
    ({}, {}),
    ({"concurrency": "1,2", "min_samples": "2", "max_samples": 3, "precision": "1.5", "timeout": 20},
     {"concurrency": [1, 2], "min_samples": 2, "max_samples": 3, "precision": 1.5, "timeout": 20.0}),
    ({"suites": ["full"], "cases": ["json-nothink"], "depths": ["0", "4096"]},
     {"suites": ["full"], "cases": ["json-nothink"], "depths": [0, 4096]}),
])
def test_bench_options_are_typed_as_the_module_types_them(given: dict, typed: dict) -> None:
    assert bench_options(given, "dgx1") == typed


@pytest.mark.parametrize("given,match", [
    ({"min_samples": "1"}, r"min_samples/max_samples: need 2 <= min <= max, got 1/4"),  # judged with the default max
    ({"max_samples": 2}, r"got 3/2"),
    ({"suites": ["decode", "bogus"]}, r"suites: unknown \['bogus'\]"),
    ({"max_tokens": "many"}, r"argument 'max_tokens' is of type str"),
    ({"concurrency": [0]}, r"concurrency: needs positive stream counts"),
    ({"window": "03:00-04:00"}, r"window\. Supported parameters include"),
])
def test_bench_options_errors_name_host_and_option(given: dict, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=r"^dgx1: bad bench settings \(spark_bench_schedule_<option>\): .*" + match):
        bench_options(given, "dgx1", "spark_bench_schedule_")


def test_bench_options_refuse_a_non_mapping() -> None:
    with pytest.raises(AnsibleFilterError, match="dgx1: bench options must be a mapping, got list"):
        bench_options(["suites"], "dgx1")


def test_site_monitors_watch_every_group_group_after_group() -> None:
    hostvars = {h: {"ansible_host": a} for h, a in (("a1", "10.0.3.1"), ("a2", "10.0.3.2"), ("b1", "10.0.4.1"))}
    plans = {"a": _plan(("a2", 1, "require", "3GiB"), ("a1", 0, "require", "3GiB")),
             "b": _plan(("b1", 0, "available", None))}
    assert [m["node"] for m in site_monitors(plans, hostvars)] == ["a1", "a2", "b1"]
    with pytest.raises(AnsibleFilterError, match="expected {group: spark_site_plan}"):
        site_monitors([], hostvars)
