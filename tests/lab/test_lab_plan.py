"""The lab bring-up's pure side: rendered plan → Docker objects, names, mounts, renames, lab inventory.

The plan fixtures are real output of playbooks/render.yml for inventories/tp3-triangle and tp4-ring; the switched
plans are built here in the shape render.yml gives lab/inventories/sw4-two-pairs (one plan per serving group).
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
_spec = importlib.util.spec_from_file_location("sparkfleet_unit_conftest", ROOT / "tests" / "unit" / "conftest.py")
assert _spec and _spec.loader
_unit = sys.modules.get(_spec.name)
if _unit is None:
    _unit = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _unit
    _spec.loader.exec_module(_unit)

lab: ModuleType = _unit.load_source("lab", "lab")


def plan(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"plan-{name}.json").read_text())


def test_triangle_has_six_cable_networks_with_exact_subnets() -> None:
    lp = lab.lab_plan("tp3", [plan("tp3")])
    assert [c.subnet for c in lp.cables] == [
        "10.12.1.0/24", "10.12.2.0/24", "10.13.1.0/24", "10.13.2.0/24", "10.23.1.0/24", "10.23.2.0/24"]
    assert {c.gateway for c in lp.cables} == {f"{c.subnet.rsplit('.', 1)[0]}.254" for c in lp.cables}
    assert all(c.gateway.endswith(".254") for c in lp.cables)
    first = lp.cables[0]
    assert first.network == "sparkfleet-tp3-cable-10.12.1"
    assert {(e.host, e.netdev, e.address) for e in first.ends} == {
        ("dgx1", "enp1s0f0np0", "10.12.1.1"), ("dgx2", "enp1s0f1np1", "10.12.1.2")}


def test_ring_cables_only_join_neighbours() -> None:
    lp = lab.lab_plan("tp4", [plan("tp4")])
    pairs = {tuple(sorted(e.host for e in c.ends)) for c in lp.cables}
    assert pairs == {("dgx1", "dgx2"), ("dgx2", "dgx3"), ("dgx3", "dgx4"), ("dgx1", "dgx4")}
    assert len(lp.cables) == 8
    assert [n.host for n in lp.nodes] == ["dgx1", "dgx2", "dgx3", "dgx4"]


def test_management_network_covers_the_addresses_with_a_free_gateway() -> None:
    lp = lab.lab_plan("tp3", [plan("tp3")])
    assert (lp.mgmt_subnet, lp.mgmt_gateway, lp.mgmt_network) == ("10.0.1.0/24", "10.0.1.254", "sparkfleet-tp3-mgmt")
    data = plan("tp3")
    data["nodes"][2]["mgmt_address"] = "10.0.1.254"
    assert lab.lab_plan("tp3", [data]).mgmt_gateway == "10.0.1.253"


def test_management_addresses_in_two_subnets_are_refused_naming_hosts() -> None:
    data = plan("tp3")
    data["nodes"][1]["mgmt_address"] = "10.0.2.72"
    with pytest.raises(lab.LabError, match=r"dgx2=10\.0\.2\.72"):
        lab.lab_plan("tp3", [data])


def test_a_subnet_with_three_ends_is_refused() -> None:
    data = plan("tp3")
    data["nodes"][2]["interfaces"].append(copy.deepcopy(data["nodes"][0]["interfaces"][0]))
    with pytest.raises(lab.LabError, match=r"10\.12\.1\.0/24 must join exactly two hosts"):
        lab.lab_plan("tp3", [data])


def test_empty_plan_is_refused() -> None:
    with pytest.raises(lab.LabError, match="no nodes"):
        lab.lab_plan("tp3", [{"topology": "triangle", "nodes": []}])


# (port, path, netdev, rdma) of each rail, as render.yml plans a switched Spark
RAILS = [(0, 1, "enp1s0f0np0", "rocep1s0f0"), (0, 2, "enP2p1s0f0np0", "roceP2p1s0f0"),
         (1, 1, "enp1s0f1np1", "rocep1s0f1"), (1, 2, "enP2p1s0f1np1", "roceP2p1s0f1")]
SW4_RAILS = ["10.100.1.0/24", "10.100.2.0/24", "10.101.1.0/24", "10.101.2.0/24"]


def switched(group: str, node_ids: list[int]) -> dict[str, Any]:
    """The plan of a switched serving group: on every rail each node has 10.10<port>.<path>.<node id>/24, and no
    interface names a peer."""
    nodes = [{"host": f"dgx{i}", "node_id": i, "rank": rank, "mgmt_address": f"10.0.1.7{i}", "mgmt_interface": "enP7s7",
              "interfaces": [{"address": f"10.10{port}.{path}.{i}/24", "subnet": f"10.10{port}.{path}.0/24",
                              "netdev": netdev, "rdma": rdma, "port": port, "path": path}
                             for port, path, netdev, rdma in RAILS]}
             for rank, i in enumerate(node_ids)]
    return {"group": group, "topology": "switched", "nodes": nodes}


def test_each_switch_rail_is_one_network_joining_the_nodes_of_both_groups() -> None:
    lp = lab.lab_plan("sw4", [switched("pair_a", [1, 2]), switched("pair_b", [3, 4])])
    assert lp.cables == []
    assert [r.subnet for r in lp.rails] == SW4_RAILS
    assert [r.network for r in lp.rails] == [
        "sparkfleet-sw4-rail-10.100.1", "sparkfleet-sw4-rail-10.100.2",
        "sparkfleet-sw4-rail-10.101.1", "sparkfleet-sw4-rail-10.101.2"]
    assert all(r.kind == "rail" and r.gateway == f"{r.subnet.rsplit('.', 1)[0]}.254" for r in lp.rails)
    first = lp.rails[0]
    assert first.ends == tuple(lab.Endpoint(f"dgx{i}", "enp1s0f0np0", f"10.100.1.{i}") for i in (1, 2, 3, 4))
    # every node gets each planned netdev once, on its own rail
    for node in ("dgx1", "dgx4"):
        assert sorted(e.netdev for r in lp.rails for e in r.ends if e.host == node) == sorted(r[2] for r in RAILS)
    assert [(n.host, n.mgmt_address, n.renderer) for n in lp.nodes] == [
        ("dgx1", "10.0.1.71", "networkd"), ("dgx2", "10.0.1.72", "networkd"),
        ("dgx3", "10.0.1.73", "networkd"), ("dgx4", "10.0.1.74", "NetworkManager")]
    assert lp.mgmt_subnet == "10.0.1.0/24"


def test_rails_forward_no_lldp_and_cables_do() -> None:
    rails = lab.lab_plan("sw4", [switched("pair_a", [1, 2]), switched("pair_b", [3, 4])])
    assert rails.rails and not [r for r in rails.rails if r.forward_lldp]
    cables = lab.lab_plan("tp3", [plan("tp3")])
    assert cables.cables and all(c.forward_lldp for c in cables.cables)
    record = json.loads(lab.lab_record(rails, argparse.Namespace(node_image="n", base_image="b"), "cgroup"))
    assert {(n["kind"], n["forward_lldp"], len(n["ends"])) for n in record["fabric"]} == {("rail", False, 4)}


def test_a_subnet_cabled_in_one_group_and_switched_in_another_is_refused() -> None:
    cabled = {**plan("tp3"), "group": "tri"}
    rail = switched("sw", [5, 6])
    rail["nodes"][0]["interfaces"][0]["address"] = "10.12.1.5/24"
    rail["nodes"][1]["interfaces"][0]["address"] = "10.12.1.6/24"
    with pytest.raises(lab.LabError, match=r"10\.12\.1\.0/24 is a cable of group tri and a rail of group sw"):
        lab.lab_plan("mix", [cabled, rail])
    with pytest.raises(lab.LabError, match=r"10\.12\.1\.0/24 is a rail of group sw and a cable of group tri"):
        lab.lab_plan("mix", [rail, cabled])


def test_a_switch_rail_with_one_end_is_refused() -> None:
    with pytest.raises(lab.LabError, match=r"rail 10\.100\.1\.0/24 must join two or more hosts.*: dgx1:enp1s0f0np0$"):
        lab.lab_plan("sw1", [switched("solo", [1])])


def test_two_cabled_groups_reusing_a_subnet_are_refused() -> None:
    # Apart in reality (cables never cross groups), but Docker refuses two networks of one subnet.
    ring = {**plan("tp4"), "group": "ring"}
    tri = copy.deepcopy({**plan("tp3"), "group": "tri"})
    for i, node in enumerate(tri["nodes"]):
        node["host"], node["mgmt_address"] = f"tb{i + 1}", f"10.0.1.8{i + 1}"
    with pytest.raises(lab.LabError, match=r"cable subnet 10\.12\.1\.0/24 is planned by groups ring and tri"):
        lab.lab_plan("mix", [ring, tri])


def test_a_host_in_two_groups_is_refused() -> None:
    with pytest.raises(lab.LabError, match="more than one serving group: dgx2$"):
        lab.lab_plan("sw", [switched("pair_a", [1, 2]), switched("pair_b", [2, 3])])


def write_plan(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_plans_of_several_groups_are_read_in_group_order(tmp_path: Path) -> None:
    write_plan(tmp_path / "pair_b" / "plan.json", switched("pair_b", [3, 4]))
    write_plan(tmp_path / "pair_a" / "plan.json", switched("pair_a", [1, 2]))
    (tmp_path / "pair_a" / "dgx1").mkdir()
    (tmp_path / "pair_a" / "dgx1" / "netplan.yaml").write_text("network: {}\n")
    (tmp_path / ".inputs").write_text("stamp")
    assert lab.plan_files(tmp_path) == [tmp_path / "pair_a" / "plan.json", tmp_path / "pair_b" / "plan.json"]
    lp = lab.lab_plan("sw4", lab.read_plans(tmp_path))
    assert [n.host for n in lp.nodes] == ["dgx1", "dgx2", "dgx3", "dgx4"]
    assert [r.subnet for r in lp.rails] == SW4_RAILS
    # one serving group: its plan.json stands alone
    write_plan(tmp_path / "plan.json", plan("tp3"))
    assert lab.plan_files(tmp_path) == [tmp_path / "plan.json"]
    with pytest.raises(lab.LabError, match="no plan.json"):
        lab.read_plans(tmp_path / "empty")


def test_render_is_skipped_while_the_stamp_matches_and_starts_afresh_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "render"
    renders: list[list[str]] = []

    def fake_render(args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        renders.append(args)
        write_plan(out / "pair_a" / "plan.json", switched("pair_a", [1, 2]))
        write_plan(out / "pair_b" / "plan.json", switched("pair_b", [3, 4]))
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(lab, "sh", fake_render)
    monkeypatch.setattr(lab, "render_inputs_hash", lambda inventory: "inputs-1")
    write_plan(out / "pair_old" / "plan.json", switched("pair_old", [7, 8]))  # an earlier inventory's group
    (out / ".inputs").write_text("inputs-0")
    first = lab.render_plan(tmp_path / "inv", out)
    assert [p["group"] for p in first] == ["pair_a", "pair_b"]
    assert len(renders) == 1 and f"spark_render_dir={out}" in renders[0]
    assert (out / ".inputs").read_text() == "inputs-1" and not (out / "pair_old").exists()
    assert lab.render_plan(tmp_path / "inv", out) == first
    assert len(renders) == 1  # unchanged inputs: the plans on disk are used


@pytest.mark.parametrize(("fs_type", "requested", "mount"), [
    ("cgroup2fs", "auto", "/sys/fs/cgroup:/sys/fs/cgroup:rw"),
    ("tmpfs", "auto", "/sys/fs/cgroup:/sys/fs/cgroup:ro"),
    ("tmpfs", "rw", "/sys/fs/cgroup:/sys/fs/cgroup:rw"),
    ("cgroup2fs", "ro", "/sys/fs/cgroup:/sys/fs/cgroup:ro"),
])
def test_cgroup_variant_detected_and_overridable(fs_type: str, requested: str, mount: str) -> None:
    assert lab.cgroup_mount(fs_type, requested) == mount


def test_unknown_cgroup_variant_is_refused() -> None:
    with pytest.raises(lab.LabError, match="SPARK_LAB_CGROUP=v3"):
        lab.cgroup_mount("tmpfs", "v3")


def test_node_runs_systemd_with_the_measured_capabilities_and_no_privilege() -> None:
    lp = lab.lab_plan("tp3", [plan("tp3")])
    args = lab.run_args(lp, lp.nodes[0], "sparkfleet-lab/node:abc", "/sys/fs/cgroup:/sys/fs/cgroup:ro")
    joined = " ".join(args)
    for flag in ("--name dgx1", "--hostname dgx1", "--label sparkfleet.lab=tp3", "--ip 10.0.1.71",
                 "--cap-add SYS_ADMIN", "--cap-add NET_ADMIN", "seccomp=unconfined", "apparmor=unconfined",
                 "--cgroupns=host", "--tmpfs /run", "--tmpfs /run/lock",
                 "sparkfleet-tp3-dgx1-docker:/var/lib/docker", "--network sparkfleet-tp3-mgmt"):
        assert flag in joined
    assert "--privileged" not in args
    assert args[-1] == "sparkfleet-lab/node:abc"


@pytest.mark.parametrize("topology,hosts", [("tp3", ["dgx1", "dgx2", "dgx3"]), ("tp4", ["dgx1", "dgx2", "dgx3", "dgx4"])])
def test_the_last_node_runs_networkmanager_with_ipv6_on_and_the_others_networkd(topology: str, hosts: list[str]) -> None:
    lp = lab.lab_plan(topology, [plan(topology)])
    assert [(n.host, n.renderer) for n in lp.nodes] == \
        [(h, "networkd") for h in hosts[:-1]] + [(hosts[-1], "NetworkManager")]
    nm, networkd = lp.nodes[-1], lp.nodes[0]
    nm_args = lab.run_args(lp, nm, "img", "/sys/fs/cgroup:/sys/fs/cgroup:ro")
    assert " ".join(nm_args).count("--sysctl net.ipv6.conf.all.disable_ipv6=0 "
                                   "--sysctl net.ipv6.conf.default.disable_ipv6=0") == 1
    assert nm_args[-1] == "img"
    assert "--sysctl" not in lab.run_args(lp, networkd, "img", "/sys/fs/cgroup:/sys/fs/cgroup:ro")
    assert lab.node_renderer(0, 1) == "networkd"  # a one-node lab has no second renderer to compare with


def test_networkmanager_leaves_the_management_interface_alone_and_adds_no_profile() -> None:
    lp = lab.lab_plan("tp3", [plan("tp3")])
    conf = lab.networkmanager_conf(lp.nodes[-1])
    assert "\n[main]\nno-auto-default=*\n" in conf
    unmanaged = conf.split("unmanaged-devices=", 1)[1].strip().split(";")
    assert "interface-name:enP7s7" in unmanaged
    assert not [u for u in unmanaged if "enp1s0" in u or "enP2p1" in u or u.startswith("type:")]


def test_rename_batch_flushes_cable_addresses_and_keeps_the_management_one() -> None:
    assert lab.rename_batch([("eth1", "enp1s0f0np0")], keep_address=False).splitlines() == [
        "link set dev eth1 down", "link set dev eth1 name enp1s0f0np0",
        "address flush dev enp1s0f0np0", "link set dev enp1s0f0np0 up"]
    assert "address flush" not in lab.rename_batch([("eth0", "enP7s7")], keep_address=True)


def test_interface_found_by_its_docker_address() -> None:
    ip_json = [
        {"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
        {"ifname": "eth2", "addr_info": [{"family": "inet6", "local": "fe80::1"},
                                         {"family": "inet", "local": "10.13.1.1"}]},
    ]
    assert lab.interface_by_address(ip_json, "10.13.1.1") == "eth2"
    with pytest.raises(lab.LabError, match="10.12.1.1"):
        lab.interface_by_address(ip_json, "10.12.1.1")


ACCESS = lab.Access(key=Path("/lab/.lab/tp3/ssh/id_ed25519"), known_hosts=Path("/lab/.lab/tp3/ssh/known_hosts"),
                    control_dir=Path("/tmp/sparkfleet-lab-ssh/tp3"))


def test_lab_hosts_keep_every_variable_and_reach_nodes_over_ssh() -> None:
    lp = lab.lab_plan("tp3", [plan("tp3")])
    source = {"spark": {"hosts": {"dgx1": {"ansible_host": "192.168.9.9", "spark_rank": 0, "spark_node_id": 1}},
                        "children": {"heads": {"hosts": {"dgx1": None}}}}}
    out = lab.lab_hosts(source, lp, ACCESS)
    dgx1 = out["spark"]["hosts"]["dgx1"]
    assert dgx1["ansible_connection"] == "ansible.builtin.ssh"
    assert dgx1["ansible_host"] == dgx1["spark_mgmt_address"] == "10.0.1.71"
    assert (dgx1["spark_rank"], dgx1["spark_node_id"]) == (0, 1)
    assert out["spark"]["children"]["heads"]["hosts"]["dgx1"]["ansible_host"] == "10.0.1.71"
    assert source["spark"]["hosts"]["dgx1"]["ansible_host"] == "192.168.9.9"  # the source is not modified


def test_connection_vars_pin_host_keys_and_pipeline() -> None:
    conn = lab.connection_vars("10.0.1.72", ACCESS)
    assert conn["ansible_user"] == "root"
    assert conn["ansible_ssh_private_key_file"] == "/lab/.lab/tp3/ssh/id_ed25519"
    assert "-o UserKnownHostsFile=/lab/.lab/tp3/ssh/known_hosts" in conn["ansible_ssh_common_args"]
    assert conn["ansible_ssh_host_key_checking"] is True and conn["ansible_ssh_pipelining"] is True
    assert conn["ansible_control_path_dir"] == "/tmp/sparkfleet-lab-ssh/tp3"


def test_access_of_a_state_dir(tmp_path: Path) -> None:
    access = lab.Access.of(tmp_path / ".lab" / "tp4", lab.lab_plan("tp4", [plan("tp4")]))
    assert access.key == tmp_path / ".lab" / "tp4" / "ssh" / "id_ed25519"
    assert access.known_hosts.parent == access.key.parent
    assert access.control_dir == lab.CONTROL_ROOT / "fleet" / "tp4"
    # ssh's socket address limit (108 bytes) with molecule's %h-%p-%r names
    assert len(f"{access.control_dir}/255.255.255.255-22-root.abcdefghijklmnop") < 108


def test_known_hosts_line_names_the_address_the_inventory_connects_to() -> None:
    line = lab.known_hosts_line("10.0.1.73", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE root@dgx3")
    assert line == "10.0.1.73 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n"


def test_written_inventory_parses_with_the_shipped_group_vars(tmp_path: Path) -> None:
    lp = lab.lab_plan("tp4", [plan("tp4")])
    dest = lab.write_inventory(ROOT / "inventories" / "tp4-ring", tmp_path / "inventory", lp,
                               lab.Access.of(tmp_path, lp))
    assert sorted(p.name for p in dest.iterdir()) == ["group_vars", "host_vars", "hosts.yml"]
    assert (dest / "group_vars" / "spark" / "site.yml").read_text() == \
        (ROOT / "inventories" / "tp4-ring" / "group_vars" / "spark" / "site.yml").read_text()
    hosts = yaml.safe_load((dest / "hosts.yml").read_text())
    assert sorted(hosts["spark"]["hosts"]) == ["dgx1", "dgx2", "dgx3", "dgx4"]
    listing = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(dest), "--list"],
                             capture_output=True, text=True, check=True)
    hostvars = json.loads(listing.stdout)["_meta"]["hostvars"]
    assert hostvars["dgx3"]["ansible_connection"] == "ansible.builtin.ssh"
    assert hostvars["dgx3"]["ansible_host"] == "10.0.1.73"
    assert hostvars["dgx3"]["spark_mgmt_address"] == "10.0.1.73"
    assert hostvars["dgx3"]["spark_topology"] == "ring"


def test_written_inventory_names_the_networkmanager_node(tmp_path: Path) -> None:
    lp = lab.lab_plan("tp3", [plan("tp3")])
    dest = lab.write_inventory(ROOT / "inventories" / "tp3-triangle", tmp_path / "inventory", lp,
                               lab.Access.of(tmp_path, lp))
    listing = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(dest), "--list"],
                             capture_output=True, text=True, check=True)
    hostvars = json.loads(listing.stdout)["_meta"]["hostvars"]
    assert {h: v["spark_fabric_netplan_renderer"] for h, v in hostvars.items()} == {
        "dgx1": "networkd", "dgx2": "networkd", "dgx3": "NetworkManager"}


def test_render_inputs_hash_follows_the_inventory(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    (inv / "group_vars" / "spark").mkdir(parents=True)
    (inv / "hosts.yml").write_text("spark: {hosts: {dgx1: {ansible_host: 10.0.1.71}}}\n")
    first = lab.render_inputs_hash(inv)
    assert lab.render_inputs_hash(inv) == first
    (inv / "group_vars" / "spark" / "fabric.yml").write_text("spark_fabric_prefix: 11\n")
    assert lab.render_inputs_hash(inv) != first


def test_a_session_holds_the_one_lab_lock_and_its_operations_go_ahead(tmp_path: Path) -> None:
    lock = tmp_path / "lab.lock"
    env = {**os.environ, "SPARK_LAB_LOCK": str(lock)}
    env.pop("SPARK_LAB_SESSION", None)
    lab_py = str(ROOT / "lab" / "lab.py")
    # Inside the session a lab operation (here a nested session, which takes the lock as up and down do) runs at
    # once; one started beside it, outside the session, waits for the lock until the timeout ends it.
    inner = (f"{sys.executable} {lab_py} session -- true; echo inner=$?; "
             f"env -u SPARK_LAB_SESSION timeout 3 {sys.executable} {lab_py} session -- true; echo beside=$?")
    done = subprocess.run([sys.executable, lab_py, "session", "--", "sh", "-c", inner], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "inner=0" in done.stdout and "beside=124" in done.stdout
    failed = subprocess.run([sys.executable, lab_py, "session", "--", "sh", "-c", "exit 7"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert failed.returncode == 7


HOST_SCENARIO = ROOT / "molecule" / "host" / "inventory"


def test_an_inventory_without_ranks_is_its_hosts_on_the_management_network_alone() -> None:
    source = {"spark": {"vars": {"spark_mgmt_interface": "eth9"},
                        "hosts": {"node-a": {"spark_mgmt_address": "10.0.44.71"},
                                  "node-b": {"ansible_host": "10.0.44.72", "spark_mgmt_interface": "enX0"}}}}
    lp = lab.lab_plan("nodes", [], lab.plain_nodes(source), slot="nodes")
    assert [(n.host, n.mgmt_address, n.mgmt_interface) for n in lp.nodes] == [
        ("node-a", "10.0.44.71", "eth9"), ("node-b", "10.0.44.72", "enX0")]
    assert lp.fabric == [] and lp.mgmt_gateway == "10.0.44.254" and lp.slot == "nodes"
    assert lp.labels == ["--label", "sparkfleet.lab=nodes", "--label", "sparkfleet.lab.slot=nodes"]
    args = lab.run_args(lp, lp.nodes[0], "img", "/sys/fs/cgroup:/sys/fs/cgroup:rw")
    assert "sparkfleet.lab.slot=nodes" in args


def test_a_plain_node_without_a_management_address_is_refused_by_name() -> None:
    with pytest.raises(lab.LabError, match="node-a: no spark_mgmt_address or ansible_host"):
        lab.plain_nodes({"spark": {"hosts": {"node-a": {}}}})


def test_plain_nodes_default_to_the_planning_filters_management_interface() -> None:
    fabric = _unit.load_source("filter", "sparkfleet_fabric")
    assert lab.DEFAULT_MGMT_INTERFACE == fabric.DEFAULT_MGMT_INTERFACE
    assert lab.plain_nodes({"all": {"hosts": {"n": {"ansible_host": "10.0.9.1"}}}})[0]["mgmt_interface"] == \
        fabric.DEFAULT_MGMT_INTERFACE


def test_ranks_in_hosts_yml_or_host_vars_mean_a_plan(tmp_path: Path) -> None:
    assert lab.has_ranks(ROOT / "inventories" / "tp3-triangle")
    assert lab.has_ranks(ROOT / "molecule" / "serve" / "inventory")  # ranks in host_vars/
    assert not lab.has_ranks(HOST_SCENARIO)
    (tmp_path / "hosts.yml").write_text("spark: {hosts: {n: {ansible_host: 10.0.9.1}}}\n")
    assert not lab.has_ranks(tmp_path)


def test_every_scenario_lab_has_its_own_hosts_and_management_subnet() -> None:
    # Scenario labs run beside a topology lab (make test's lanes): no host name or /24 may be shared.
    fleet = {n["host"] for p in (plan("tp3"), plan("tp4")) for n in p["nodes"]}
    subnets = {"10.0.1.0/24"}
    for scenario in ("host", "memguard", "bench_schedule"):
        hosts = yaml.safe_load((ROOT / "molecule" / scenario / "inventory" / "hosts.yml").read_text())
        nodes = lab.plain_nodes(hosts)
        lp = lab.lab_plan(scenario, [], nodes, slot=scenario)
        assert not {n.host for n in lp.nodes} & fleet, scenario
        assert lp.mgmt_subnet not in subnets, scenario
        subnets.add(lp.mgmt_subnet)


def test_each_slot_has_its_own_lock_and_the_fleet_keeps_the_machines_lock() -> None:
    assert lab.lock_file("fleet") == lab.LOCK_FILE
    assert lab.lock_file("host").parent == lab.LOCK_FILE.parent
    assert lab.lock_file("host") != lab.lock_file("memguard") != lab.LOCK_FILE
    assert lab.slot_filter("host") == "sparkfleet.lab.slot=host"
    assert lab.slot_filter(None) == "sparkfleet.lab"


def test_a_session_of_another_slot_does_not_wait_for_the_fleet(tmp_path: Path) -> None:
    env = {**os.environ, "SPARK_LAB_LOCK": str(tmp_path / "lab.lock")}
    env.pop("SPARK_LAB_SESSION", None)
    lab_py = str(ROOT / "lab" / "lab.py")
    inner = (f"env -u SPARK_LAB_SESSION timeout 10 {sys.executable} {lab_py} session --slot host -- true; "
             "echo other=$?")
    done = subprocess.run([sys.executable, lab_py, "session", "--", "sh", "-c", inner], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "other=0" in done.stdout


def test_every_scenario_gets_its_lab_from_lab_py() -> None:
    # One mechanism: every molecule scenario's driver is molecule's default one, its destroy is the lab's, and its
    # create is the lab's or a playbook that imports the lab's first.
    scenarios = sorted(p.parent for p in (ROOT / "molecule").glob("*/molecule.yml"))
    assert [s.name for s in scenarios] == ["bench_schedule", "fabric", "host", "image", "memguard", "serve", "site"]
    for scenario in scenarios:
        spec = yaml.safe_load((scenario / "molecule.yml").read_text())
        assert spec["driver"]["name"] == "default", scenario.name
        books = spec["provisioner"]["playbooks"]
        assert books["destroy"] == "../../lab/playbooks/destroy.yml", scenario.name
        create = books["create"]
        if create != "../../lab/playbooks/create.yml":
            first = yaml.safe_load((scenario / create).read_text())[0]
            assert first["ansible.builtin.import_playbook"] == "../../lab/playbooks/create.yml", scenario.name
        assert all(link.startswith("../../.lab/") for link in spec["provisioner"]["inventory"]["links"].values()), \
            scenario.name
    # Nothing under molecule/ but scenarios (and the runner that keeps their logs).
    assert sorted(p.name for p in (ROOT / "molecule").iterdir() if not (p / "molecule.yml").is_file()) == \
        ["test-scenario.sh"]


def test_a_host_vars_file_of_the_source_joins_the_renderer_vars_in_one_directory(tmp_path: Path) -> None:
    # Ansible ignores host_vars/<host>.yml beside a host_vars/<host>/ directory; the serve scenario's inventory
    # keeps each rank in such a file, and its last node gets the lab's renderer variables.
    lp = lab.lab_plan("serve", [plan("tp3")])
    source = tmp_path / "source"
    shutil.copytree(ROOT / "inventories" / "tp3-triangle", source)
    (source / "host_vars").mkdir(exist_ok=True)
    (source / "host_vars" / "dgx3.yml").write_text("---\nserve_lab_marker: 3\n")
    dest = lab.write_inventory(source, tmp_path / "inventory", lp, lab.Access.of(tmp_path, lp))
    assert sorted(p.name for p in (dest / "host_vars" / "dgx3").iterdir()) == ["dgx3.yml", "lab-renderer.yml"]
    listing = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(dest), "--list"],
                             capture_output=True, text=True, check=True)
    dgx3 = json.loads(listing.stdout)["_meta"]["hostvars"]["dgx3"]
    assert dgx3["serve_lab_marker"] == 3 and dgx3["spark_fabric_netplan_renderer"] == "NetworkManager"


class FakeEngine:
    """Stands in for the docker CLI and lab/engine.sh: networks that refuse removal until `frees_after` calls, or
    until the engine restarts."""

    def __init__(self, networks: list[str], frees_after: int, restart_frees: bool = True, restart_rc: int = 0,
                 error: str = "has active endpoints") -> None:
        self.networks, self.frees_after, self.restart_frees = set(networks), frees_after, restart_frees
        self.restart_rc, self.error, self.calls = restart_rc, error, []  # type: ignore[var-annotated]

    def sh(self, args: list[str], check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append(args[:3])
        if args[:3] == ["docker", "network", "rm"]:
            self.frees_after -= 1
            if self.frees_after <= 0:
                self.networks -= set(args[3:])
                return subprocess.CompletedProcess(args, 0, "", "")
            return subprocess.CompletedProcess(args, 1, "", f"Error response from daemon: network x {self.error}")
        if args[0].endswith("engine.sh"):
            if self.restart_frees and self.restart_rc == 0:
                self.frees_after = 0
            return subprocess.CompletedProcess(args, self.restart_rc, "", "engine: not restarting dockerd: containers exist")
        raise AssertionError(args)


def use_engine(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine) -> None:
    monkeypatch.setattr(lab, "sh", engine.sh)
    monkeypatch.setattr(lab, "labelled", lambda kind, label: sorted(engine.networks))
    monkeypatch.setattr(lab.time, "sleep", lambda s: None)


def test_networks_with_endpoints_left_by_docker_are_retried_then_freed_by_an_idle_engine_restart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    quick = FakeEngine(["n1", "n2"], frees_after=2)
    use_engine(monkeypatch, quick)
    lab.remove_networks(["n1", "n2"])
    assert not quick.networks and not any(c[0].endswith("engine.sh") for c in quick.calls)
    stale = FakeEngine(["n1"], frees_after=99)
    use_engine(monkeypatch, stale)
    lab.remove_networks(["n1"])
    assert not stale.networks and sum(c[0].endswith("engine.sh") for c in stale.calls) == 1


@pytest.mark.parametrize(("engine", "match"), [
    (FakeEngine(["n1"], frees_after=99, restart_rc=1), "cannot be restarted now: engine: not restarting dockerd"),
    (FakeEngine(["n1"], frees_after=99, restart_frees=False), "even after an engine restart"),
    (FakeEngine(["n1"], frees_after=99, error="is in use by task"), "docker network rm n1: .*is in use by task"),
])
def test_networks_that_stay_are_named_with_the_reason(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine,
                                                      match: str) -> None:
    use_engine(monkeypatch, engine)
    with pytest.raises(lab.LabError, match=match):
        lab.remove_networks(["n1"])
