"""Path probes, live-state drift and the fabric role's report filters.

Ping and `ip -j address` outputs were captured in a scratch lab triangle (iputils 20221126, fabric prefix 11)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_fabric_probe import (
    LinkState, fabric_drift, link_drift, parse_ip_address, parse_ping, path_verdict, ping_command)
from testlib import ROOT, load_source

FIXTURES = ROOT / "tests/unit/fixtures/fabric"
PATH = {"netdev": "enp1s0f0np0", "peer_host": "dgx2", "peer_netdev": "enp1s0f1np1", "peer_address": "11.12.1.2"}
VERIFY = load_source("filter", "sparkfleet_fabric_verify")
FABRIC = load_source("filter", "sparkfleet_fabric")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- ping ------------------------------------------------------------------------------------------

def test_parse_jumbo_ok() -> None:
    r = parse_ping(fixture("ping-8972-ok.txt"))
    assert (r.transmitted, r.received, r.errors, r.local_error) == (2, 2, 0, None)
    assert r.rtt_avg_ms is not None and 0 < r.rtt_min_ms <= r.rtt_avg_ms <= r.rtt_max_ms < 50
    assert r.all_received and not r.none_received


def test_parse_oversize_refused_locally() -> None:
    r = parse_ping(fixture("ping-8973-too-long.txt"))
    assert (r.transmitted, r.received, r.errors) == (2, 0, 2)
    assert r.local_error == "message too long, mtu=9000" and r.rtt_avg_ms is None and r.none_received


def test_parse_lost() -> None:
    r = parse_ping(fixture("ping-8972-lost.txt"))
    assert (r.transmitted, r.received, r.errors, r.local_error) == (2, 0, 0, None) and not r.all_received


def test_parse_garbage() -> None:
    with pytest.raises(ValueError, match="no ping statistics"):
        parse_ping("ping: SO_BINDTODEVICE enp1s0f0np0: No such device\n")


def test_ping_command_is_df_and_bound() -> None:
    assert ping_command("/bin/ping", "enp1s0f0np0", "10.12.1.2", 8972, 2, 1) == [
        "/bin/ping", "-M", "do", "-s", "8972", "-c", "2", "-W", "1", "-i", "0.2", "-I", "enp1s0f0np0", "10.12.1.2"]


def test_path_verdicts() -> None:
    ok, big, lost = (parse_ping(fixture(f)) for f in ("ping-8972-ok.txt", "ping-8973-too-long.txt", "ping-8972-lost.txt"))
    good = path_verdict(PATH, ok, big, 8972)
    assert good["ok"] and good["oversize_refused"] is True and good["rtt_ms"] == ok.rtt_avg_ms
    broken = path_verdict(PATH, lost, big, 8972)
    assert not broken["ok"] and broken["problems"] == ["8972-byte DF ping: 0/2 answered"]
    # An answered 8973-byte probe means the MTU is larger than planned somewhere.
    too_big = path_verdict(PATH, ok, ok, 8972)
    assert not too_big["ok"] and too_big["problems"] == [
        "8973-byte DF ping was answered: the path MTU is above 9000"]
    assert path_verdict(PATH, ok, None, 8972)["oversize_refused"] is None


# --- live state and drift -------------------------------------------------------------------------

def test_parse_ip_address_capture() -> None:
    live = parse_ip_address(fixture("ip-addr-dgx1-configured.json"))
    assert live["enp1s0f0np0"] == LinkState("enp1s0f0np0", 9000, "UP", ["11.12.1.1/24"], [])
    assert live["enP7s7"].ipv4 == ["10.0.9.71/24"]


def test_no_drift_on_the_captured_node() -> None:
    plan = [{"netdev": n, "address": a} for n, a in (
        ("enp1s0f0np0", "11.12.1.1/24"), ("enP2p1s0f0np0", "11.12.2.1/24"),
        ("enp1s0f1np1", "11.13.1.1/24"), ("enP2p1s0f1np1", "11.13.2.1/24"))]
    drift = fabric_drift(plan, parse_ip_address(fixture("ip-addr-dgx1-configured.json")))
    assert drift["ok"] and drift["differences"] == []
    assert set(drift["interfaces"]) == {p["netdev"] for p in plan}


def test_every_kind_of_drift_is_named() -> None:
    want = {"netdev": "enp1s0f0np0", "address": "10.12.1.1/24"}
    have = LinkState("enp1s0f0np0", 1500, "DOWN", ["10.12.1.9/24"], ["fe80::42:aff:fe0c:101/64"])
    assert link_drift(want, have) == [
        "enp1s0f0np0: MTU 1500, plan 9000",
        "enp1s0f0np0: IPv4 10.12.1.9/24, plan 10.12.1.1/24",
        "enp1s0f0np0: IPv6 addresses fe80::42:aff:fe0c:101/64, plan has IPv6 off (no link-local)",
        "enp1s0f0np0: link is DOWN",
    ]
    assert link_drift(want, None) == ["enp1s0f0np0: netdev is missing"]
    assert link_drift(want, LinkState("enp1s0f0np0", 9000, "UP", [], [])) == [
        "enp1s0f0np0: IPv4 none, plan 10.12.1.1/24"]


# --- modules --------------------------------------------------------------------------------------

def _fake(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[list[str]]:
    from ansible.module_utils import basic
    calls: list[list[str]] = []

    def run_command(self: Any, args: list[str], **_: Any) -> tuple[int, str, str]:
        calls.append(args)
        return answer(args)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: f"/bin/{name}")
    return calls


def _pinger(lost_to: str = "") -> Any:
    def answer(args: list[str]) -> tuple[int, str, str]:
        size, address = args[args.index("-s") + 1], args[-1]
        if size == "8973":
            return 1, fixture("ping-8973-too-long.txt"), ""
        if address == lost_to:
            return 1, fixture("ping-8972-lost.txt"), ""
        return 0, fixture("ping-8972-ok.txt"), ""
    return answer


def test_paths_module_all_pass(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake(monkeypatch, _pinger())
    other = dict(PATH, netdev="enp1s0f1np1", peer_host="dgx3", peer_netdev="enp1s0f0np0", peer_address="11.13.1.3")
    failed, result = run_module("spark_fabric_paths", {"paths": [PATH, other]}, check_mode=True)
    assert not failed and result["ok"] and result["changed"] is False
    assert [p["peer_address"] for p in result["paths"]] == ["11.12.1.2", "11.13.1.3"]
    assert [c[c.index("-s") + 1] for c in calls] == ["8972", "8973", "8972", "8973"]


def test_paths_module_names_the_broken_path(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, _pinger(lost_to="11.12.1.2"))
    failed, result = run_module("spark_fabric_paths", {"paths": [PATH]})
    assert failed and result["msg"] == ("enp1s0f0np0 -> dgx2:enp1s0f1np1 (11.12.1.2): "
                                        "8972-byte DF ping: 0/2 answered")


def test_paths_module_rejects_a_path_without_address(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake(monkeypatch, _pinger())
    failed, result = run_module("spark_fabric_paths", {"paths": [{"netdev": "enp1s0f0np0"}]})
    assert failed and result["msg"] == "paths[0] is missing peer_address" and calls == []


def test_state_module_reports_drift(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake(monkeypatch, lambda args: (0, fixture("ip-addr-dgx1-configured.json"), ""))
    iface = [{"netdev": "enp1s0f0np0", "address": "11.12.1.1/24"}]
    failed, result = run_module("spark_fabric_state", {"interfaces": iface}, check_mode=True)
    assert not failed and result["ok"] and result["changed"] is False
    assert calls == [["/bin/ip", "-j", "address", "show"]]
    wrong = [{"netdev": "enp1s0f0np0", "address": "11.12.1.7/24"}, {"netdev": "enp9s0", "address": "11.9.9.1/24"}]
    failed, result = run_module("spark_fabric_state", {"interfaces": wrong})
    assert not failed and not result["ok"] and result["differences"] == [
        "enp1s0f0np0: IPv4 11.12.1.1/24, plan 11.12.1.7/24", "enp9s0: netdev is missing"]
    failed, result = run_module("spark_fabric_state", {"interfaces": wrong, "fail_on_error": True})
    assert failed


# --- role filters ---------------------------------------------------------------------------------

def _plan(topology: str, count: int) -> dict[str, Any]:
    raw = [{"host": f"dgx{i + 1}", "spark_rank": i, "ansible_host": f"10.0.1.{71 + i}", "spark_topology": topology}
           for i in range(count)]
    return FABRIC.spark_plan(raw)


@pytest.mark.parametrize(("topology", "count", "order"), [
    ("pair", 2, ["dgx2", "dgx1"]), ("triangle", 3, ["dgx2", "dgx3", "dgx1"]),
    ("ring", 4, ["dgx2", "dgx3", "dgx4", "dgx1"])])
def test_apply_order_workers_then_head(topology: str, count: int, order: list[str]) -> None:
    assert VERIFY.spark_fabric_apply_order(_plan(topology, count)) == order


def test_apply_order_rejects_non_plan() -> None:
    with pytest.raises(AnsibleFilterError):
        VERIFY.spark_fabric_apply_order({})


def test_expectations_come_from_the_plan() -> None:
    node = FABRIC.spark_plan_node(_plan("triangle", 3), "dgx2")
    assert VERIFY.spark_fabric_lldp_expect(node) == {
        "enp1s0f0np0": {"host": "dgx3", "port": "enp1s0f1np1"},
        "enP2p1s0f0np0": {"host": "dgx3", "port": "enP2p1s0f1np1"},
        "enp1s0f1np1": {"host": "dgx1", "port": "enp1s0f0np0"},
        "enP2p1s0f1np1": {"host": "dgx1", "port": "enP2p1s0f0np0"}}
    assert VERIFY.spark_fabric_gid_expect(node) == {
        "rocep1s0f0": "10.23.1.2/24", "roceP2p1s0f0": "10.23.2.2/24",
        "rocep1s0f1": "10.12.1.2/24", "roceP2p1s0f1": "10.12.2.2/24"}


def test_cable_probes_are_the_planned_interfaces() -> None:
    plan = _plan("triangle", 3)
    assert VERIFY.spark_fabric_probe_paths(plan, "dgx2") == FABRIC.spark_plan_node(plan, "dgx2")["interfaces"]


def test_switch_probes_reach_every_other_node_on_each_rail() -> None:
    probes = VERIFY.spark_fabric_probe_paths(_plan("switched", 3), "dgx2")
    rails = {"enp1s0f0np0": "10.100.1", "enP2p1s0f0np0": "10.100.2", "enp1s0f1np1": "10.101.1",
             "enP2p1s0f1np1": "10.101.2"}
    assert sorted((p["netdev"], p["peer_host"], p["peer_netdev"], p["peer_address"]) for p in probes) == sorted(
        (netdev, peer, netdev, f"{prefix}.{node_id}") for netdev, prefix in rails.items()
        for peer, node_id in (("dgx1", 1), ("dgx3", 3)))


@pytest.mark.parametrize(("plan", "host", "expected"), [
    ({}, "dgx1", "expected a plan with nodes"),
    ({"topology": "switched", "nodes": [{"host": "dgx1", "interfaces": []}]}, "dgx9", "host dgx9 is not a node"),
], ids=["no-plan", "foreign-host"])
def test_probe_paths_refuse_what_they_cannot_read(plan: dict[str, Any], host: str, expected: str) -> None:
    with pytest.raises(AnsibleFilterError, match=expected):
        VERIFY.spark_fabric_probe_paths(plan, host)


def test_matrix_one_line_per_path_and_problems() -> None:
    ok = path_verdict(PATH, parse_ping(fixture("ping-8972-ok.txt")), parse_ping(fixture("ping-8973-too-long.txt")), 8972)
    bad = path_verdict(dict(PATH, netdev="enP2p1s0f0np0", peer_netdev="enP2p1s0f1np1", peer_address="11.12.2.2"),
                       parse_ping(fixture("ping-8972-lost.txt")), None, 8972)
    hostvars = {"dgx1": {"spark_fabric_paths": {"ok": False, "paths": [ok, bad]}}}
    rows = VERIFY.spark_fabric_path_matrix(hostvars, ["dgx1"], "spark_fabric_paths")
    text = VERIFY.spark_fabric_matrix_json(rows, {"size": 8972})
    lines = text.splitlines()
    assert len(lines) == 4 and json.loads(lines[1].rstrip(","))["netdev"] == "enP2p1s0f0np0"
    doc = json.loads(text)
    assert doc["size"] == 8972 and [p["ok"] for p in doc["paths"]] == [False, True]
    assert VERIFY.spark_fabric_path_problems(rows) == [
        "dgx1 enP2p1s0f0np0 -> dgx2:enP2p1s0f1np1 (11.12.2.2): 8972-byte DF ping: 0/2 answered"]
    assert json.loads(VERIFY.spark_fabric_matrix_json([], {"size": 1}))["paths"] == []


def test_problems_per_host_skip_skipped_checks() -> None:
    hostvars = {
        "dgx1": {"lldp": {"ok": False, "problems": ["enp1s0f0np0: no LLDP neighbour"]},
                 "gid": {"skipped": True, "ok": None, "msg": "no /sys/class/infiniband"}},
        "dgx2": {"lldp": {"ok": True, "problems": []},
                 "gid": {"ok": False, "msg": "rocep1s0f0: GID index 3 holds ..."}},
    }
    assert VERIFY.spark_fabric_problems(hostvars, ["dgx1", "dgx2"], "lldp") == ["dgx1 enp1s0f0np0: no LLDP neighbour"]
    assert VERIFY.spark_fabric_problems(hostvars, ["dgx1", "dgx2"], "gid") == ["dgx2 rocep1s0f0: GID index 3 holds ..."]
    with pytest.raises(AnsibleFilterError, match="host dgx3: no lldp result"):
        VERIFY.spark_fabric_problems({"dgx3": {}}, ["dgx3"], "lldp")
