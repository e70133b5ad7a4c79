"""Pure planning of the fabric: inventory -> validated nodes -> cable (or switch rail) plan -> netplan data.

Every function here is a pure function of its inputs (no I/O, no hostvars mutation), so render.yml
and the roles compute byte-for-byte the same plan from the same inventory.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

import netaddr
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard as _MEMGUARD
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_nccl_policy as _NCCL_POLICY
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain

TOPOLOGY_SIZES: dict[str, tuple[int, int]] = {"pair": (2, 2), "triangle": (3, 3), "ring": (4, 9),
                                              "switched": (2, 16)}
# Node ids are host octets everywhere; the cabled scheme also writes two of them into one octet
# (10.<a><b>.<path>.0/24), so it needs single digits. A switch shares one /24 per rail: any host octet.
NODE_IDS: dict[str, tuple[int, int]] = {"switched": (1, 254)}
CABLED_NODE_IDS = (1, 9)
# Port p's two rails on a switch: <prefix>.<100 + p>.<path>.0/24 (hardware-and-fabric.md section 4.4).
SWITCH_RAIL_OCTET = 100
DEFAULT_SWITCH_PORTS = [0, 1]
DEFAULT_MGMT_INTERFACE = "enP7s7"
DEFAULT_FABRIC_PREFIX = 10
DEFAULT_NETPLAN_RENDERER = "NetworkManager"
NETPLAN_RENDERERS = ("NetworkManager", "networkd")
DEFAULT_GID_INDEX = 3
# mlx5 reports gid_tbl_len 256 for a ConnectX-7 RoCE port: slots 0-255.
GID_TABLE_LEN = 256
FABRIC_MTU = 9000

# The DGX Spark ConnectX-7 layout (reference: hardware-and-fabric.md section 2): two QSFP ports, each
# with two PCIe functions ("paths"), each function its own netdev and RDMA device.
DEFAULT_PORTS: list[dict[str, Any]] = [
    {"port": 0, "paths": [
        {"path": 1, "netdev": "enp1s0f0np0", "rdma": "rocep1s0f0"},
        {"path": 2, "netdev": "enP2p1s0f0np0", "rdma": "roceP2p1s0f0"},
    ]},
    {"port": 1, "paths": [
        {"path": 1, "netdev": "enp1s0f1np1", "rdma": "rocep1s0f1"},
        {"path": 2, "netdev": "enP2p1s0f1np1", "rdma": "roceP2p1s0f1"},
    ]},
]

# Directories the model and serve stages create, fill and replace on every node: only below these roots
# (never a root itself), so a typo cannot point them at /, /etc or /usr.
HOST_DATA_ROOTS = ("/var/lib/sparkfleet", "/srv", "/data", "/mnt")
HOST_PATH_KEYS = ("spark_model_dir", "spark_serve_model_dir", "spark_serve_cache_dir")
# Directories the controller writes reports into: below the roots validate.yml passes (the checkout, home, /tmp).
CONTROLLER_PATH_KEYS = ("spark_fabric_report_dir", "spark_doctor_report_dir")
GUARD_KEYS = tuple(f"spark_serve_guard_{k}" for k in (
    "startup_threshold", "startup_interval", "startup_wait", "steady_threshold", "steady_interval"))

INVENTORY_KEYS = (
    "spark_rank", "spark_node_id", "ansible_host", "spark_mgmt_address", "spark_topology",
    "spark_mgmt_interface", "spark_fabric_prefix", "spark_fabric_ports", "spark_fabric_netplan_renderer",
    "spark_roce_gid_index", "spark_nccl_overrides", "spark_nccl_profile", "spark_roce_traffic_class",
    "spark_fabric_switch_ports",
) + HOST_PATH_KEYS + CONTROLLER_PATH_KEYS + GUARD_KEYS
# Cluster-wide settings and the default each host has when it does not set one. The netplan renderer is not one:
# it is the daemon of the node's own network stack and shapes only that node's file.
GROUP_KEYS: dict[str, Any] = {
    "spark_topology": None, "spark_fabric_prefix": DEFAULT_FABRIC_PREFIX, "spark_fabric_ports": DEFAULT_PORTS,
    "spark_roce_gid_index": DEFAULT_GID_INDEX,
    "spark_mgmt_interface": DEFAULT_MGMT_INTERFACE,
    "spark_nccl_profile": None, "spark_roce_traffic_class": _NCCL_POLICY.DEFAULT_TRAFFIC_CLASS,
}
# RFC 1123 labels: nothing that could be a path separator, '..', a quote, a space or a control character
# once the name becomes a directory of render's output or a line of a generated file.
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
# Linux netdev names: at most 15 characters (IFNAMSIZ 16); RDMA device names: at most 63 (IB_DEVICE_NAME_MAX).
# Both limited to the characters real devices use, which excludes '=', '/', spaces and control characters.
_DEVICE_NAMES = {"netdev": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$"),
                 "rdma": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")}
_DEVICE_RULES = {"netdev": "up to 15 of A-Z a-z 0-9 _ . -", "rdma": "up to 63 of A-Z a-z 0-9 _ . -"}
_NOT_UNICAST = (netaddr.IPNetwork("0.0.0.0/8"), netaddr.IPNetwork("127.0.0.0/8"), netaddr.IPNetwork("224.0.0.0/3"))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)




def spark_inventory(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> list[dict[str, Any]]:
    """Extract the inventory contract's raw variables per host (no defaults, no checks)."""
    if isinstance(hosts, str) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError("spark_inventory: expected the list of hosts of group 'spark'")
    raw = []
    for host in hosts:
        try:
            hv = hostvars[host]
        except KeyError as exc:
            raise AnsibleFilterError(f"spark_inventory: host {host} has no variables") from exc
        entry: dict[str, Any] = {"host": str(host)}
        for key in INVENTORY_KEYS:
            if key in hv:
                entry[key] = _plain(hv[key])
        raw.append(entry)
    return raw


