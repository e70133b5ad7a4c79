"""Fabric path probes and live-state drift (hardware-and-fabric §5 and §7).

Pure functions: iputils ``ping`` output in, a probe result out; ``ip -j address`` output and the planned
interfaces in, the live state and every difference from the plan out. The modules run the commands.
"""
from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

FABRIC_MTU = 9000
# 9000-byte IP packet = 8972 bytes of ICMP payload + 8 ICMP + 20 IP header bytes.
IP_ICMP_OVERHEAD = 28

_STATS = re.compile(r"(\d+) packets transmitted, (\d+) received(?:, \+(\d+) errors)?")
_RTT = re.compile(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_LOCAL_ERROR = re.compile(r"local error: (.+)")


@dataclass(frozen=True)
class PingResult:
    """What one ``ping -c N`` run showed."""

    transmitted: int
    received: int
    errors: int
    rtt_min_ms: Optional[float]
    rtt_avg_ms: Optional[float]
    rtt_max_ms: Optional[float]
    local_error: Optional[str]

    @property
    def all_received(self) -> bool:
        return self.transmitted > 0 and self.received == self.transmitted

    @property
    def none_received(self) -> bool:
        return self.received == 0


def parse_ping(output: str) -> PingResult:
    """Parse iputils ping output (stdout and stderr together); raise ValueError without a summary line."""
    stats = _STATS.search(output)
    if not stats:
        raise ValueError(f"no ping statistics in output: {output.strip()[-200:]!r}")
    rtt = _RTT.search(output)
    local = _LOCAL_ERROR.search(output)
    return PingResult(
        transmitted=int(stats.group(1)), received=int(stats.group(2)), errors=int(stats.group(3) or 0),
        rtt_min_ms=float(rtt.group(1)) if rtt else None, rtt_avg_ms=float(rtt.group(2)) if rtt else None,
        rtt_max_ms=float(rtt.group(3)) if rtt else None, local_error=local.group(1).strip() if local else None,
    )


def ping_command(ping: str, netdev: str, address: str, size: int, count: int, timeout: int) -> List[str]:
    """Don't-fragment ping bound to one netdev; the interval is short so a probe costs well under a second."""
    return [ping, "-M", "do", "-s", str(size), "-c", str(count), "-W", str(timeout), "-i", "0.2",
            "-I", netdev, address]


def path_verdict(path: Mapping[str, Any], jumbo: PingResult, oversize: Optional[PingResult],
                 size: int) -> Dict[str, Any]:
    """One line of the path matrix: every jumbo probe answered and (when probed) the oversize one refused."""
    problems: List[str] = []
    if not jumbo.all_received:
        problems.append(f"{size}-byte DF ping: {jumbo.received}/{jumbo.transmitted} answered"
                        + (f" ({jumbo.local_error})" if jumbo.local_error else ""))
    if oversize is not None and not oversize.none_received:
        problems.append(f"{size + 1}-byte DF ping was answered: the path MTU is above {size + IP_ICMP_OVERHEAD}")
    return {
        "netdev": path["netdev"], "peer_host": path.get("peer_host"), "peer_netdev": path.get("peer_netdev"),
        "peer_address": path["peer_address"], "size": size, "ok": not problems,
        "rtt_ms": jumbo.rtt_avg_ms, "rtt_max_ms": jumbo.rtt_max_ms,
        "received": jumbo.received, "transmitted": jumbo.transmitted,
        "oversize_refused": None if oversize is None else oversize.none_received,
        "problems": problems,
    }


# --- live state and drift -----------------------------------------------------------------------

@dataclass(frozen=True)
class LinkState:
    """The live facts of one netdev that the plan decides."""

    netdev: str
    mtu: Optional[int]
    operstate: Optional[str]
    ipv4: List[str]
    ipv6: List[str]


def parse_ip_address(text: str) -> Dict[str, LinkState]:
    """``ip -j address`` output into LinkState per netdev."""
    try:
        links = json.loads(text) if text.strip() else []
    except ValueError as exc:
        raise ValueError(f"ip -j address output is not JSON: {exc}") from exc
    result: Dict[str, LinkState] = {}
    for link in links:
        if not isinstance(link, Mapping) or "ifname" not in link:
            continue
        infos = link.get("addr_info") or []
        result[str(link["ifname"])] = LinkState(
            netdev=str(link["ifname"]), mtu=link.get("mtu"), operstate=link.get("operstate"),
            ipv4=sorted(f"{a['local']}/{a['prefixlen']}" for a in infos if a.get("family") == "inet"),
            ipv6=sorted(f"{a['local']}/{a['prefixlen']}" for a in infos if a.get("family") == "inet6"),
        )
    return result


def _normal(address: str) -> str:
    return str(ipaddress.ip_interface(address))


def link_drift(want: Mapping[str, Any], have: Optional[LinkState], mtu: int = FABRIC_MTU) -> List[str]:
    """Every difference between one planned interface and its live state."""
    netdev = want["netdev"]
    if have is None:
        return [f"{netdev}: netdev is missing"]
    problems = []
    if have.mtu != mtu:
        problems.append(f"{netdev}: MTU {have.mtu}, plan {mtu}")
    planned = {_normal(want["address"])}
    live = {_normal(a) for a in have.ipv4}
    if live != planned:
        problems.append(f"{netdev}: IPv4 {', '.join(sorted(live)) or 'none'}, plan {', '.join(sorted(planned))}")
    if have.ipv6:
        problems.append(f"{netdev}: IPv6 addresses {', '.join(have.ipv6)}, plan has IPv6 off (no link-local)")
    if have.operstate not in ("UP", "UNKNOWN"):
        problems.append(f"{netdev}: link is {have.operstate}")
    return problems


def fabric_drift(interfaces: Sequence[Mapping[str, Any]], live: Mapping[str, LinkState],
                 mtu: int = FABRIC_MTU) -> Dict[str, Any]:
    """Drift of every planned interface, plus the live state of each (for the report)."""
    per: Dict[str, List[str]] = {i["netdev"]: link_drift(i, live.get(i["netdev"]), mtu) for i in interfaces}
    return {
        "ok": not any(per.values()),
        "differences": [p for problems in per.values() for p in problems],
        "interfaces": {
            name: {"state": asdict(live[name]) if name in live else None, "differences": problems}
            for name, problems in per.items()
        },
    }
