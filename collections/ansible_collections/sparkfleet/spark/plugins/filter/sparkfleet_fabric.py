"""Pure planning of the switchless fabric: inventory -> validated nodes -> cable plan -> netplan data.

Every function here is a pure function of its inputs (no I/O, no hostvars mutation), so render.yml
and the roles compute byte-for-byte the same plan from the same inventory.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import netaddr
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain

TOPOLOGY_SIZES: dict[str, tuple[int, int]] = {"pair": (2, 2), "triangle": (3, 3), "ring": (4, 9)}
DEFAULT_MGMT_INTERFACE = "enP7s7"
DEFAULT_FABRIC_PREFIX = 10
DEFAULT_NETPLAN_RENDERER = "NetworkManager"
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

INVENTORY_KEYS = (
    "spark_rank", "spark_node_id", "ansible_host", "spark_mgmt_address", "spark_topology",
    "spark_mgmt_interface", "spark_fabric_prefix", "spark_fabric_ports",
)
GROUP_KEYS = ("spark_topology", "spark_fabric_prefix", "spark_fabric_ports")


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


def _check_ports(host: str, ports: Any) -> list[str]:
    field = f"host {host}: spark_fabric_ports"
    if not isinstance(ports, list):
        return [f"{field} must be a list of ports, got {type(ports).__name__}"]
    errors: list[str] = []
    seen_ports = set()
    names: list[str] = []
    for i, entry in enumerate(ports):
        if not isinstance(entry, Mapping) or not _is_int(entry.get("port")):
            errors.append(f"{field}[{i}] needs an integer 'port'")
            continue
        seen_ports.add(entry["port"])
        paths = entry.get("paths")
        if not isinstance(paths, list):
            errors.append(f"{field} port {entry['port']} needs a list 'paths'")
            continue
        found = set()
        for p in paths:
            if not isinstance(p, Mapping) or not _is_int(p.get("path")):
                errors.append(f"{field} port {entry['port']}: every path needs an integer 'path'")
                continue
            found.add(p["path"])
            for key in ("netdev", "rdma"):
                if not isinstance(p.get(key), str) or not p.get(key):
                    errors.append(f"{field} port {entry['port']} path {p['path']} is missing '{key}'")
                else:
                    names.append(p[key])
        if found != {1, 2}:
            errors.append(f"{field} port {entry['port']} must define paths 1 and 2, found {sorted(found)}")
    if seen_ports != {0, 1}:
        errors.append(f"{field} must define ports 0 and 1, found {sorted(seen_ports)}")
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
    return []


def _node_errors(entry: Mapping[str, Any]) -> list[str]:
    host = entry["host"]
    errors: list[str] = []
    rank = entry.get("spark_rank")
    if rank is None:
        errors.append(f"host {host}: spark_rank is not set")
    elif not _is_int(rank):
        errors.append(f"host {host}: spark_rank must be an integer, got {rank!r}")
    node_id = entry.get("spark_node_id", rank + 1 if _is_int(rank) else None)
    if "spark_node_id" in entry and not _is_int(node_id):
        errors.append(f"host {host}: spark_node_id must be an integer, got {node_id!r}")
    elif _is_int(node_id) and not 1 <= node_id <= 9:
        errors.append(f"host {host}: spark_node_id must be within 1-9, got {node_id}")
    mgmt = entry.get("spark_mgmt_address", entry.get("ansible_host"))
    if mgmt is None:
        errors.append(f"host {host}: spark_mgmt_address (or ansible_host) is not set")
    else:
        errors += _check_address(host, "spark_mgmt_address", mgmt)
    topology = entry.get("spark_topology")
    if topology not in TOPOLOGY_SIZES:
        errors.append(f"host {host}: spark_topology must be one of {', '.join(TOPOLOGY_SIZES)}, got {topology!r}")
    iface = entry.get("spark_mgmt_interface", DEFAULT_MGMT_INTERFACE)
    if not isinstance(iface, str) or not iface:
        errors.append(f"host {host}: spark_mgmt_interface must be an interface name, got {iface!r}")
    errors += _check_prefix(host, entry.get("spark_fabric_prefix", DEFAULT_FABRIC_PREFIX))
    ports = entry.get("spark_fabric_ports", DEFAULT_PORTS)
    errors += _check_ports(host, ports)
    if isinstance(ports, list) and iface in {p.get("netdev") for e in ports if isinstance(e, Mapping)
                                             for p in e.get("paths") or [] if isinstance(p, Mapping)}:
        errors.append(f"host {host}: spark_mgmt_interface {iface} is also a fabric netdev")
    return errors


def _duplicates(entries: Sequence[Mapping[str, Any]], key: str) -> dict[Any, list[str]]:
    seen: dict[Any, list[str]] = {}
    for e in entries:
        value = e.get(key)
        if value is not None and not isinstance(value, (dict, list)):
            seen.setdefault(value, []).append(e["host"])
    return {v: hosts for v, hosts in seen.items() if len(hosts) > 1}


def _cluster_errors(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    for key in GROUP_KEYS:
        values = {repr(e.get(key)) for e in entries}
        if len(values) > 1:
            errors.append(f"{key} differs between hosts ({', '.join(e['host'] for e in entries)}): "
                          "it is a cluster-wide setting")
    topology = entries[0].get("spark_topology") if entries else None
    if topology in TOPOLOGY_SIZES:
        low, high = TOPOLOGY_SIZES[topology]
        if not low <= len(entries) <= high:
            want = str(low) if low == high else f"{low}-{high}"
            errors.append(f"spark_topology {topology} needs {want} hosts in group spark, found {len(entries)}")
    ranks = [e.get("spark_rank") for e in entries]
    if all(_is_int(r) for r in ranks) and sorted(ranks) != list(range(len(entries))):
        for value, hosts in sorted(_duplicates(entries, "spark_rank").items()):
            errors.append(f"hosts {', '.join(hosts)}: spark_rank {value} is duplicated")
        errors.append(f"spark_rank must be exactly 0..{len(entries) - 1} (one per host), got {sorted(ranks)}")
    with_ids = [dict(e, spark_node_id=e.get("spark_node_id", e.get("spark_rank", -1) + 1))
                if _is_int(e.get("spark_rank")) else dict(e) for e in entries]
    for value, hosts in sorted(_duplicates(with_ids, "spark_node_id").items(), key=str):
        errors.append(f"hosts {', '.join(hosts)}: spark_node_id {value} is duplicated")
    with_mgmt = [dict(e, spark_mgmt_address=e.get("spark_mgmt_address", e.get("ansible_host"))) for e in entries]
    for value, hosts in sorted(_duplicates(with_mgmt, "spark_mgmt_address").items(), key=str):
        errors.append(f"hosts {', '.join(hosts)}: spark_mgmt_address {value} is duplicated")
    return errors


def spark_validate(raw: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every inventory-contract error, each naming the host(s) and the variable; [] when valid."""
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise AnsibleFilterError("spark_validate: expected the output of spark_inventory")
    if not raw:
        return ["group spark has no hosts"]
    errors: list[str] = []
    for entry in raw:
        errors += _node_errors(entry)
    return errors + _cluster_errors(raw)


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


