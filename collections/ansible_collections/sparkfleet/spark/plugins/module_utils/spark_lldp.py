"""LLDP neighbour parsing and the cabling comparison (hardware-and-fabric §3 and §7).

Pure functions: lldpd's ``lldpctl -f json0`` text in, neighbours per local port out; neighbours plus the
planned peer of every port in, a verdict per port out. A ConnectX-7 port hears both PCIe functions of the far
port, so a local interface normally lists two neighbours; only the one on the local interface's own PCIe path
is its peer (hardware-and-fabric §7), the other is the far port's twin. ``json0`` is used because it keeps the same shape
(every value a list) whatever the number of interfaces and neighbours, unlike ``-f json``.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Neighbour:
    """One LLDP neighbour seen on a local port: the far system and its port."""

    system: Optional[str]
    port: Optional[str]
    port_id: Optional[str]
    port_id_type: Optional[str]
    port_descr: Optional[str]

    def label(self) -> str:
        return f"{self.system or '?'}:{self.port or '?'}"


@dataclass(frozen=True)
class Peer:
    """The planned far end of a local port."""

    host: str
    port: str

    def label(self) -> str:
        return f"{self.host}:{self.port}"


def _first_value(items: Any, key: str = "value") -> Optional[str]:
    """json0 wraps every scalar as [{"value": ...}]; return the first one, or None."""
    if isinstance(items, list) and items and isinstance(items[0], Mapping):
        value = items[0].get(key)
        return None if value is None else str(value)
    return None


def _neighbour(entry: Mapping[str, Any]) -> Neighbour:
    chassis = entry.get("chassis") or [{}]
    port = entry.get("port") or [{}]
    port_id = _first_value(port[0].get("id"))
    port_id_type = _first_value(port[0].get("id"), "type")
    port_descr = _first_value(port[0].get("descr"))
    # With `portidsubtype ifname` the far netdev is the port id; older or foreign agents send a MAC there
    # and the interface name in the description.
    name = port_id if port_id_type == "ifname" else port_descr
    system = _first_value(chassis[0].get("name"))
    return Neighbour(system=system.split(".")[0] if system else None, port=name, port_id=port_id,
                     port_id_type=port_id_type, port_descr=port_descr)


def parse_lldpctl_json0(text: str) -> Dict[str, List[Neighbour]]:
    """Neighbours per local interface from ``lldpctl -f json0``; interfaces without neighbours are absent."""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValueError(f"lldpctl output is not JSON: {exc}") from exc
    result: Dict[str, List[Neighbour]] = {}
    for block in doc.get("lldp") or []:
        if not isinstance(block, Mapping):
            raise ValueError("lldpctl json0: 'lldp' must be a list of objects")
        for entry in block.get("interface") or []:
            name = entry.get("name")
            if not name:
                raise ValueError("lldpctl json0: an interface entry has no name")
            result.setdefault(str(name), []).append(_neighbour(entry))
    return result


# Predictable PCI names: en[P<domain>]p<bus>s<slot>f<function>...; the function differs between the two ports of
# one path, the domain between the two paths of one port.
_PCI_NETDEV = re.compile(r"^en(?:P(\d+))?p(\d+)s(\d+)f\d+")


def pcie_path(netdev: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """PCI domain, bus and slot of a CX7 netdev name (enP2p1s0f1np1 -> (2, 1, 0)); None for other names."""
    match = _PCI_NETDEV.match(netdev or "")
    if not match:
        return None
    return int(match.group(1) or 0), int(match.group(2)), int(match.group(3))


def same_path_neighbours(netdev: str, seen: List[Neighbour]) -> List[Neighbour]:
    """The neighbours that can be this port's peer: all of a single one, else those on this port's PCIe path."""
    path = pcie_path(netdev)
    if len(seen) <= 1 or path is None:
        return list(seen)
    return [n for n in seen if pcie_path(n.port) == path]


def _listing(neighbours: List[Neighbour]) -> str:
    return ", ".join(n.label() for n in neighbours)


def _port_problem(netdev: str, want: Peer, seen: List[Neighbour], kept: List[Neighbour],
                  carries: Optional[str]) -> Optional[str]:
    if not seen:
        return f"{netdev}: no LLDP neighbour, plan says {want.label()} (cable unplugged, link down or lldpd stopped there)"
    if not kept:
        return (f"{netdev}: {len(seen)} LLDP neighbours ({_listing(seen)}), none on its PCIe path; "
                f"plan says {want.label()}")
    if len(kept) > 1:
        on_path = " on its PCIe path" if pcie_path(netdev) else ""
        return f"{netdev}: {len(kept)} LLDP neighbours{on_path} ({_listing(kept)}), plan says only {want.label()}"
    got = kept[0]
    if got.system == want.host and got.port == want.port:
        return None
    where = f"; it carries the cable planned for {carries}" if carries else ""
    return f"{netdev}: neighbour is {got.label()}, plan says {want.label()}{where}"


def _planned_port_of(expect: Mapping[str, Peer], kept: List[Neighbour]) -> Optional[str]:
    """The local port whose planned peer is the single neighbour kept, if any."""
    if len(kept) != 1:
        return None
    for netdev, peer in expect.items():
        if peer.host == kept[0].system and peer.port == kept[0].port:
            return netdev
    return None


def compare_cabling(expect: Mapping[str, Peer], neighbours: Mapping[str, List[Neighbour]]
                    ) -> Dict[str, Any]:
    """Verdict per planned local port, the problems, and local port pairs that are swapped.

    ``kept`` in a port's verdict is the neighbour compared with the plan (None unless exactly one remains).
    """
    ports: Dict[str, Dict[str, Any]] = {}
    carries: Dict[str, Optional[str]] = {}
    for netdev, want in expect.items():
        seen = neighbours.get(netdev, [])
        kept = same_path_neighbours(netdev, seen)
        holder = _planned_port_of(expect, kept)
        carries[netdev] = holder if holder != netdev else None
        problem = _port_problem(netdev, want, seen, kept, carries[netdev])
        ports[netdev] = {"ok": problem is None, "expected": asdict(want),
                         "neighbours": [asdict(n) for n in seen],
                         "kept": asdict(kept[0]) if len(kept) == 1 else None, "problem": problem}
    swapped: List[Tuple[str, str]] = sorted({
        tuple(sorted((a, b))) for a, b in carries.items() if b is not None and carries.get(b) == a
    })
    problems = [p["problem"] for p in ports.values() if p["problem"]]
    problems += [f"ports {a} and {b} are swapped (each carries the other's planned cable)" for a, b in swapped]
    return {"ok": not problems, "ports": ports, "problems": problems, "swapped": [list(s) for s in swapped]}


def parse_expect(raw: Mapping[str, Any]) -> Dict[str, Peer]:
    """``{netdev: {host, port}}`` (or ``"host:port"``) into Peers; a clear error names the bad entry."""
    result: Dict[str, Peer] = {}
    for netdev, value in raw.items():
        if isinstance(value, str) and value.count(":") == 1:
            host, port = value.split(":")
        elif isinstance(value, Mapping):
            host, port = value.get("host"), value.get("port")
        else:
            host = port = None
        if not host or not port:
            raise ValueError(f"expect[{netdev}] must be 'host:port' or {{host, port}}, got {value!r}")
        result[str(netdev)] = Peer(host=str(host), port=str(port))
    return result
