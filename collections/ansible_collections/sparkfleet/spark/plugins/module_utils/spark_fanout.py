"""Fan-out over the fabric: who sends the image or the model to whom, in which wave, to which address.

On cables a node reaches over the fabric only the peers it is cabled to: on a triangle every other node, on a
four-node ring its two neighbours. On a switch every node reaches every node sharing a rail with it. Every node
that already holds the payload can send it. In each wave every holder sends, in parallel, to each reachable node
that still lacks it, so the payload spreads along the cables. On a ring from dgx1 that means dgx1→dgx2 and
dgx1→dgx4 first, then dgx2→dgx3 (the reference copied r6d the same way: dgx4→dgx1, dgx4→dgx3, then
dgx1→dgx2). The address is the receiver's own fabric address on the cable or rail between the two nodes (path 1
first). The management network is used only when the caller allows it: for a source that is not on the fabric
(the controller, say), or for a target no fabric path reaches.

Pure: the input is the `nodes` list of the fabric plan (`spark_plan`, also written to plan.json).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_disk import human_bytes


class FanoutError(Exception):
    """The plan cannot deliver to every target; the message names the nodes."""


def _rail_members(nodes: Sequence[Mapping[str, Any]]) -> Dict[str, List[Tuple[str, str]]]:
    """{subnet: [(host, address without prefix)]} of the interfaces without a planned peer: switch rails."""
    rails: Dict[str, List[Tuple[str, str]]] = {}
    for node in nodes:
        for iface in node.get("interfaces") or []:
            if not iface.get("peer_host") and iface.get("subnet") and iface.get("address"):
                rails.setdefault(str(iface["subnet"]), []).append((node["host"], str(iface["address"]).split("/")[0]))
    return rails


def cable_addresses(nodes: Sequence[Mapping[str, Any]]) -> Dict[Tuple[str, str], List[str]]:
    """{(sender, receiver): receiver's fabric addresses, path order}: on a cable from the sender's interface (its
    peer), on a switch rail every other node of the rail."""
    links: Dict[Tuple[str, str], List[Tuple[int, str]]] = {}
    paths = {str(i.get("subnet")): int(i.get("path") or 0) for n in nodes for i in n.get("interfaces") or []}
    for node in nodes:
        for iface in node.get("interfaces") or []:
            peer, address = iface.get("peer_host"), iface.get("peer_address")
            if peer and address:
                links.setdefault((node["host"], peer), []).append((int(iface.get("path") or 0), str(address)))
    for subnet, members in _rail_members(nodes).items():
        for sender, _ in members:
            for receiver, address in members:
                if receiver != sender:
                    links.setdefault((sender, receiver), []).append((paths[subnet], address))
    return {pair: [a for _, a in sorted(entries)] for pair, entries in links.items()}


def _order(nodes: Sequence[Mapping[str, Any]]) -> Dict[str, int]:
    return {n["host"]: int(n.get("rank", i)) for i, n in enumerate(nodes)}


def fanout_waves(nodes: Sequence[Mapping[str, Any]], source: str, targets: Sequence[str],
                 holders: Sequence[str] = (), management_fallback: bool = False) -> List[List[Dict[str, Any]]]:
    """Waves of transfers [{from, to, address, addresses, network}] that bring the payload to every target.

    `holders` already have the payload (ranks holding the exact image, say) and may send too. Within a wave a
    receiver gets exactly one sender: the holder cabled to it with the fewest sends in that wave, then lowest rank.
    """
    known = {n["host"] for n in nodes}
    unknown = sorted(set(targets) - known)
    if unknown:
        raise FanoutError(f"fan-out targets not in the fabric plan: {', '.join(unknown)}")
    links = cable_addresses(nodes)
    rank = _order(nodes)
    mgmt = {n["host"]: n.get("mgmt_address") for n in nodes}
    have: Set[str] = {source, *holders}
    missing = sorted(set(targets) - have, key=lambda h: rank[h])
    waves: List[List[Dict[str, Any]]] = []
    if source not in known and missing:
        waves.append(_management_wave(source, missing, mgmt, management_fallback, "is not on the fabric"))
        return waves
    while missing:
        wave = _fabric_wave(sorted(have & known, key=lambda h: rank[h]), missing, links)
        if not wave:
            waves.append(_management_wave(source, missing, mgmt, management_fallback,
                                          "has no cable path from a holder"))
            break
        waves.append(wave)
        have.update(t["to"] for t in wave)
        missing = [h for h in missing if h not in have]
    return waves


def _fabric_wave(senders: Sequence[str], missing: Sequence[str],
                 links: Mapping[Tuple[str, str], List[str]]) -> List[Dict[str, Any]]:
    load = {s: 0 for s in senders}
    wave = []
    for target in missing:
        cabled = [s for s in senders if (s, target) in links]
        if not cabled:
            continue
        sender = min(cabled, key=lambda s: (load[s], senders.index(s)))
        load[sender] += 1
        addresses = links[(sender, target)]
        wave.append({"from": sender, "to": target, "address": addresses[0], "addresses": list(addresses),
                     "network": "fabric"})
    return wave


def _management_wave(source: str, missing: Sequence[str], mgmt: Mapping[str, Optional[str]], allowed: bool,
                     why: str) -> List[Dict[str, Any]]:
    if not allowed:
        subject = f"source {source}" if why == "is not on the fabric" else ", ".join(missing)
        raise FanoutError(f"{subject} {why}; cannot reach {', '.join(missing)} over the fabric "
                          "(allow the management-network fallback to send there)")
    return [{"from": source, "to": target, "address": mgmt[target], "addresses": [mgmt[target]],
             "network": "management"} for target in missing]


# --- Registry waves ------------------------------------------------------------------------------------
# The waves above, carried by registries: in each wave every sender runs a registry on its own addresses toward
# its receivers, and each receiver pulls by digest from its sender over their cable (or rail), so only the layers
# it lacks move, all receivers at once. A receiver that sends in a later wave pulled the image first and then
# serves it from its own registry. Transfers over the management network (the fallback) stay streams.

def _addresses_by(pulls: Sequence[Mapping[str, Any]], key: str) -> Dict[str, List[str]]:
    """{pull[key]: the pulls' addresses, each once, in order}: a sender's listen addresses or a receiver's."""
    found: Dict[str, List[str]] = {}
    for pull in pulls:
        addresses = found.setdefault(pull[key], [])
        if pull["address"] not in addresses:
            addresses.append(pull["address"])
    return found


def registry_waves(nodes: Sequence[Mapping[str, Any]], source: str, targets: Sequence[str],
                   holders: Sequence[str] = (), management_fallback: bool = False) -> Dict[str, Any]:
    """{waves: [{registries: [{host, listen}], pulls: [{to, from, address}]}], stream: [[management transfers]],
    servers: {sender: listen addresses of all its waves}, names: {sender: its fabric addresses (its certificate)},
    clients: {receiver: the registry addresses it pulls from}}.

    `address` is the sender's own fabric address on the receiver's first path to it; `listen` are a sender's
    addresses its receivers use, nothing else. `servers`, `names` and `clients` let every registry be set up
    at once, before the first wave."""
    links = cable_addresses(nodes)
    waves: List[Dict[str, Any]] = []
    stream: List[List[Dict[str, Any]]] = []
    for wave in fanout_waves(nodes, source, targets, holders, management_fallback):
        fabric = [t for t in wave if t["network"] == "fabric"]
        if len(fabric) < len(wave):
            stream.append([t for t in wave if t["network"] != "fabric"])
        if not fabric:
            continue
        pulls = [{"to": t["to"], "from": t["from"], "address": links[(t["to"], t["from"])][0]} for t in fabric]
        listen = _addresses_by(pulls, "from")
        waves.append({"registries": [{"host": h, "listen": a} for h, a in listen.items()], "pulls": pulls})
    every_pull = [pull for wave in waves for pull in wave["pulls"]]
    servers = _addresses_by(every_pull, "from")
    clients = _addresses_by(every_pull, "to")
    names = {host: fabric_addresses(nodes, host) for host in servers}
    return {"waves": waves, "stream": stream, "servers": servers, "names": names, "clients": clients}


def fabric_addresses(nodes: Sequence[Mapping[str, Any]], host: str) -> List[str]:
    """Every fabric address (without prefix) of the host in the plan, path order: what its certificate names."""
    for node in nodes:
        if node["host"] == host:
            ifaces = sorted(node.get("interfaces") or [], key=lambda i: int(i.get("path") or 0))
            return [str(i["address"]).split("/")[0] for i in ifaces if i.get("address")]
    raise FanoutError(f"{host} is not in the fabric plan")


_LAYER_LINE = re.compile(r"^([0-9a-f]{12}): (.+)$")


def pull_layers(lines: Sequence[str]) -> Dict[str, int]:
    """{layers, held, pulled}: of `docker pull`'s plain output (one status line per layer and change), the layers
    of the image, those the engine held already, and those pulled and extracted so far."""
    last: Dict[str, str] = {}
    for line in lines:
        match = _LAYER_LINE.match(str(line).strip())
        if match:
            last[match.group(1)] = match.group(2).strip()
    return {"layers": len(last), "held": sum(1 for v in last.values() if v == "Already exists"),
            "pulled": sum(1 for v in last.values() if v == "Pull complete")}


def pull_progress_lines(pulls: Sequence[Mapping[str, Any]], logs: Mapping[str, Sequence[str]],
                        ended: Mapping[str, Any], elapsed_s: Any) -> List[str]:
    """One line per pull of a registry wave ({from, to}): layers pulled of those the receiver lacked, and whether
    it ended (`ended`, by receiver; how it ended is the pull's own result). The first line says how long the wave
    has run."""
    if isinstance(elapsed_s, bool) or not isinstance(elapsed_s, (int, float)) or elapsed_s < 0:
        raise FanoutError(f"elapsed_s must be seconds >= 0, got {elapsed_s!r}")
    lines = [f"{int(elapsed_s)} s since the wave started"]
    for pull in pulls:
        receiver = str(pull.get("to") or "")
        if receiver not in logs:
            raise FanoutError(f"no pull output for the receiver {receiver or '(unnamed)'} of {pull.get('from')}")
        count = pull_layers(logs[receiver])
        needed = count["layers"] - count["held"]
        text = f"{pull.get('from')} -> {receiver}: {count['pulled']} of {needed} layers pulled"
        if count["held"]:
            text += f" ({count['held']} held already)"
        lines.append(text + (", ended" if ended.get(receiver) else ", pulling"))
    return lines


def delivery_paths(current: Sequence[str], retag: Sequence[str], registry: Sequence[Mapping[str, Any]],
                   stream: Sequence[Sequence[Mapping[str, Any]]], port: Optional[int]) -> List[str]:
    """One line per rank, sorted by host: how it got the payload in this run (held it, retagged, pulled from which
    rank's registry at which address in which wave, or streamed from whom to which address over which network)."""
    lines = {h: f"{h}: held it already" for h in current}
    lines.update({h: f"{h}: held it under another name, tagged" for h in retag})
    for number, wave in enumerate(registry, start=1):
        for pull in wave.get("pulls") or []:
            lines[pull["to"]] = (f"{pull['to']}: pulled by digest from the registry on {pull['from']} at "
                                 f"{pull['address']}:{port} (fabric, wave {number})")
    for number, wave in enumerate(stream, start=len(registry) + 1):
        for t in wave:
            lines[t["to"]] = (f"{t['to']}: streamed from {t['from']} to {t['address']} ({t.get('network', 'fabric')}, "
                              f"wave {number}{', relayed copy' if t.get('from_relay') else ''})")
    return [lines[h] for h in sorted(lines)]


# --- Holders are hashed before they send ----------------------------------------------------------
# A holder passed the cheap size check; a same-size corrupt file passes it too, and rsync would spread it to
# every rank the holder feeds. So every holder that may send is hashed first and only verified ones send.

def possible_senders(nodes: Sequence[Mapping[str, Any]], source: str, targets: Sequence[str],
                     holders: Sequence[str]) -> List[str]:
    """The holders (the source aside) cabled to a target: the only ones a wave can choose as a sender (a
    holder with no cable to a rank lacking data never sends, and later waves only shrink that set)."""
    links = cable_addresses(nodes)
    rank = _order(nodes)
    chosen = {h for h in holders if h != source and any((h, t) in links for t in targets)}
    return sorted(chosen, key=lambda h: (rank.get(h, len(rank)), h))


def vetted_holders(holders: Sequence[str], senders: Sequence[str],
                   checks: Mapping[str, Mapping[str, Any]]) -> Tuple[List[str], Dict[str, str]]:
    """(holders that may send, {refused holder: message naming its bad files}). Each of `senders` must have a
    hashed check (spark_model_manifest verify) that passed; one that failed or did not run is refused and
    becomes a target again."""
    refused: Dict[str, str] = {}
    for host in senders:
        check = checks.get(host) or {}
        if check.get("ok") is True:
            continue
        problems = check.get("problems") if "ok" in check else None
        what = ("; ".join(f"{p.get('path')}: {p.get('problem')}" for p in problems) if problems
                else "its files were not hashed")
        refused[host] = f"{host} (holder, not sent from): {what}; it is synced again from a verified holder"
    return [h for h in holders if h not in refused], refused


# --- Progress of a wave -----------------------------------------------------------------------------
# A transfer of tens of GiB runs for minutes; the controller reads each receiver's bytes once per round and
# prints one line per transfer, so an operator sees which cable carries what and whether it still moves.

def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise FanoutError(f"{field} must be a number of bytes >= 0, got {value!r}")
    return int(value)


def progress_lines(wave: Sequence[Mapping[str, Any]], arrived: Mapping[str, Any], ended: Mapping[str, Any],
                   total_bytes: Any, elapsed_s: Any, previous: Optional[Mapping[str, Any]] = None,
                   interval_s: Any = 0) -> List[str]:
    """One line per transfer of `wave` ({from, to}): bytes on the receiver (`arrived`, by host) of `total_bytes`
    (one count for every transfer, or a count by receiver; 0: unknown), the rate since `previous` (bytes by
    host, `interval_s` ago) and whether it ended (`ended`, by host; how it ended is the transfer's own result). The first line says how long the wave has run."""
    if isinstance(elapsed_s, bool) or not isinstance(elapsed_s, (int, float)) or elapsed_s < 0:
        raise FanoutError(f"elapsed_s must be seconds >= 0, got {elapsed_s!r}")
    lines = [f"{int(elapsed_s)} s since the wave started"]
    for transfer in wave:
        receiver = str(transfer.get("to") or "")
        if not receiver or receiver not in arrived:
            raise FanoutError(f"no byte count for the receiver {receiver or '(unnamed)'} of {transfer.get('from')}")
        done = _count(arrived[receiver], f"bytes of {receiver}")
        total = _count(total_bytes.get(receiver, 0) if isinstance(total_bytes, Mapping) else total_bytes,
                       f"total bytes of {receiver}")
        text = f"{transfer.get('from')} -> {receiver}: {human_bytes(done)}"
        if total:
            text += f" of {human_bytes(total)} ({min(done / total, 1.0) * 100:.1f} %)"
        if previous is not None and receiver in previous and interval_s and float(interval_s) > 0:
            gained = max(done - _count(previous[receiver], f"previous bytes of {receiver}"), 0)
            text += f", {human_bytes(int(gained / float(interval_s)))}/s"
        lines.append(text + (", ended" if ended.get(receiver) else ", sending"))
    return lines