def spark_plan(raw: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The complete fabric plan: every node's interfaces, addresses and peers."""
    errors = spark_validate(raw)
    if errors:
        raise AnsibleFilterError("inventory is invalid:\n  " + "\n  ".join(errors))
    topology = raw[0]["spark_topology"]
    nodes = _nodes(raw)
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
        plan_nodes.append({k: n[k] for k in ("host", "rank", "node_id", "mgmt_address", "mgmt_interface")}
                          | {"interfaces": ifaces})
    return {"topology": topology, "nodes": plan_nodes}


def spark_plan_node(plan: Mapping[str, Any], host: str) -> dict[str, Any]:
    """One node of the plan, by inventory host name."""
    for node in plan.get("nodes", []):
        if node.get("host") == host:
            return dict(node)
    raise AnsibleFilterError(f"spark_plan_node: host {host} is not in the plan (is it in group spark?)")


def spark_netplan(node: Mapping[str, Any], renderer: str = DEFAULT_NETPLAN_RENDERER) -> dict[str, Any]:
    """The node's fabric netplan document as data; the management interface is never part of it."""
    if renderer not in ("NetworkManager", "networkd"):
        raise AnsibleFilterError(f"host {node.get('host')}: spark_fabric_netplan_renderer must be "
                                 f"NetworkManager or networkd, got {renderer!r}")
    ethernets: dict[str, Any] = {}
    for iface in node.get("interfaces", []):
        entry: dict[str, Any] = {
            "addresses": [iface["address"]], "mtu": FABRIC_MTU, "dhcp4": False, "dhcp6": False,
            "accept-ra": False, "link-local": [], "optional": True,
        }
        if renderer == "NetworkManager":
            ends = sorted([node["host"], iface["peer_host"]])
            entry["networkmanager"] = {"name": f"cx7 {ends[0]}-{ends[1]} path{iface['path']}"}
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
        }
