"""LLDP parsing and the cabling comparison, on lldpctl -f json0 output captured in a scratch lab triangle
(lldpd 1.0.16, `portidsubtype ifname`): healthy, and with dgx2's path-1 netdevs of port 0 and 1 swapped.

On a real ConnectX-7 every port hears both PCIe functions of the far port (hardware-and-fabric §7), so lldpctl
lists two neighbours per local interface. The lldp-cx7-*-twins fixtures are the captured output with the far
twin's entry added the way lldpctl prints a second neighbour: another "interface" object of the same name and
remote id, whose port is the far port's other function."""
from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_lldp import (
    Neighbour, Peer, compare_cabling, parse_expect, parse_lldpctl_json0, pcie_path)
from testlib import ROOT

FIXTURES = ROOT / "tests/unit/fixtures/fabric"
# The planned neighbours of dgx2 (rank 1) in the triangle (hardware-and-fabric 4.1).
DGX2 = {
    "enp1s0f0np0": Peer("dgx3", "enp1s0f1np1"), "enP2p1s0f0np0": Peer("dgx3", "enP2p1s0f1np1"),
    "enp1s0f1np1": Peer("dgx1", "enp1s0f0np0"), "enP2p1s0f1np1": Peer("dgx1", "enP2p1s0f0np0"),
}
DGX1 = {
    "enp1s0f0np0": Peer("dgx2", "enp1s0f1np1"), "enP2p1s0f0np0": Peer("dgx2", "enP2p1s0f1np1"),
    "enp1s0f1np1": Peer("dgx3", "enp1s0f0np0"), "enP2p1s0f1np1": Peer("dgx3", "enP2p1s0f0np0"),
}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_parse_captured_output() -> None:
    seen = parse_lldpctl_json0(fixture("lldp-triangle-dgx2-ok.json"))
    assert sorted(seen) == sorted(DGX2)
    assert seen["enp1s0f1np1"] == [Neighbour(system="dgx1", port="enp1s0f0np0", port_id="enp1s0f0np0",
                                             port_id_type="ifname", port_descr="enp1s0f0np0")]


def test_healthy_cabling_passes() -> None:
    verdict = compare_cabling(DGX2, parse_lldpctl_json0(fixture("lldp-triangle-dgx2-ok.json")))
    assert verdict["ok"] and verdict["problems"] == [] and verdict["swapped"] == []
    assert all(p["ok"] for p in verdict["ports"].values())


def test_swapped_ports_are_named_both() -> None:
    verdict = compare_cabling(DGX2, parse_lldpctl_json0(fixture("lldp-triangle-dgx2-swapped.json")))
    assert not verdict["ok"]
    assert verdict["swapped"] == [["enp1s0f0np0", "enp1s0f1np1"]]
    assert verdict["problems"] == [
        "enp1s0f0np0: neighbour is dgx1:enp1s0f0np0, plan says dgx3:enp1s0f1np1; "
        "it carries the cable planned for enp1s0f1np1",
        "enp1s0f1np1: neighbour is dgx3:enp1s0f1np1, plan says dgx1:enp1s0f0np0; "
        "it carries the cable planned for enp1s0f0np0",
        "ports enp1s0f0np0 and enp1s0f1np1 are swapped (each carries the other's planned cable)",
    ]
    assert verdict["ports"]["enP2p1s0f0np0"]["ok"] and verdict["ports"]["enP2p1s0f1np1"]["ok"]


def test_peer_of_a_swapped_node_names_the_far_port() -> None:
    verdict = compare_cabling(DGX1, parse_lldpctl_json0(fixture("lldp-triangle-dgx1-peer-swapped.json")))
    assert verdict["problems"] == ["enp1s0f0np0: neighbour is dgx2:enp1s0f0np0, plan says dgx2:enp1s0f1np1"]
    assert verdict["swapped"] == []


def test_missing_and_extra_neighbours() -> None:
    one = Neighbour("dgx3", "enp1s0f1np1", "enp1s0f1np1", "ifname", "enp1s0f1np1")
    stale = Neighbour("dgx1", "enp1s0f0np0", "enp1s0f0np0", "ifname", "enp1s0f0np0")
    verdict = compare_cabling({"enp1s0f0np0": DGX2["enp1s0f0np0"], "enp1s0f1np1": DGX2["enp1s0f1np1"]},
                              {"enp1s0f0np0": [one, stale]})
    assert verdict["problems"] == [
        "enp1s0f0np0: 2 LLDP neighbours on its PCIe path (dgx3:enp1s0f1np1, dgx1:enp1s0f0np0), "
        "plan says only dgx3:enp1s0f1np1",
        "enp1s0f1np1: no LLDP neighbour, plan says dgx1:enp1s0f0np0 (cable unplugged, link down or lldpd stopped there)",
    ]


