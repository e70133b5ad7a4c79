"""LLDP neighbour parsing and the cabling comparison (hardware-and-fabric §3 and §7).

Pure functions: lldpd's ``lldpctl -f json0`` text in, neighbours per local port out; neighbours plus the
planned peer of every port in, a verdict per port out. ``json0`` is used because it keeps the same shape
(every value a list) whatever the number of interfaces and neighbours, unlike ``-f json``.
"""
from __future__ import annotations

import json
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


def _port_problem(netdev: str, want: Peer, seen: List[Neighbour],
                  carries: Optional[str]) -> Optional[str]:
    if not seen:
        return f"{netdev}: no LLDP neighbour, plan says {want.label()} (cable unplugged, link down or lldpd stopped there)"
    if len(seen) > 1:
        listing = ", ".join(n.label() for n in seen)
        return f"{netdev}: {len(seen)} LLDP neighbours ({listing}), plan says only {want.label()}"
    got = seen[0]
    if got.system == want.host and got.port == want.port:
        return None
    where = f"; it carries the cable planned for {carries}" if carries else ""
    return f"{netdev}: neighbour is {got.label()}, plan says {want.label()}{where}"


def _planned_port_of(expect: Mapping[str, Peer], seen: List[Neighbour]) -> Optional[str]:
    """The local port whose planned peer is the single neighbour seen, if any."""
    if len(seen) != 1:
        return None
    for netdev, peer in expect.items():
        if peer.host == seen[0].system and peer.port == seen[0].port:
            return netdev
    return None


def compare_cabling(expect: Mapping[str, Peer], neighbours: Mapping[str, List[Neighbour]]
                    ) -> Dict[str, Any]:
    """Verdict per planned local port, the problems, and local port pairs that are swapped."""
    ports: Dict[str, Dict[str, Any]] = {}
    carries: Dict[str, Optional[str]] = {}
    for netdev, want in expect.items():
        seen = neighbours.get(netdev, [])
        holder = _planned_port_of(expect, seen)
        carries[netdev] = holder if holder != netdev else None
        problem = _port_problem(netdev, want, seen, carries[netdev])
        ports[netdev] = {"ok": problem is None, "expected": asdict(want),
                         "neighbours": [asdict(n) for n in seen], "problem": problem}
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
