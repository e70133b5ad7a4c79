"""Every validation error of the inventory contract names the host and the variable."""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source, set_all, set_one

fabric = load_source("filter", "sparkfleet_fabric")


def triangle() -> list[dict[str, Any]]:
    return [{"host": f"dgx{r + 1}", "spark_rank": r, "ansible_host": f"10.0.1.{71 + r}",
             "spark_topology": "triangle"} for r in range(3)]


def mutate(change: Callable[[list[dict[str, Any]]], None]) -> list[str]:
    raw = triangle()
    change(raw)
    return fabric.spark_validate(raw)



def broken_ports(raw: list[dict[str, Any]]) -> None:
    ports = copy.deepcopy(fabric.DEFAULT_PORTS)
    del ports[1]["paths"][1]
    ports[0]["paths"][0].pop("rdma")
    for e in raw:
        e["spark_fabric_ports"] = copy.deepcopy(ports)


def test_valid_inventory_has_no_errors() -> None:
    assert fabric.spark_validate(triangle()) == []


@pytest.mark.parametrize("change,expected", [
    (set_all("spark_topology", "mesh"), "host dgx1: spark_topology must be one of pair, triangle, ring, switched, got 'mesh'"),
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
    (set_one(0, "spark_fabric_prefix", 11), "host dgx2: spark_fabric_prefix 10 differs from host dgx1's 11"),
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
    assert fabric.spark_validate([]) == ["group spark has no hosts: the inventory defines no cluster node"]


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


# --- input that could smuggle lines into generated files, or that no node can use ----------------

def ports_with(port: int, path: int, key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    ports = copy.deepcopy(fabric.DEFAULT_PORTS)
    ports[port]["paths"][path - 1][key] = value
    return set_all("spark_fabric_ports", ports)


def ports_listing_twice(what: str) -> Callable[[list[dict[str, Any]]], None]:
    ports = copy.deepcopy(fabric.DEFAULT_PORTS)
    if what == "port":
        ports[1]["port"] = 0
    else:
        ports[0]["paths"][1]["path"] = 1
    return set_all("spark_fabric_ports", ports)


def rename(index: int, name: str) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        raw[index]["host"] = name
    return _change


REFUSED: list[tuple[str, Callable[[list[dict[str, Any]]], None], str]] = [
    # line smuggling: newline, '=' or a control character in anything written into a generated file
    ("override value newline", set_all("spark_nccl_overrides", {"NCCL_DEBUG": "INFO\nLD_PRELOAD=/x.so"}),
     "host dgx1: spark_nccl_overrides.NCCL_DEBUG must not contain a newline, '=' or a control character"),
    ("override value =", set_all("spark_nccl_overrides", {"NCCL_DEBUG": "INFO=1"}),
     "host dgx1: spark_nccl_overrides.NCCL_DEBUG must not contain a newline, '=' or a control character"),
    ("override value control", set_all("spark_nccl_overrides", {"NCCL_DEBUG": "INFO\x1b"}),
     "host dgx2: spark_nccl_overrides.NCCL_DEBUG must not contain a newline, '=' or a control character"),
    ("override key newline", set_all("spark_nccl_overrides", {"NCCL_DEBUG\nLD_PRELOAD": "x"}),
     "host dgx1: spark_nccl_overrides has an invalid variable name 'NCCL_DEBUG\\nLD_PRELOAD'"),
    ("override key =", set_all("spark_nccl_overrides", {"NCCL_DEBUG=INFO": "x"}),
     "host dgx1: spark_nccl_overrides has an invalid variable name 'NCCL_DEBUG=INFO'"),
    ("override key space", set_all("spark_nccl_overrides", {"NCCL DEBUG": "x"}),
     "host dgx1: spark_nccl_overrides has an invalid variable name 'NCCL DEBUG'"),
    ("override LD_PRELOAD", set_all("spark_nccl_overrides", {"LD_PRELOAD": "/tmp/x.so"}),
     "host dgx1: spark_nccl_overrides has an invalid variable name 'LD_PRELOAD' (only NCCL_, TORCH_NCCL_, SPARKNET_"),
    ("override removes NCCL_PROTO", set_all("spark_nccl_overrides", {"NCCL_PROTO": None}),
     "host dgx3: spark_nccl_overrides.NCCL_PROTO cannot be removed: every profile requires it"),
    ("override not a mapping", set_all("spark_nccl_overrides", ["NCCL_DEBUG=INFO"]),
     "host dgx1: spark_nccl_overrides must be a mapping of variable to value, got list"),
    ("override NCCL_PROTO value", set_all("spark_nccl_overrides", {"NCCL_PROTO": "LL128"}),
     "host dgx1: spark_nccl_overrides.NCCL_PROTO must be ^LL128"),
    ("mgmt interface newline", set_all("spark_mgmt_interface", "enP7s7\nNCCL_NET=Socket"),
     "host dgx1: spark_mgmt_interface must be an interface name"),
    ("mgmt interface =", set_all("spark_mgmt_interface", "eno1=x"), "host dgx2: spark_mgmt_interface must be an interface name"),
    ("mgmt interface too long", set_all("spark_mgmt_interface", "a" * 16), "host dgx1: spark_mgmt_interface must be an interface name"),
    ("netdev newline", ports_with(0, 1, "netdev", "enp1s0f0np0\nx"),
     "host dgx1: spark_fabric_ports port 0 path 1 netdev must be a device name"),
    ("rdma =", ports_with(1, 2, "rdma", "roce=1"), "host dgx1: spark_fabric_ports port 1 path 2 rdma must be a device name"),
    ("rdma control", ports_with(1, 1, "rdma", "roce\x00"), "host dgx3: spark_fabric_ports port 1 path 1 rdma must be a device name"),
    ("host newline", rename(1, "dgx2\nevil"), "host 'dgx2\\nevil': the inventory host name must be a hostname"),
    ("host =", rename(1, "dgx2=x"), "host 'dgx2=x': the inventory host name must be a hostname"),
    # host names that are not hostnames, and localhost
    ("host slash", rename(0, "../dgx1"), "host '../dgx1': the inventory host name must be a hostname"),
    ("host dotdot", rename(0, "dgx1..x"), "host 'dgx1..x': the inventory host name must be a hostname"),
    ("host quote", rename(0, "dgx'1"), "host \"dgx'1\": the inventory host name must be a hostname"),
    ("host space", rename(2, "dgx 3"), "host 'dgx 3': the inventory host name must be a hostname"),
    ("host localhost", rename(0, "localhost"), "host localhost: localhost cannot be a cluster node"),
    # ambiguous tables and addresses
    ("port twice", ports_listing_twice("port"), "host dgx1: spark_fabric_ports lists port 0 twice"),
    ("path twice", ports_listing_twice("path"), "host dgx1: spark_fabric_ports port 0 lists path 1 twice"),
    ("same ansible_host", lambda raw: [e.update(spark_mgmt_address=f"10.0.2.{i}", ansible_host="spark.lan")
                                        for i, e in enumerate(raw)],
     "hosts dgx1, dgx2, dgx3: ansible_host spark.lan is duplicated"),
    ("mgmt 0.0.0.0", set_one(1, "spark_mgmt_address", "0.0.0.0"),
     "host dgx2: spark_mgmt_address must be a unicast address (not 0.0.0.0/8, loopback, multicast or broadcast), got '0.0.0.0'"),
    ("mgmt loopback", set_one(0, "ansible_host", "127.0.1.1"), "host dgx1: spark_mgmt_address must be a unicast address"),
    ("mgmt multicast", set_one(0, "spark_mgmt_address", "239.1.1.1"), "host dgx1: spark_mgmt_address must be a unicast address"),
    ("mgmt broadcast", set_one(0, "spark_mgmt_address", "255.255.255.255"), "host dgx1: spark_mgmt_address must be a unicast address"),
    # cluster-wide settings, GID index and renderer
    ("gid differs", set_one(1, "spark_roce_gid_index", 4),
     "host dgx2: spark_roce_gid_index 4 differs from host dgx1's 3: it is a cluster-wide setting"),
    ("mgmt interface differs", set_one(1, "spark_mgmt_interface", "eno1"),
     "host dgx2: spark_mgmt_interface 'eno1' differs from host dgx1's 'enP7s7': it is a cluster-wide setting"),
    ("gid too large", set_all("spark_roce_gid_index", 256),
     "host dgx1: spark_roce_gid_index must be an integer 0-255 (the RoCE GID table of a ConnectX-7 port), got 256"),
    ("gid negative", set_all("spark_roce_gid_index", -1), "host dgx1: spark_roce_gid_index must be an integer 0-255"),
    ("gid string", set_all("spark_roce_gid_index", "3"), "host dgx1: spark_roce_gid_index must be an integer 0-255"),
    ("renderer unknown", set_all("spark_fabric_netplan_renderer", "systemd-networkd"),
     "host dgx1: spark_fabric_netplan_renderer must be NetworkManager or networkd, got 'systemd-networkd'"),
    # paths
    ("model dir dotdot", set_all("spark_model_dir", "/var/lib/sparkfleet/models/../../../etc"),
     "host dgx1: spark_model_dir must be an absolute path without '..'"),
    ("model dir outside", set_all("spark_model_dir", "/etc/models"),
     "host dgx1: spark_model_dir must be below one of /var/lib/sparkfleet, /srv, /data, /mnt, got '/etc/models'"),
    ("model dir is the root", set_all("spark_model_dir", "/var/lib/sparkfleet"),
     "host dgx1: spark_model_dir must be below one of /var/lib/sparkfleet"),
    ("model dir relative", set_all("spark_model_dir", "models/x"), "host dgx1: spark_model_dir must be an absolute path"),
    ("serve model dir outside", set_all("spark_serve_model_dir", "/"), "host dgx1: spark_serve_model_dir must be below one of"),
    ("cache dir dotdot", set_all("spark_serve_cache_dir", "/var/lib/sparkfleet/../cache"),
     "host dgx1: spark_serve_cache_dir must be an absolute path without '..'"),
    ("cache dir newline", set_all("spark_serve_cache_dir", "/var/lib/sparkfleet/cache\n"),
     "host dgx1: spark_serve_cache_dir must be an absolute path without '..'"),
    ("report dir dotdot", set_all("spark_fabric_report_dir", "/work/sparkfleet/build/../../../etc"),
     "host dgx1: spark_fabric_report_dir must be an absolute path without '..'"),
    ("doctor report dir relative", set_all("spark_doctor_report_dir", "build/doctor"),
     "host dgx1: spark_doctor_report_dir must be an absolute path without '..'"),
    # memory guards that cannot protect anything
    ("startup threshold below floor", set_all("spark_serve_guard_startup_threshold", "512MiB"),
     "host dgx1: spark_serve_guard_startup_threshold must be at least 1 GiB, got '512MiB'"),
    ("steady threshold below floor", set_all("spark_serve_guard_steady_threshold", 1024),
     "host dgx1: spark_serve_guard_steady_threshold must be at least 1 GiB, got 1024"),
    ("threshold overflow", set_all("spark_serve_guard_startup_threshold", "99999999999999999999TiB"),
     "host dgx1: spark_serve_guard_startup_threshold must be at most 1024 GiB"),
    ("startup interval above ceiling", set_all("spark_serve_guard_startup_interval", 30),
     "host dgx1: spark_serve_guard_startup_interval must be at most 5 seconds, got 30"),
    ("steady interval overflow", set_all("spark_serve_guard_steady_interval", float("inf")),
     "host dgx1: spark_serve_guard_steady_interval must be at most 5 seconds, got inf"),
    ("steady interval nan", set_all("spark_serve_guard_steady_interval", float("nan")),
     "host dgx1: spark_serve_guard_steady_interval must be a positive number of seconds, got nan"),
    ("wait overflow", set_all("spark_serve_guard_startup_wait", 10 ** 30),
     "host dgx1: spark_serve_guard_startup_wait must be at most 3600 seconds"),
    ("startup not above steady", set_all("spark_serve_guard_steady_threshold", "6GiB"),
     "host dgx1: spark_serve_guard_startup_threshold (5GiB) must be above spark_serve_guard_steady_threshold (6GiB)"),
]


def with_guards(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for e in raw:
        e.update(spark_serve_guard_startup_threshold="5GiB", spark_serve_guard_startup_interval=0.25,
                 spark_serve_guard_startup_wait=120, spark_serve_guard_steady_threshold="3GiB",
                 spark_serve_guard_steady_interval=2)
    return raw


@pytest.mark.parametrize("change,expected", [pytest.param(c, e, id=name) for name, c, e in REFUSED])
def test_validate_refuses_unsafe_or_unusable_input(change: Callable[[list[dict[str, Any]]], None], expected: str) -> None:
    raw = with_guards(triangle())
    change(raw)
    errors = fabric.spark_validate(raw, ["/work/sparkfleet", "/home/op", "/tmp"])
    assert any(expected in e for e in errors), errors


def test_every_error_line_is_one_line() -> None:
    raw = triangle()
    raw[1]["host"] = "dgx2\nLD_PRELOAD=/x"
    raw[0]["spark_mgmt_interface"] = "eno1\nx"
    for e in raw:
        e["spark_nccl_overrides"] = {"NCCL_DEBUG\n": "a\nb"}
    errors = fabric.spark_validate(raw)
    assert errors and all("\n" not in e for e in errors), errors


def test_report_dirs_outside_the_controller_roots() -> None:
    raw = triangle()
    for e in raw:
        e["spark_fabric_report_dir"] = "/etc/sparkfleet/reports"
    errors = fabric.spark_validate(raw, ["/work/sparkfleet", "/home/op"])
    assert ("host dgx1: spark_fabric_report_dir must be below one of /work/sparkfleet, /home/op, "
            "got '/etc/sparkfleet/reports'") in errors, errors
    assert not fabric.spark_validate(raw), "without controller roots only the path's form is checked"


@pytest.mark.parametrize("values", [
    {"spark_model_dir": "/srv/models/deepseek", "spark_serve_cache_dir": "/data/cache"},
    {"spark_fabric_report_dir": "/home/op/reports", "spark_doctor_report_dir": "/work/sparkfleet/build/doctor"},
    {"spark_roce_gid_index": 0, "spark_fabric_netplan_renderer": "networkd"},
    {"spark_nccl_overrides": {"NCCL_DEBUG": "INFO", "NCCL_IB_TIMEOUT": 22, "TORCH_NCCL_BLOCKING_WAIT": "1",
                              "SPARKNET_ROCE_SPIN_LIMIT": None, "NCCL_THREAD_THRESHOLDS": "-2 -2 -2 1 1 1"}},
])
def test_usable_values_pass(values: dict[str, Any]) -> None:
    raw = with_guards(triangle())
    for e in raw:
        e.update(copy.deepcopy(values))
    assert fabric.spark_validate(raw, ["/work/sparkfleet", "/home/op", "/tmp"]) == []


def test_the_netplan_renderer_is_each_nodes_own() -> None:
    raw = triangle()
    set_one(2, "spark_fabric_netplan_renderer", "NetworkManager")(raw)
    for entry in raw[:2]:
        entry["spark_fabric_netplan_renderer"] = "networkd"
    assert fabric.spark_validate(raw) == []


def test_empty_inventory_is_one_line() -> None:
    errors = fabric.spark_validate([])
    assert len(errors) == 1 and "\n" not in errors[0]


def test_render_files_lists_what_render_writes() -> None:
    plan = fabric.spark_plan(triangle())
    assert fabric.spark_render_files(plan, False) == [
        "plan.json", "dgx1/netplan.yaml", "dgx1/nccl.env", "dgx2/netplan.yaml", "dgx2/nccl.env",
        "dgx3/netplan.yaml", "dgx3/nccl.env"]
    assert "dgx2/serve.json" in fabric.spark_render_files(plan, True)