# --- both PCIe functions of the far port ---------------------------------------------------------

TWINS_SWAPPED = [
    "enp1s0f0np0: neighbour is dgx1:enp1s0f0np0, plan says dgx3:enp1s0f1np1; "
    "it carries the cable planned for enp1s0f1np1",
    "enP2p1s0f0np0: neighbour is dgx1:enP2p1s0f0np0, plan says dgx3:enP2p1s0f1np1; "
    "it carries the cable planned for enP2p1s0f1np1",
    "enp1s0f1np1: neighbour is dgx3:enp1s0f1np1, plan says dgx1:enp1s0f0np0; "
    "it carries the cable planned for enp1s0f0np0",
    "enP2p1s0f1np1: neighbour is dgx3:enP2p1s0f1np1, plan says dgx1:enP2p1s0f0np0; "
    "it carries the cable planned for enP2p1s0f0np0",
    "ports enP2p1s0f0np0 and enP2p1s0f1np1 are swapped (each carries the other's planned cable)",
    "ports enp1s0f0np0 and enp1s0f1np1 are swapped (each carries the other's planned cable)",
]


@pytest.mark.parametrize(("name", "problems", "swapped"), [
    ("lldp-triangle-dgx2-ok.json", [], []),
    ("lldp-cx7-dgx2-twins-ok.json", [], []),
    ("lldp-cx7-dgx2-twins-cable-swapped.json", TWINS_SWAPPED,
     [["enP2p1s0f0np0", "enP2p1s0f1np1"], ["enp1s0f0np0", "enp1s0f1np1"]]),
])
def test_cabling_verdict_per_fixture(name: str, problems: list[str], swapped: list[list[str]]) -> None:
    verdict = compare_cabling(DGX2, parse_lldpctl_json0(fixture(name)))
    assert (verdict["ok"], verdict["problems"], verdict["swapped"]) == (not problems, problems, swapped)


def test_twins_fixture_has_two_neighbours_per_port_and_keeps_the_same_path() -> None:
    verdict = compare_cabling(DGX2, parse_lldpctl_json0(fixture("lldp-cx7-dgx2-twins-ok.json")))
    for netdev, port in verdict["ports"].items():
        assert len(port["neighbours"]) == 2
        assert port["kept"]["port"] == DGX2[netdev].port


def _n(label: str) -> Neighbour:
    system, port = label.split(":")
    return Neighbour(system, port, port, "ifname", port)


PORT = "enp1s0f0np0"  # plan: dgx3:enp1s0f1np1


@pytest.mark.parametrize(("seen", "problem"), [
    (["dgx3:enp1s0f1np1", "dgx3:enP2p1s0f1np1"], None),
    (["dgx3:enP2p1s0f1np1", "dgx3:enp1s0f1np1"], None),
    (["dgx1:enP2p1s0f0np0", "dgx3:enp1s0f1np1"], None),
    (["dgx1:enp1s0f0np0", "dgx1:enP2p1s0f0np0"],
     "enp1s0f0np0: neighbour is dgx1:enp1s0f0np0, plan says dgx3:enp1s0f1np1"),
    (["dgx3:enP2p1s0f1np1"], "enp1s0f0np0: neighbour is dgx3:enP2p1s0f1np1, plan says dgx3:enp1s0f1np1"),
    (["dgx3:enP2p1s0f1np1", "dgx3:enP2p1s0f0np0"],
     "enp1s0f0np0: 2 LLDP neighbours (dgx3:enP2p1s0f1np1, dgx3:enP2p1s0f0np0), none on its PCIe path; "
     "plan says dgx3:enp1s0f1np1"),
    (["dgx3:enp1s0f1np1", "dgx1:enp1s0f0np0", "dgx3:enP2p1s0f1np1"],
     "enp1s0f0np0: 2 LLDP neighbours on its PCIe path (dgx3:enp1s0f1np1, dgx1:enp1s0f0np0), "
     "plan says only dgx3:enp1s0f1np1"),
])
def test_one_port_with_twin_neighbours(seen: list[str], problem: str | None) -> None:
    verdict = compare_cabling({PORT: DGX2[PORT]}, {PORT: [_n(s) for s in seen]})
    assert verdict["ports"][PORT]["problem"] == problem
    assert verdict["ok"] is (problem is None)


@pytest.mark.parametrize(("netdev", "path"), [
    ("enp1s0f0np0", (0, 1, 0)), ("enp1s0f1np1", (0, 1, 0)),
    ("enP2p1s0f0np0", (2, 1, 0)), ("enP2p1s0f1np1", (2, 1, 0)),
    ("eth0", None), (None, None), ("02:42:0b:0c:01:02", None),
])
def test_pcie_path_from_the_netdev_name(netdev: str | None, path: tuple[int, int, int] | None) -> None:
    assert pcie_path(netdev) == path