def _device_error(field: str, key: str, value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return f"{field} is missing '{key}'"
    if not _DEVICE_NAMES[key].match(value):
        return f"{field} {key} must be a device name ({_DEVICE_RULES[key]}), got {value!r}"
    return None


def _check_paths(field: str, port: int, paths: list[Any], names: list[str]) -> list[str]:
    errors: list[str] = []
    found: list[int] = []
    for p in paths:
        if not isinstance(p, Mapping) or not _is_int(p.get("path")):
            errors.append(f"{field} port {port}: every path needs an integer 'path'")
            continue
        if p["path"] in found:
            errors.append(f"{field} port {port} lists path {p['path']} twice")
        found.append(p["path"])
        for key in ("netdev", "rdma"):
            problem = _device_error(f"{field} port {port} path {p['path']}", key, p.get(key))
            if problem:
                errors.append(problem)
            else:
                names.append(p[key])
    if set(found) != {1, 2}:
        errors.append(f"{field} port {port} must define paths 1 and 2, found {sorted(set(found))}")
    return errors


def _check_ports(host: str, ports: Any) -> list[str]:
    field = f"host {host}: spark_fabric_ports"
    if not isinstance(ports, list):
        return [f"{field} must be a list of ports, got {type(ports).__name__}"]
    errors: list[str] = []
    seen_ports: list[int] = []
    names: list[str] = []
    for i, entry in enumerate(ports):
        if not isinstance(entry, Mapping) or not _is_int(entry.get("port")):
            errors.append(f"{field}[{i}] needs an integer 'port'")
            continue
        if entry["port"] in seen_ports:
            errors.append(f"{field} lists port {entry['port']} twice")
        seen_ports.append(entry["port"])
        paths = entry.get("paths")
        if not isinstance(paths, list):
            errors.append(f"{field} port {entry['port']} needs a list 'paths'")
            continue
        errors += _check_paths(field, entry["port"], paths, names)
    if set(seen_ports) != {0, 1}:
        errors.append(f"{field} must define ports 0 and 1, found {sorted(set(seen_ports))}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        errors.append(f"{field} names a device twice: {', '.join(dupes)}")
    return errors


def _check_prefix(host: str, prefix: Any) -> list[str]:
    if isinstance(prefix, str) and prefix.isdigit():
        prefix = int(prefix)
    if not _is_int(prefix) or not 1 <= prefix <= 223 or prefix == 127:
        return [f"host {host}: spark_fabric_prefix must be a first octet 1-223 (not 127), got {prefix!r}"]
    return []


def _check_address(host: str, field: str, value: Any) -> list[str]:
    if not isinstance(value, str) or not netaddr.valid_ipv4(value):
        return [f"host {host}: {field} must be an IPv4 address, got {value!r}"]
    if any(netaddr.IPAddress(value) in net for net in _NOT_UNICAST):
        return [f"host {host}: {field} must be a unicast address (not 0.0.0.0/8, loopback, multicast or "
                f"broadcast), got {value!r}"]
    return []


def _check_host_name(host: str) -> list[str]:
    if not _HOSTNAME.match(host):
        return [f"host {host!r}: the inventory host name must be a hostname (letters, digits and '-' in "
                "dot-separated labels): it names render's output directory and appears in generated files"]
    if host.lower() == "localhost" or host.lower().startswith("localhost."):
        return [f"host {host}: localhost cannot be a cluster node (it is the controller)"]
    return []


def _check_identity(entry: Mapping[str, Any], topology: Any) -> list[str]:
    host = entry["host"]
    errors: list[str] = []
    rank = entry.get("spark_rank")
    if rank is None:
        errors.append(f"host {host}: spark_rank is not set")
    elif not _is_int(rank):
        errors.append(f"host {host}: spark_rank must be an integer, got {rank!r}")
    node_id = entry.get("spark_node_id", rank + 1 if _is_int(rank) else None)
    low, high = NODE_IDS.get(topology, CABLED_NODE_IDS)
    if "spark_node_id" in entry and not _is_int(node_id):
        errors.append(f"host {host}: spark_node_id must be an integer, got {node_id!r}")
    elif _is_int(node_id) and not low <= node_id <= high:
        why = " (the host octet of every rail address)" if topology in NODE_IDS else ""
        errors.append(f"host {host}: spark_node_id must be within {low}-{high}{why}, got {node_id}")
    mgmt = entry.get("spark_mgmt_address", entry.get("ansible_host"))
    if mgmt is None:
        errors.append(f"host {host}: spark_mgmt_address (or ansible_host) is not set")
    else:
        errors += _check_address(host, "spark_mgmt_address", mgmt)
    return errors


def _check_fabric(entry: Mapping[str, Any]) -> list[str]:
    host = entry["host"]
    errors: list[str] = []
    iface = entry.get("spark_mgmt_interface", DEFAULT_MGMT_INTERFACE)
    if not isinstance(iface, str) or not _DEVICE_NAMES["netdev"].match(iface):
        errors.append(f"host {host}: spark_mgmt_interface must be an interface name "
                      f"({_DEVICE_RULES['netdev']}), got {iface!r}")
    errors += _check_prefix(host, entry.get("spark_fabric_prefix", DEFAULT_FABRIC_PREFIX))
    ports = entry.get("spark_fabric_ports", DEFAULT_PORTS)
    errors += _check_ports(host, ports)
    if isinstance(ports, list) and iface in {p.get("netdev") for e in ports if isinstance(e, Mapping)
                                             for p in e.get("paths") or [] if isinstance(p, Mapping)}:
        errors.append(f"host {host}: spark_mgmt_interface {iface} is also a fabric netdev")
    renderer = entry.get("spark_fabric_netplan_renderer", DEFAULT_NETPLAN_RENDERER)
    if renderer not in NETPLAN_RENDERERS:
        errors.append(f"host {host}: spark_fabric_netplan_renderer must be NetworkManager or networkd, got {renderer!r}")
    gid = entry.get("spark_roce_gid_index", DEFAULT_GID_INDEX)
    if not _is_int(gid) or not 0 <= gid < GID_TABLE_LEN:
        errors.append(f"host {host}: spark_roce_gid_index must be an integer 0-{GID_TABLE_LEN - 1} "
                      f"(the RoCE GID table of a ConnectX-7 port), got {gid!r}")
    return errors


def _switch_port_list(entry: Mapping[str, Any]) -> Any:
    return entry.get("spark_fabric_switch_ports", DEFAULT_SWITCH_PORTS)


def _usable_switch_ports(ports: Any) -> bool:
    # Whole ports, never single functions: a cable carries both functions of its port, and an unaddressed
    # twin advertises no IPv4 GID, so RDMA to it fails (hardware-and-fabric.md section 6.4).
    return (isinstance(ports, list) and bool(ports) and all(_is_int(p) and p in (0, 1) for p in ports)
            and len(set(ports)) == len(ports))


def _check_switch(entry: Mapping[str, Any], topology: Any) -> list[str]:
    """The switch-only settings: which QSFP ports reach the switch, and RoCE's traffic class there."""
    host = entry["host"]
    if topology != "switched":
        return [f"host {host}: {key} is only for spark_topology switched (a cabled topology has no switch)"
                for key in ("spark_fabric_switch_ports", "spark_roce_traffic_class") if key in entry]
    errors: list[str] = []
    ports = _switch_port_list(entry)
    if not _usable_switch_ports(ports):
        errors.append(f"host {host}: spark_fabric_switch_ports must list the QSFP ports cabled to the switch "
                      f"(0, 1 or both, each once), got {ports!r}")
    tclass = entry.get("spark_roce_traffic_class", _NCCL_POLICY.DEFAULT_TRAFFIC_CLASS)
    if not _is_int(tclass) or not 0 <= tclass <= 255:
        errors.append(f"host {host}: spark_roce_traffic_class must be an integer 0-255, got {tclass!r}")
    return errors


def _switched_profile(entry: Mapping[str, Any], topology: Any) -> str | None:
    """The switched profile a host's overrides are checked against; None off a switch."""
    if topology != "switched":
        return None
    chosen = entry.get("spark_nccl_profile")
    return chosen if chosen in _NCCL_POLICY.SWITCHED_PROFILES else _NCCL_POLICY.SWITCHED_PROFILES[0]


def _path_error(key: str, value: Any, roots: Sequence[str]) -> str | None:
    if (not isinstance(value, str) or not value.startswith("/") or _NCCL_POLICY.unsafe_text(value)
            or ".." in value.split("/")):
        return f"{key} must be an absolute path without '..', '=' or control characters, got {value!r}"
    normal = posixpath.normpath(value)
    if roots and not any(normal.startswith(root.rstrip("/") + "/") for root in roots):
        return f"{key} must be below one of {', '.join(roots)}, got {value!r}"
    return None


def _check_paths_and_guards(entry: Mapping[str, Any], controller_roots: Sequence[str]) -> list[str]:
    host = entry["host"]
    errors: list[str] = []
    for keys, roots in ((HOST_PATH_KEYS, HOST_DATA_ROOTS), (CONTROLLER_PATH_KEYS, controller_roots)):
        for key in keys:
            problem = _path_error(key, entry[key], roots) if key in entry else None
            if problem:
                errors.append(f"host {host}: {problem}")
    guards = {k[len("spark_serve_"):]: entry[k] for k in GUARD_KEYS if k in entry}
    errors += [f"host {host}: spark_serve_{field} {problem}" for field, problem in _MEMGUARD.setting_errors(guards)]
    return errors


def _node_errors(entry: Mapping[str, Any], controller_roots: Sequence[str]) -> list[str]:
    host = entry["host"]
    topology = entry.get("spark_topology")
    errors = _check_host_name(host) + _check_identity(entry, topology)
    if topology not in TOPOLOGY_SIZES:
        errors.append(f"host {host}: spark_topology must be one of {', '.join(TOPOLOGY_SIZES)}, got {topology!r}")
    errors += _check_fabric(entry) + _check_switch(entry, topology)
    chosen = entry.get("spark_nccl_profile")
    if chosen is not None and chosen not in _NCCL_POLICY.PROFILE_NAMES:
        errors.append(f"host {host}: spark_nccl_profile must be one of {', '.join(_NCCL_POLICY.PROFILE_NAMES)}, "
                      f"got {chosen!r}")
    errors += _NCCL_POLICY.override_errors(f"host {host}: spark_nccl_overrides", entry.get("spark_nccl_overrides", {}),
                                           ring=topology == "ring",
                                           switched_profile=_switched_profile(entry, topology))
    return errors + _check_paths_and_guards(entry, controller_roots)


def _duplicates(entries: Sequence[Mapping[str, Any]], key: str) -> dict[Any, list[str]]:
    seen: dict[Any, list[str]] = {}
    for e in entries:
        value = e.get(key)
        if value is not None and not isinstance(value, (dict, list)):
            seen.setdefault(value, []).append(e["host"])
    return {v: hosts for v, hosts in seen.items() if len(hosts) > 1}


def _group_errors(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per host whose cluster-wide setting differs from the first host's."""
    errors: list[str] = []
    first = entries[0]
    for key, default in GROUP_KEYS.items():
        want = first.get(key, default)
        for e in entries[1:]:
            have = e.get(key, default)
            if have == want:
                continue
            values = "" if isinstance(have, (dict, list)) or isinstance(want, (dict, list)) else f" {have!r}"
            theirs = f" {want!r}" if values else ""
            errors.append(f"host {e['host']}: {key}{values} differs from host {first['host']}'s{theirs}: "
                          "it is a cluster-wide setting")
    return errors


def _rail_errors(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """On a switch rail i uses the same subnet on every node, so every node reaches the switch on the same ports."""
    ports = [_switch_port_list(e) for e in entries]
    if not all(_usable_switch_ports(p) for p in ports):
        return []  # already reported per host
    first, want = entries[0]["host"], sorted(ports[0])
    errors = []
    for e, have in zip(entries[1:], ports[1:]):
        if len(have) != len(want):
            errors.append(f"host {e['host']}: spark_fabric_switch_ports gives {2 * len(have)} rails, host {first} "
                          f"{2 * len(want)}: every node on a switch needs the same rail count")
        elif sorted(have) != want:
            errors.append(f"host {e['host']}: spark_fabric_switch_ports {sorted(have)} differs from host {first}'s "
                          f"{want}: each rail's subnet belongs to one port, so every node uses the same ports")
    return errors


def _cluster_errors(entries: Sequence[Mapping[str, Any]], group: str) -> list[str]:
    errors = _group_errors(entries)
    topology = entries[0].get("spark_topology") if entries else None
    if topology in TOPOLOGY_SIZES:
        low, high = TOPOLOGY_SIZES[topology]
        if not low <= len(entries) <= high:
            want = str(low) if low == high else f"{low}-{high}"
            errors.append(f"spark_topology {topology} needs {want} hosts in group {group}, found {len(entries)}")
        elif entries[0].get("spark_nccl_profile") in _NCCL_POLICY.PROFILE_NAMES:
            problem = _NCCL_POLICY.profile_error(f"host {entries[0]['host']}: spark_nccl_profile",
                                                 entries[0]["spark_nccl_profile"], topology, len(entries))
            errors += [problem] if problem else []
    if topology == "switched":
        errors += _rail_errors(entries)
    ranks = [e.get("spark_rank") for e in entries]
    if all(_is_int(r) for r in ranks) and sorted(ranks) != list(range(len(entries))):
        for value, hosts in sorted(_duplicates(entries, "spark_rank").items()):
            errors.append(f"hosts {', '.join(hosts)}: spark_rank {value} is duplicated")
        where = "" if group == "spark" else f" of group {group}"
        errors.append(f"spark_rank must be exactly 0..{len(entries) - 1} (one per host{where}), got {sorted(ranks)}")
    with_ids = [dict(e, spark_node_id=e.get("spark_node_id", e.get("spark_rank", -1) + 1))
                if _is_int(e.get("spark_rank")) else dict(e) for e in entries]
    for value, hosts in sorted(_duplicates(with_ids, "spark_node_id").items(), key=str):
        errors.append(f"hosts {', '.join(hosts)}: spark_node_id {value} is duplicated")
    with_mgmt = [dict(e, spark_mgmt_address=e.get("spark_mgmt_address", e.get("ansible_host"))) for e in entries]
    for value, hosts in sorted(_duplicates(with_mgmt, "spark_mgmt_address").items(), key=str):
        errors.append(f"hosts {', '.join(hosts)}: spark_mgmt_address {value} is duplicated")
    # Two inventory hosts reaching the same machine would configure one node twice.
    for value, hosts in sorted(_duplicates(entries, "ansible_host").items(), key=str):
        errors.append(f"hosts {', '.join(hosts)}: ansible_host {value} is duplicated")
    return errors


def _one_line(error: str) -> str:
    """Errors quote what the inventory holds; a newline in it must not forge a second error line."""
    return error.replace("\n", "\\n").replace("\r", "\\r")


def spark_validate(raw: Sequence[Mapping[str, Any]], controller_roots: Sequence[str] = (),
                   group: str = "spark") -> list[str]:
    """Every inventory-contract error of one serving group, each naming the host(s) and the variable; [] when valid.

    controller_roots are the directories report paths must lie below (validate.yml passes them); without
    them only the form of those paths is checked. group is the serving group's name, for the messages.
    """
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise AnsibleFilterError("spark_validate: expected the output of spark_inventory")
    if not raw:
        return [f"group {group} has no hosts: the inventory defines no cluster node"]
    roots = [str(r) for r in controller_roots if r]
    errors: list[str] = []
    for entry in raw:
        errors += _node_errors(entry, roots)
    return [_one_line(e) for e in errors + _cluster_errors(raw, group)]


def spark_render_files(plan: Mapping[str, Any], with_serve: bool) -> list[str]:
    """The files render.yml writes for a plan, relative to its output directory (plan.json first)."""
    per_node = ("netplan.yaml", "nccl.env") + (("serve.json",) if with_serve else ())
    return ["plan.json"] + [f"{n['host']}/{name}" for n in plan.get("nodes", []) for name in per_node]


def _nodes(raw: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Normalise validated raw entries with the contract's defaults, sorted by rank."""
    nodes = []
    for e in raw:
        prefix = e.get("spark_fabric_prefix", DEFAULT_FABRIC_PREFIX)
        nodes.append({
            "host": e["host"],
            "rank": e["spark_rank"],
            "node_id": e.get("spark_node_id", e["spark_rank"] + 1),
            "mgmt_address": e.get("spark_mgmt_address", e.get("ansible_host")),
            "mgmt_interface": e.get("spark_mgmt_interface", DEFAULT_MGMT_INTERFACE),
            "prefix": int(prefix),
            "ports": {p["port"]: {q["path"]: q for q in p["paths"]} for p in e.get("spark_fabric_ports", DEFAULT_PORTS)},
            "switch_ports": sorted(_switch_port_list(e)),
        })
    return sorted(nodes, key=lambda n: n["rank"])


def _cables(topology: str, count: int) -> list[tuple[int, int, int, int, int]]:
    """(rank_a, port_a, rank_b, port_b, cable_index) for every cable; cable_index 0 or 1."""
    if topology == "pair":
        # Two cables between the same two nodes: the second uses subnet paths 3 and 4.
        return [(0, 0, 1, 1, 0), (0, 1, 1, 0, 1)]
    return [(r, 0, (r + 1) % count, 1, 0) for r in range(count)]


def _subnet(prefix: int, id_a: int, id_b: int, path: int) -> netaddr.IPNetwork:
    low, high = sorted((id_a, id_b))
    return netaddr.IPNetwork(f"{prefix}.{low}{high}.{path}.0/24")


def _host_address(subnet: netaddr.IPNetwork, node_id: int) -> str:
    return str(netaddr.IPAddress(int(subnet.network) + node_id))


_NODE_KEYS = ("host", "rank", "node_id", "mgmt_address", "mgmt_interface")


def _rail_subnet(prefix: int, port: int, path: int) -> netaddr.IPNetwork:
    return netaddr.IPNetwork(f"{prefix}.{SWITCH_RAIL_OCTET + port}.{path}.0/24")


def _switched_plan(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One /24 per rail shared by every node, the node id as host octet: no cables, no peers."""
    plan_nodes = []
    for n in nodes:
        ifaces = []
        for port in n["switch_ports"]:
            for path in (1, 2):
                subnet, end = _rail_subnet(n["prefix"], port, path), n["ports"][port][path]
                ifaces.append({"netdev": end["netdev"], "rdma": end["rdma"], "port": port, "path": path,
                               "address": f"{_host_address(subnet, n['node_id'])}/{subnet.prefixlen}",
                               "subnet": str(subnet)})
        plan_nodes.append({k: n[k] for k in _NODE_KEYS} | {"switch_ports": n["switch_ports"], "interfaces": ifaces})
    first = nodes[0]
    rails = [{"port": port, "path": path, "subnet": str(_rail_subnet(first["prefix"], port, path))}
             for port in first["switch_ports"] for path in (1, 2)]
    return {"topology": "switched", "rails": rails, "nodes": plan_nodes}


def spark_plan(raw: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The complete fabric plan: every node's interfaces, addresses and peers (rails on a switch)."""
    errors = spark_validate(raw)
    if errors:
        raise AnsibleFilterError("inventory is invalid:\n  " + "\n  ".join(errors))
    topology = raw[0]["spark_topology"]
    nodes = _nodes(raw)
    if topology == "switched":
        return _switched_plan(nodes)
    interfaces: dict[int, list[dict[str, Any]]] = {n["rank"]: [] for n in nodes}
    for rank_a, port_a, rank_b, port_b, cable in _cables(topology, len(nodes)):
        a, b = nodes[rank_a], nodes[rank_b]
        for function in (1, 2):
            path = function + 2 * cable
            subnet = _subnet(a["prefix"], a["node_id"], b["node_id"], path)
            end_a, end_b = a["ports"][port_a][function], b["ports"][port_b][function]
            addr_a, addr_b = _host_address(subnet, a["node_id"]), _host_address(subnet, b["node_id"])
            for me, mine, my_port, my_addr, peer, theirs, their_addr in (
                (a, end_a, port_a, addr_a, b, end_b, addr_b),
                (b, end_b, port_b, addr_b, a, end_a, addr_a),
            ):
                interfaces[me["rank"]].append({
                    "netdev": mine["netdev"], "rdma": mine["rdma"], "port": my_port, "path": path,
                    "address": f"{my_addr}/{subnet.prefixlen}", "subnet": str(subnet),
                    "peer_host": peer["host"], "peer_rank": peer["rank"], "peer_netdev": theirs["netdev"],
                    "peer_address": their_addr,
                })
    plan_nodes = []
    for n in nodes:
        ifaces = sorted(interfaces[n["rank"]], key=lambda i: (i["port"], i["path"]))
        plan_nodes.append({k: n[k] for k in _NODE_KEYS} | {"interfaces": ifaces})
    return {"topology": topology, "nodes": plan_nodes}


def spark_plan_node(plan: Mapping[str, Any], host: str) -> dict[str, Any]:
    """One node of the plan, by inventory host name."""
    for node in plan.get("nodes", []):
        if node.get("host") == host:
            return dict(node)
    raise AnsibleFilterError(f"spark_plan_node: host {host} is not in the plan (is it in group spark?)")


def spark_netplan(node: Mapping[str, Any], renderer: str = DEFAULT_NETPLAN_RENDERER) -> dict[str, Any]:
    """The node's fabric netplan document as data; the management interface is never part of it."""
    if renderer not in NETPLAN_RENDERERS:
        raise AnsibleFilterError(f"host {node.get('host')}: spark_fabric_netplan_renderer must be "
                                 f"NetworkManager or networkd, got {renderer!r}")
    ethernets: dict[str, Any] = {}
    for iface in node.get("interfaces", []):
        entry: dict[str, Any] = {
            "addresses": [iface["address"]], "mtu": FABRIC_MTU, "dhcp4": False, "dhcp6": False,
            "accept-ra": False, "link-local": [], "optional": True,
        }
        if renderer == "NetworkManager":
            if "peer_host" in iface:
                low, high = sorted([node["host"], iface["peer_host"]])
                name = f"cx7 {low}-{high} path{iface['path']}"
            else:  # a switch rail has no far end to name: this node's port and path
                name = f"cx7 {node['host']} switch port{iface['port']} path{iface['path']}"
            # `link-local: []` only removes fe80:: under networkd; NetworkManager's keyfile would say
            # ipv6.method=ignore and leave the kernel's link-local address in place, and a fabric port must
            # carry no IPv6 at all (GID index 3 stays the IPv4 RoCE v2 GID; drift and doctor refuse any IPv6).
            entry["networkmanager"] = {"name": name, "passthrough": {"ipv6.method": "disabled"}}
        ethernets[iface["netdev"]] = entry
    return {"network": {"version": 2, "renderer": renderer, "ethernets": ethernets}}


class FilterModule:
    """sparkfleet fabric planning filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_inventory": spark_inventory,
            "spark_validate": spark_validate,
            "spark_plan": spark_plan,
            "spark_plan_node": spark_plan_node,
            "spark_netplan": spark_netplan,
            "spark_render_files": spark_render_files,
        }