def test_mac_port_id_falls_back_to_description_and_fqdn_is_shortened() -> None:
    doc = {"lldp": [{"interface": [{"name": "enp1s0f0np0", "chassis": [{"name": [{"value": "dgx2.lab.example"}]}],
                                    "port": [{"id": [{"type": "mac", "value": "02:42:0b:0c:01:02"}],
                                              "descr": [{"value": "enp1s0f1np1"}]}]}]}]}
    seen = parse_lldpctl_json0(json.dumps(doc))
    assert seen["enp1s0f0np0"][0].label() == "dgx2:enp1s0f1np1"


@pytest.mark.parametrize("text", ["", "{}", '{"lldp": [{}]}', '{"lldp": []}'])
def test_no_neighbours_at_all(text: str) -> None:
    assert parse_lldpctl_json0(text) == {}


@pytest.mark.parametrize("text", ["not json", '{"lldp": ["x"]}', '{"lldp": [{"interface": [{"via": "LLDP"}]}]}'])
def test_bad_output_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_lldpctl_json0(text)


def test_parse_expect_forms_and_errors() -> None:
    assert parse_expect({"a": "dgx2:b", "c": {"host": "dgx3", "port": "d"}}) == {
        "a": Peer("dgx2", "b"), "c": Peer("dgx3", "d")}
    with pytest.raises(ValueError, match=r"expect\[a\]"):
        parse_expect({"a": "dgx2"})


# --- the module ---------------------------------------------------------------------------------

def _fake_lldpctl(monkeypatch: pytest.MonkeyPatch, text: str, rc: int = 0) -> list[list[str]]:
    from ansible.module_utils import basic
    calls: list[list[str]] = []

    def run_command(self: Any, args: list[str], **_: Any) -> tuple[int, str, str]:
        calls.append(args)
        return rc, text, "" if rc == 0 else "unable to connect to socket /run/lldpd.socket"

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: f"/usr/sbin/{name}")
    return calls


def _expect(plan: dict[str, Peer]) -> dict[str, dict[str, str]]:
    return {k: {"host": v.host, "port": v.port} for k, v in plan.items()}


def test_module_ok_and_check_mode(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_lldpctl(monkeypatch, fixture("lldp-triangle-dgx2-ok.json"))
    for check in (False, True):
        failed, result = run_module("spark_lldp", {"expect": _expect(DGX2)}, check_mode=check)
        assert not failed and result["ok"] and result["changed"] is False and result["missing"] == []
    assert calls == [["/usr/sbin/lldpctl", "-f", "json0"]] * 2


def test_module_fails_naming_both_ports(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_lldpctl(monkeypatch, fixture("lldp-triangle-dgx2-swapped.json"))
    failed, result = run_module("spark_lldp", {"expect": _expect(DGX2)})
    assert failed and "ports enp1s0f0np0 and enp1s0f1np1 are swapped" in result["msg"]
    failed, result = run_module("spark_lldp", {"expect": _expect(DGX2), "fail_on_error": False})
    assert not failed and result["ok"] is False and result["swapped"] == [["enp1s0f0np0", "enp1s0f1np1"]]


def test_module_accepts_twins_and_names_swapped_twins(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_lldpctl(monkeypatch, fixture("lldp-cx7-dgx2-twins-ok.json"))
    failed, result = run_module("spark_lldp", {"expect": _expect(DGX2)})
    assert not failed and result["ok"] and len(result["neighbours"]["enp1s0f0np0"]) == 2
    _fake_lldpctl(monkeypatch, fixture("lldp-cx7-dgx2-twins-cable-swapped.json"))
    failed, result = run_module("spark_lldp", {"expect": _expect(DGX2)})
    assert failed and "ports enP2p1s0f0np0 and enP2p1s0f1np1 are swapped" in result["msg"]
    assert "ports enp1s0f0np0 and enp1s0f1np1 are swapped" in result["msg"]


def test_module_reports_missing_ports(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_lldpctl(monkeypatch, '{"lldp": [{}]}')
    failed, result = run_module("spark_lldp", {"expect": _expect(DGX2), "fail_on_error": False})
    assert not failed and result["missing"] == sorted(DGX2)


def test_module_lldpd_down(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_lldpctl(monkeypatch, "", rc=1)
    failed, result = run_module("spark_lldp", {"expect": _expect(DGX2)})
    assert failed and "is lldpd running?" in result["msg"]


def test_module_bad_expect(run_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_lldpctl(monkeypatch, "{}")
    failed, result = run_module("spark_lldp", {"expect": {"enp1s0f0np0": "dgx2"}})
    assert failed and "expect[enp1s0f0np0]" in result["msg"] and calls == []
