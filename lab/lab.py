#!/usr/bin/env python3
"""Bring the sparkfleet lab up or down from an inventory's rendered plan.

The lab stands in for DGX Sparks: one systemd container per planned host of every serving group, a
management network carrying each node's management address, and one internal Docker network per cable path
or switch rail (exact planned /24, MTU 9000) whose interfaces are renamed to the planned ConnectX-7 netdev
names and left without an address, like a fresh Spark port. Every object carries the label
``sparkfleet.lab=<lab name>`` so that teardown removes exactly what the lab created.

Ansible reaches the nodes as it reaches Sparks: SSH to the management address as root, with pipelining
and one persistent master per node. The lab's own key pair and the nodes' host keys live in
``<state dir>/ssh/`` (host keys checked strictly); the masters' sockets in a directory of the lab's own,
closed on every bring-up and teardown so that no master outlives the containers it reached.

An inventory whose hosts carry no ``spark_rank`` (a scenario of one node: host roles, memory guard, scheduled
bench) has no plan to render: its lab is its hosts on the management network alone, at the addresses its
hosts.yml gives. Every scenario's lab comes from an inventory this way, so every scenario reaches its nodes
the same way.

Labs sit in slots. The topology labs share their host names (dgx1...) and so one slot, ``fleet``: bringing
one up removes another. A scenario lab whose hosts are its own has a slot of its own and runs beside them.

    lab.py up --topology tp4 --inventory inventories/tp4-ring --state-dir .lab/tp4 \
        --node-image TAG --base-image TAG --base-archive FILE [--slot fleet]
    lab.py inventory --topology tp4 --inventory inventories/tp4-ring --state-dir .lab/tp4
    lab.py down --state-root .lab [--slot SLOT]   # every lab, or the labs of one slot
    lab.py leftovers [--slot SLOT]  # prints every object labelled for a lab; exit 1 when there is one
    lab.py session [--slot SLOT] -- CMD  # CMD (a scenario, a benchmark) holding the slot's lab lock throughout
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

LABEL = "sparkfleet.lab"
SLOT_LABEL = "sparkfleet.lab.slot"
FLEET = "fleet"
PREFIX = "sparkfleet"
ROOT = Path(__file__).resolve().parents[1]
COLLECTION = ROOT / "collections" / "ansible_collections" / "sparkfleet" / "spark"
CGROUP_ENV = "SPARK_LAB_CGROUP"
LLDP_FWD_MASK = 1 << 0x0E
CABLE, RAIL = "cable", "rail"
LOCK_FILE = Path(os.environ.get("SPARK_LAB_LOCK", "/run/lock/sparkfleet-lab.lock"))
SESSION_ENV = "SPARK_LAB_SESSION"
SYSTEMD_TIMEOUT = int(os.environ.get("SPARK_LAB_SYSTEMD_TIMEOUT", "180"))
# ssh's ControlPath must fit a socket address (108 bytes): a short directory, not one under the state dir.
CONTROL_ROOT = Path(os.environ.get("SPARK_LAB_SSH_CONTROL_ROOT", "/tmp/sparkfleet-lab-ssh"))
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
# The planning filters' default management interface (a Spark's 10 GbE port), for nodes without a plan.
DEFAULT_MGMT_INTERFACE = "enP7s7"
NETWORKD, NETWORKMANAGER = "networkd", "NetworkManager"
# The lab's own registry CA directory, beside its inventory.
REGISTRY_CA = "registry-ca"


class LabError(Exception):
    """A lab problem worth one clear line to the operator."""


# --------------------------------------------------------------------------- pure planning


@dataclass(frozen=True)
class Endpoint:
    """One end of a cable path: the node and the netdev name that end must carry."""

    host: str
    netdev: str
    address: str  # the planned address (without prefix), used only to identify Docker's interface


@dataclass(frozen=True)
class FabricNetwork:
    """One planned fabric /24 as an internal Docker network: a cable path (exactly two ends) or a switch rail
    (every node on the switch)."""

    kind: str  # CABLE or RAIL
    network: str
    subnet: str
    gateway: str
    ends: tuple[Endpoint, ...]
    # A cable carries LLDP between its two ends; a switch does not forward it from one host to another.
    forward_lldp: bool


@dataclass(frozen=True)
class Node:
    """One lab node, named after its inventory host."""

    host: str
    mgmt_address: str
    mgmt_interface: str
    renderer: str = NETWORKD  # the netplan renderer the node runs (its inventory renders the fabric for it)


@dataclass
class LabPlan:
    """Everything the bring-up creates, derived from plan.json only."""

    name: str
    mgmt_network: str
    mgmt_subnet: str
    mgmt_gateway: str
    nodes: list[Node]
    fabric: list[FabricNetwork] = field(default_factory=list)
    slot: str = FLEET

    @property
    def labels(self) -> list[str]:
        """`docker create` options labelling an object for this lab and its slot."""
        return ["--label", f"{LABEL}={self.name}", "--label", f"{SLOT_LABEL}={self.slot}"]

    @property
    def cables(self) -> list[FabricNetwork]:
        return [n for n in self.fabric if n.kind == CABLE]

    @property
    def rails(self) -> list[FabricNetwork]:
        return [n for n in self.fabric if n.kind == RAIL]


@dataclass(frozen=True)
class Access:
    """How the controller reaches the lab's nodes over SSH: key pair, pinned host keys, masters' sockets."""

    key: Path
    known_hosts: Path
    control_dir: Path

    @classmethod
    def of(cls, state_dir: Path, lab: LabPlan) -> Access:
        return cls(key=state_dir / "ssh" / "id_ed25519", known_hosts=state_dir / "ssh" / "known_hosts",
                   control_dir=CONTROL_ROOT / lab.slot / lab.name)


def free_gateway(subnet: ipaddress.IPv4Network, used: set[str]) -> str:
    """Highest host address of the subnet that no node uses (.254 in the planned /24s)."""
    for candidate in reversed(list(subnet.hosts())):
        if str(candidate) not in used:
            return str(candidate)
    raise LabError(f"subnet {subnet}: no free address left for the Docker gateway")


def mgmt_subnet(nodes: list[dict[str, Any]]) -> ipaddress.IPv4Network:
    """The /24 holding every management address; the lab has one flat management network."""
    nets = {ipaddress.ip_interface(f"{n['mgmt_address']}/24").network for n in nodes}
    if len(nets) != 1:
        listing = ", ".join(f"{n['host']}={n['mgmt_address']}" for n in nodes)
        raise LabError(f"management addresses span several /24s ({listing}); the lab needs one /24")
    return nets.pop()


def plan_kind(plan: dict[str, Any]) -> str:
    """A switched plan puts every node of a rail on one /24; every other topology cables pairs of nodes."""
    return RAIL if plan.get("topology") == "switched" else CABLE


def plan_ends(plan: dict[str, Any]) -> Iterator[tuple[str, Endpoint]]:
    """(subnet, end) of every planned fabric interface of one plan."""
    for node in plan["nodes"]:
        for iface in node["interfaces"]:
            address = ipaddress.ip_interface(iface["address"])
            yield str(address.network), Endpoint(node["host"], iface["netdev"], str(address.ip))


def fabric_ends(plans: list[dict[str, Any]]) -> dict[str, tuple[str, list[Endpoint]]]:
    """Every planned interface of every group by subnet, with the kind of network its plan makes of it.

    Switched groups on the same rails share the subnets, so the ends of a rail come from several plans. Cabled
    groups may reuse subnets on cables of their own, but Docker refuses two networks of one subnet."""
    by_subnet: dict[str, tuple[str, list[Endpoint]]] = {}
    group_of: dict[str, str] = {}  # the first group planning each subnet, to name both in a conflict
    for plan in plans:
        kind, group = plan_kind(plan), str(plan.get("group") or plan.get("topology"))
        for subnet, end in plan_ends(plan):
            seen, ends = by_subnet.setdefault(subnet, (kind, []))
            first = group_of.setdefault(subnet, group)
            if seen != kind:
                raise LabError(f"subnet {subnet} is a {seen} of group {first} and a {kind} of group {group}: "
                               "one Docker network cannot be both")
            if kind == CABLE and first != group:
                raise LabError(f"cable subnet {subnet} is planned by groups {first} and {group}: their cables are "
                               "apart, but one Docker engine cannot hold two networks of one subnet")
            ends.append(end)
    return by_subnet


def check_ends(kind: str, subnet: str, ends: list[Endpoint]) -> None:
    """A cable joins exactly two hosts; a rail joins two or more, each host and address once."""
    hosts, addresses = {e.host for e in ends}, {e.address for e in ends}
    where = ", ".join(f"{e.host}:{e.netdev}" for e in ends)
    if kind == CABLE and (len(ends) != 2 or len(hosts) != 2):
        raise LabError(f"cable subnet {subnet} must join exactly two hosts, plan has: {where}")
    if kind == RAIL and (len(ends) < 2 or len(hosts) != len(ends) or len(addresses) != len(ends)):
        raise LabError(f"switch rail {subnet} must join two or more hosts, each once at its own address, "
                       f"plan has: {where}")


def fabric_networks(name: str, plans: list[dict[str, Any]]) -> list[FabricNetwork]:
    """One Docker network per planned fabric subnet, in subnet order."""
    networks = []
    by_subnet = fabric_ends(plans)
    for subnet in sorted(by_subnet, key=ipaddress.ip_network):
        kind, ends = by_subnet[subnet]
        check_ends(kind, subnet, ends)
        base = subnet.split("/", 1)[0].rsplit(".", 1)[0]
        networks.append(FabricNetwork(
            kind=kind,
            network=f"{PREFIX}-{name}-{kind}-{base}",
            subnet=subnet,
            gateway=free_gateway(ipaddress.IPv4Network(subnet), {e.address for e in ends}),
            ends=tuple(ends),
            forward_lldp=kind == CABLE,
        ))
    return networks


def node_renderer(index: int, count: int) -> str:
    """The netplan renderer of the node at `index` of the plan: the last node of a lab with two or more nodes
    runs NetworkManager (DGX OS's renderer), the others systemd-networkd, so every lab applies, checks and
    re-runs the fabric under both."""
    return NETWORKMANAGER if count > 1 and index == count - 1 else NETWORKD


def inventory_hosts(hosts_yml: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every host of a hosts.yml with the variables hosts.yml gives it (group vars of its groups, then its own)."""
    found: dict[str, dict[str, Any]] = {}

    def walk(group: dict[str, Any], inherited: dict[str, Any]) -> None:
        scope = {**inherited, **(group.get("vars") or {})}
        for host, hvars in (group.get("hosts") or {}).items():
            found[host] = {**found.get(host, {}), **scope, **(hvars or {})}
        for child in (group.get("children") or {}).values():
            walk(child or {}, scope)

    for group in (hosts_yml or {}).values():
        walk(group or {}, {})
    return found


def has_ranks(inventory: Path) -> bool:
    """Whether any host of the inventory has a serving rank (in hosts.yml or its host_vars), i.e. a plan."""
    hosts = inventory_hosts(yaml.safe_load((inventory / "hosts.yml").read_text()) or {})
    if any("spark_rank" in hvars for hvars in hosts.values()):
        return True
    host_vars = inventory / "host_vars"
    files = sorted(host_vars.rglob("*.y*ml")) if host_vars.is_dir() else []
    return any("spark_rank" in (yaml.safe_load(f.read_text()) or {}) for f in files)


def plain_nodes(hosts_yml: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes of an inventory without a plan: each host at its management address (spark_mgmt_address, else
    ansible_host) on its management interface, in the order hosts.yml lists them."""
    nodes = []
    for host, hvars in inventory_hosts(hosts_yml).items():
        address = hvars.get("spark_mgmt_address") or hvars.get("ansible_host")
        if not address:
            raise LabError(f"{host}: no spark_mgmt_address or ansible_host in hosts.yml; a lab node needs its "
                           "management address")
        nodes.append({"host": host, "mgmt_address": str(address),
                      "mgmt_interface": hvars.get("spark_mgmt_interface", DEFAULT_MGMT_INTERFACE)})
    return nodes


def lab_plan(name: str, plans: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None,
             slot: str = FLEET) -> LabPlan:
    """Translate the rendered plans of every serving group (or, for an inventory without a plan, its plain
    nodes) into the lab's Docker objects."""
    nodes = nodes if nodes is not None else [n for plan in plans for n in plan.get("nodes") or []]
    if not nodes:
        raise LabError("plan.json has no nodes")
    hosts = [n["host"] for n in nodes]
    twice = sorted({h for h in hosts if hosts.count(h) > 1})
    if twice:
        raise LabError(f"planned in more than one serving group: {', '.join(twice)}")
    subnet = mgmt_subnet(nodes)
    return LabPlan(
        name=name,
        mgmt_network=f"{PREFIX}-{name}-mgmt",
        mgmt_subnet=str(subnet),
        mgmt_gateway=free_gateway(subnet, {n["mgmt_address"] for n in nodes}),
        nodes=[Node(n["host"], n["mgmt_address"], n["mgmt_interface"], node_renderer(i, len(nodes)))
               for i, n in enumerate(nodes)],
        fabric=fabric_networks(name, plans),
        slot=slot,
    )


def volume_name(lab: LabPlan, node: Node) -> str:
    """Per-node volume for /var/lib/docker, so the nested engine gets overlay2 on a real filesystem."""
    return f"{PREFIX}-{lab.name}-{node.host}-docker"


def cgroup_mount(fs_type: str, requested: str) -> str:
    """The cgroup bind mount for systemd nodes.

    cgroup v2 (cgroup2fs): the measured rw mount. cgroup v1 or hybrid (a tmpfs of per-controller
    mounts): a read-only bind of the tmpfs; Docker < 25 leaves the controller submounts writable, which
    is what systemd and the nested engine need. ``SPARK_LAB_CGROUP=rw|ro`` overrides the detection.
    """
    if requested not in ("auto", "rw", "ro"):
        raise LabError(f"{CGROUP_ENV}={requested}: expected auto, rw or ro")
    mode = requested if requested != "auto" else ("rw" if fs_type == "cgroup2fs" else "ro")
    return f"/sys/fs/cgroup:/sys/fs/cgroup:{mode}"


def run_args(lab: LabPlan, node: Node, image: str, cgroup: str) -> list[str]:
    """`docker create` arguments: systemd as PID 1 with the measured capability set, never privileged."""
    return [
        "docker", "create", "--name", node.host, "--hostname", node.host, *lab.labels,
        "--network", lab.mgmt_network, "--ip", node.mgmt_address,
        "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN",
        "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
        "--cgroupns=host", "-v", cgroup,
        "--tmpfs", "/run", "--tmpfs", "/run/lock",
        "-v", f"{volume_name(lab, node)}:/var/lib/docker",
        "--stop-signal", "SIGRTMIN+3",
        *ipv6_sysctls(node),
        image,
    ]


def ipv6_sysctls(node: Node) -> list[str]:
    """Docker disables IPv6 in a container's network namespace unless its network has IPv6. A Spark's kernel
    has it on, so every port gets an fe80:: address when its link comes up; the NetworkManager node gets that
    back, which makes removing it NetworkManager's job as on a Spark (its /proc/sys stays read-only)."""
    if node.renderer != NETWORKMANAGER:
        return []
    return ["--sysctl", "net.ipv6.conf.all.disable_ipv6=0", "--sysctl", "net.ipv6.conf.default.disable_ipv6=0"]


def networkmanager_conf(node: Node) -> str:
    """NetworkManager settings of a lab node: no automatic "Wired connection" profile on any port, and hands
    off the management interface Docker set up and the nested engine's bridges and veths. The cable ports
    stay managed: the fabric's netplan profiles are the only ones they get."""
    unmanaged = [f"interface-name:{node.mgmt_interface}", "interface-name:docker0", "interface-name:br-*",
                 "interface-name:veth*"]
    return ("# Written by lab/lab.py.\n[main]\nno-auto-default=*\n\n"
            f"[keyfile]\nunmanaged-devices={';'.join(unmanaged)}\n")


def renderer_vars(node: Node) -> str | None:
    """host_vars of a node whose renderer differs from the lab's group-wide networkd."""
    if node.renderer == NETWORKD:
        return None
    return ("---\n# Written by lab/lab.py: this node runs NetworkManager, DGX OS's netplan renderer.\n"
            f"spark_fabric_netplan_renderer: {node.renderer}\n")


def rename_batch(moves: list[tuple[str, str]], keep_address: bool) -> str:
    """`ip -batch` script renaming interfaces (old, new): down, rename, (flush), up."""
    lines = []
    for old, new in moves:
        lines += [f"link set dev {old} down", f"link set dev {old} name {new}"]
        if not keep_address:
            lines.append(f"address flush dev {new}")
        lines.append(f"link set dev {new} up")
    return "\n".join(lines) + "\n"


def interface_by_address(addr_json: list[dict[str, Any]], address: str) -> str:
    """Name of the interface holding `address` in `ip -j address` output."""
    for link in addr_json:
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and info.get("local") == address:
                return str(link["ifname"])
    raise LabError(f"no interface holds {address}")


def connection_vars(address: str, access: Access) -> dict[str, Any]:
    """Inventory variables that reach a lab node over SSH at its management address, as a Spark is reached.

    Set per host rather than in ansible.cfg, so that every run against the lab inventory (molecule's own
    ansible.cfg included) connects the same way: pipelining (one round trip per task), strict host keys.
    """
    return {
        "ansible_host": address,
        "ansible_connection": "ansible.builtin.ssh",
        "ansible_user": "root",
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": str(access.key),
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={access.known_hosts} -o IdentitiesOnly=yes",
        "ansible_ssh_host_key_checking": True,
        "ansible_ssh_pipelining": True,
        "ansible_control_path_dir": str(access.control_dir),
    }


def lab_hosts(source_hosts: dict[str, Any], lab: LabPlan, access: Access) -> dict[str, Any]:
    """The source inventory's hosts.yml with each host reached over SSH at its lab management address.

    Every variable stays; the management address is pinned because the source defaults it to ansible_host.
    """
    by_host = {n.host: n for n in lab.nodes}

    def walk(group: dict[str, Any]) -> dict[str, Any]:
        out = dict(group)
        if isinstance(group.get("hosts"), dict):
            out["hosts"] = {}
            for host, hvars in group["hosts"].items():
                hvars = dict(hvars or {})
                if host in by_host:
                    address = by_host[host].mgmt_address
                    hvars.update({**connection_vars(address, access), "spark_mgmt_address": address})
                out["hosts"][host] = hvars
        if isinstance(group.get("children"), dict):
            out["children"] = {k: walk(v or {}) for k, v in group["children"].items()}
        return out

    return {name: walk(group or {}) for name, group in source_hosts.items()}


# --------------------------------------------------------------------------- I/O


def log(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def sh(args: list[str], check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(args[:4])} ...: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def labelled(kind: str, label: str) -> list[str]:
    """Names of Docker objects of `kind` (container, network, volume) carrying `label`."""
    fmt = {"container": "{{.Names}}", "network": "{{.Name}}", "volume": "{{.Name}}"}[kind]
    listing = ["docker", "ps", "-a"] if kind == "container" else ["docker", kind, "ls"]
    out = sh([*listing, "--filter", f"label={label}", "--format", fmt]).stdout
    return sorted(line for line in out.splitlines() if line)


def remove_all(label: str) -> dict[str, list[str]]:
    """Remove every container, then network, then volume carrying `label`."""
    removed = {kind: labelled(kind, label) for kind in ("container", "network", "volume")}
    if removed["container"]:
        sh(["docker", "rm", "-f", "-v", *removed["container"]])
    if removed["network"]:
        remove_networks(removed["network"])
    if removed["volume"]:
        sh(["docker", "volume", "rm", "-f", *removed["volume"]])
    return removed


def lock_file(slot: str) -> Path:
    """The lock of a slot: the fleet's is the machine's lab lock, every other slot's sits beside it."""
    return LOCK_FILE if slot == FLEET else LOCK_FILE.with_name(f"{LOCK_FILE.stem}-{slot}{LOCK_FILE.suffix}")


def slot_filter(slot: str | None) -> str:
    """The Docker label filter of one slot's objects, or of every lab's when no slot is named."""
    return f"{SLOT_LABEL}={slot}" if slot else LABEL


STALE_ENDPOINTS = "has active endpoints"


def remove_networks(networks: list[str]) -> None:
    """Remove the networks once their containers are gone. Docker 20.10 sometimes keeps an endpoint of a removed
    container, and the network then refuses removal for good: after a few tries the engine is restarted, which
    drops such endpoints, but only while it runs no container at all (lab/engine.sh restart)."""
    for attempt in range(4):
        proc = sh(["docker", "network", "rm", *networks], check=False)
        left = [n for n in networks if n in labelled("network", LABEL)]
        if proc.returncode == 0 or not left:
            return
        if STALE_ENDPOINTS not in proc.stderr:
            raise LabError(f"docker network rm {' '.join(left)}: {proc.stderr.strip()}")
        networks = left
        time.sleep(1)
        if attempt == 2:
            log(f"{', '.join(left)}: Docker kept endpoints of removed containers; restarting the idle engine")
            restart = sh([str(ROOT / "lab" / "engine.sh"), "restart"], check=False)
            if restart.returncode != 0:
                raise LabError(f"networks {', '.join(left)} keep endpoints of removed containers and the engine "
                               f"cannot be restarted now: {restart.stderr.strip()}")
    raise LabError(f"networks {', '.join(networks)} keep endpoints of removed containers even after an engine "
                   "restart (docker network inspect; journal or /var/log/sparkfleet-dockerd.log)")


@contextmanager
def lab_lock(slot: str) -> Iterator[None]:
    """The lock of a lab slot: container names are host names, so two labs of one slot cannot coexist on one
    engine and two bring-ups would tear each other down. A session (`lab.py session -- CMD`: a scenario,
    a benchmark) holds it for its whole run, and the bring-ups and teardowns inside it take it as theirs;
    outside a session each operation holds it for itself."""
    lock = lock_file(slot)
    if os.environ.get(SESSION_ENV) == str(lock):
        yield
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another lab session or operation holds {lock}; waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def session(args: argparse.Namespace) -> None:
    """Run a command holding the slot's lab lock; lab operations of that slot inside it (SESSION_ENV names the
    lock) go ahead."""
    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise LabError("session: no command given (lab.py session -- CMD ...)")
    proc = subprocess.run(command, env={**os.environ, SESSION_ENV: str(lock_file(args.slot))}, check=False)
    if proc.returncode != 0:
        sys.exit(proc.returncode)


def render_inputs_hash(inventory: Path) -> str:
    """Hash of everything the rendered plan depends on: the inventory and the planning code."""
    # The filters read their defaults from two data modules (the pins and the serving profiles).
    paths = [inventory, COLLECTION / "plugins" / "filter", COLLECTION / "plugins" / "module_utils" / "spark_pins.py",
             COLLECTION / "plugins" / "module_utils" / "spark_serve_profiles.py", COLLECTION / "templates",
             ROOT / "playbooks" / "render.yml", ROOT / "playbooks" / "validate.yml"]
    digest = hashlib.sha256()
    for base in paths:
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for path in files:
            if "__pycache__" in path.parts or not path.exists():
                continue
            digest.update(str(path.relative_to(ROOT if path.is_relative_to(ROOT) else path.anchor)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def plan_files(out_dir: Path) -> list[Path]:
    """The plans of a render: its plan.json (one serving group), else every <group>/plan.json by group name."""
    top = out_dir / "plan.json"
    return [top] if top.is_file() else sorted(out_dir.glob("*/plan.json"))


def read_plans(out_dir: Path) -> list[dict[str, Any]]:
    files = plan_files(out_dir)
    if not files:
        raise LabError(f"{out_dir} holds no plan.json nor <group>/plan.json")
    return [json.loads(f.read_text()) for f in files]


def render_plan(inventory: Path, out_dir: Path) -> list[dict[str, Any]]:
    """Run the project's render playbook and return the plan of every serving group: the lab never recomputes
    fabric addresses itself.

    Skipped when neither the inventory nor the planning code changed since the last render.
    """
    out_dir = out_dir.resolve()  # ansible-playbook resolves a relative spark_render_dir from playbooks/
    stamp = out_dir / ".inputs"
    inputs = render_inputs_hash(inventory)
    if plan_files(out_dir) and stamp.exists() and stamp.read_text() == inputs:
        return read_plans(out_dir)
    # A fresh directory: the plans read back are this render's, never a group an earlier inventory had.
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    playbook = ROOT / "playbooks" / "render.yml"
    binary = Path(sys.executable).parent / "ansible-playbook"
    proc = sh([str(binary if binary.exists() else "ansible-playbook"), "-i", str(inventory), str(playbook),
               "-e", f"spark_render_dir={out_dir}"], check=False)
    if proc.returncode != 0:
        raise LabError(f"render of {inventory} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    plans = read_plans(out_dir)
    stamp.write_text(inputs)
    return plans


def host_vars_dir(host_vars: Path, host: str) -> Path:
    """The host's directory under host_vars/, made from its file there if the source inventory has one: Ansible
    reads a host's directory and then ignores a file of the same host beside it."""
    target = host_vars / host
    files = [host_vars / f"{host}{ext}" for ext in ("", ".yml", ".yaml", ".json")]
    files = [f for f in files if f.is_file()]
    moved = [(f, f.with_name(f".{f.name}.moving")) for f in files]
    for f, temporary in moved:
        f.rename(temporary)
    target.mkdir(parents=True, exist_ok=True)
    for f, temporary in moved:
        temporary.rename(target / (f.name if f.suffix else f"{f.name}.yml"))
    return target


def write_inventory(source: Path, dest: Path, lab: LabPlan, access: Access) -> Path:
    """Write the lab inventory in the format of `source` (group_vars/host_vars copied, hosts rewritten)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for sub in ("group_vars", "host_vars"):
        if (source / sub).is_dir():
            shutil.copytree(source / sub, tmp / sub)
        else:
            (tmp / sub).mkdir()  # always present: molecule links both directories
    # Lab nodes run systemd-networkd (all but the last, which runs NetworkManager) and have no GPU, NVIDIA
    # driver or RDMA device: the inventory settings the lab changes (checks that need the hardware report not
    # applicable). The lab's registry CA lives with the lab, never in the controller's own fleet CA.
    (tmp / "group_vars" / "spark").mkdir(parents=True, exist_ok=True)
    (tmp / "group_vars" / "spark" / "lab.yml").write_text(
        "---\n# Written by lab/lab.py: the lab nodes render the fabric for systemd-networkd (host_vars\n"
        "# name the NetworkManager node) and lack the Spark's GPU, driver and RDMA devices; the lab has its\n"
        "# own registry CA.\n"
        f"spark_fabric_netplan_renderer: {NETWORKD}\n"
        "spark_device_policy: available\n"
        f"spark_image_registry_ca_controller_dir: {dest.parent / REGISTRY_CA}\n")
    for node in lab.nodes:
        content = renderer_vars(node)
        if content is not None:
            (host_vars_dir(tmp / "host_vars", node.host) / "lab-renderer.yml").write_text(content)
    hosts = yaml.safe_load((source / "hosts.yml").read_text()) or {}
    header = (f"---\n# Lab inventory generated by lab/lab.py from {source.name}: the same hosts and\n"
              f"# variables, reached over SSH at the lab's management addresses. Do not edit; rerun lab-up.\n")
    (tmp / "hosts.yml").write_text(header + yaml.safe_dump(lab_hosts(hosts, lab, access), sort_keys=False))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def create_networks(lab: LabPlan) -> None:
    tag = lab.labels
    sh(["docker", "network", "create", *tag, "--subnet", lab.mgmt_subnet, "--gateway", lab.mgmt_gateway,
        lab.mgmt_network])
    for net in lab.fabric:
        sh(["docker", "network", "create", *tag, "--internal", "-o", "com.docker.network.driver.mtu=9000",
            "--subnet", net.subnet, "--gateway", net.gateway, net.network])
        if net.forward_lldp:
            forward_lldp(net.network)


def forward_lldp(network: str) -> None:
    """Let LLDP frames cross a cable network's bridge, as they cross a real cable.

    A Linux bridge drops IEEE link-local group frames by default; bit 14 of group_fwd_mask is
    01:80:c2:00:00:0e (LLDP), which the kernel allows forwarding.
    """
    net_id = sh(["docker", "network", "inspect", "-f", "{{.Id}}", network]).stdout.strip()
    Path(f"/sys/class/net/br-{net_id[:12]}/bridge/group_fwd_mask").write_text(f"{LLDP_FWD_MASK}\n")


def create_nodes(lab: LabPlan, image: str, cgroup: str) -> None:
    for node in lab.nodes:
        sh(["docker", "volume", "create", *lab.labels, volume_name(lab, node)])
        sh(run_args(lab, node, image, cgroup))
    for net in lab.fabric:
        for end in net.ends:
            sh(["docker", "network", "connect", "--ip", end.address, net.network, end.host])


def container_pid(host: str) -> int:
    return int(sh(["docker", "inspect", "-f", "{{.State.Pid}}", host]).stdout.strip())


def rename_interfaces(lab: LabPlan, node: Node) -> None:
    """From the host, in the node's network namespace: management → its planned name (address and
    default route kept); every fabric interface → its planned netdev, address removed, link up."""
    pid = str(container_pid(node.host))
    # The node's own `ip` (its mount namespace), so the host needs no iproute2.
    netns = ["nsenter", "-t", pid, "-m", "-n", "--", "ip"]
    addrs = json.loads(sh([*netns, "-j", "address"]).stdout)
    ports = [(interface_by_address(addrs, e.address), e.netdev)
             for n in lab.fabric for e in n.ends if e.host == node.host]
    mgmt = interface_by_address(addrs, node.mgmt_address)
    sh([*netns, "-batch", "-"], stdin=rename_batch(ports, keep_address=False)
       + rename_batch([(mgmt, node.mgmt_interface)], keep_address=True))
    # Link down dropped the default route of the management interface.
    sh([*netns, "route", "replace", "default", "via", lab.mgmt_gateway, "dev", node.mgmt_interface])


def wait_systemd(host: str) -> str:
    """Wait until the node's systemd reports `running`; `degraded` fails with the failed units named."""
    deadline = time.monotonic() + SYSTEMD_TIMEOUT
    state, detail = "", ""
    while time.monotonic() < deadline:
        left = str(max(1, int(deadline - time.monotonic())))
        proc = sh(["timeout", left, "docker", "exec", host, "systemctl", "is-system-running", "--wait"],
                  check=False)
        state, detail = proc.stdout.strip(), proc.stderr.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(1)  # the exec itself failed (container or bus not up yet): try again
    if state != "running":
        failed = sh(["docker", "exec", host, "systemctl", "--failed", "--no-legend", "--plain"],
                    check=False).stdout.strip()
        raise LabError(f"{host}: systemd is '{state or detail or 'not answering'}' after boot; "
                       f"failed units: {failed or 'none'} (debug: docker exec -it {host} bash)")
    return state


def start_networkmanager(node: Node) -> str:
    """On a NetworkManager node: systemd-networkd off for good, NetworkManager on with the lab's settings.

    Runs after boot, when the ports carry their planned names; the image leaves NetworkManager disabled so
    that no other node runs it."""
    if node.renderer != NETWORKMANAGER:
        return "networkd"
    sh(["docker", "exec", "-i", node.host, "sh", "-c",
        "cat >/etc/NetworkManager/conf.d/60-sparkfleet-lab.conf"], stdin=networkmanager_conf(node))
    sh(["docker", "exec", node.host, "systemctl", "mask", "--now",
        "systemd-networkd.service", "systemd-networkd.socket"])
    sh(["docker", "exec", node.host, "systemctl", "start", "NetworkManager.service"])
    return "NetworkManager"


def ensure_key(access: Access) -> None:
    """The lab's controller key pair (kept across bring-ups; only the nodes change)."""
    if access.key.is_file() and access.key.with_suffix(".pub").is_file():
        return
    access.key.parent.mkdir(parents=True, exist_ok=True)
    access.key.unlink(missing_ok=True)
    sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sparkfleet-lab", "-f", str(access.key)])


def authorize(host: str, access: Access) -> str:
    """Authorise the lab key for root on the node and return its SSH host key.

    Called once systemd reports the node `running` (wait_systemd): sshd's unit has generated the host keys
    and started by then."""
    pub = access.key.with_suffix(".pub").read_text()
    sh(["docker", "exec", "-i", host, "sh", "-c",
        "install -d -m 0700 /root/.ssh && touch /root/.ssh/authorized_keys"
        " && chmod 0600 /root/.ssh/authorized_keys && cat >> /root/.ssh/authorized_keys"], stdin=pub)
    return sh(["docker", "exec", host, "cat", HOST_KEY]).stdout.strip()


def known_hosts_line(address: str, host_key: str) -> str:
    """One known_hosts line: the address the inventory connects to, the node's key type and key."""
    kind, key = host_key.split()[:2]
    return f"{address} {kind} {key}\n"


def close_masters(slot: str | None) -> None:
    """End the persistent SSH masters of a slot's labs (every lab's when no slot is named) and remove their
    sockets, before the containers go (teardown, or the cleanup of a bring-up): no master outlives the node it
    reached."""
    root = CONTROL_ROOT / slot if slot else CONTROL_ROOT
    for sock in root.rglob("*"):
        if sock.is_socket():
            sh(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "lab-node"], check=False)
    shutil.rmtree(root, ignore_errors=True)


def load_base_image(host: str, tag: str, archive: Path) -> str:
    """Load the base image into the node's own engine unless it already holds that image ID."""
    want = sh(["docker", "image", "inspect", "-f", "{{.Id}}", tag]).stdout.strip()
    for _ in range(60):
        if sh(["docker", "exec", host, "docker", "info"], check=False).returncode == 0:
            break
        time.sleep(1)
    else:
        raise LabError(f"{host}: its Docker engine does not answer (docker exec {host} journalctl -u docker)")
    have = sh(["docker", "exec", host, "docker", "image", "inspect", "-f", "{{.Id}}", tag], check=False)
    if have.returncode == 0 and have.stdout.strip() == want:
        return "present"
    with archive.open("rb") as data:
        proc = subprocess.run(["docker", "exec", "-i", host, "docker", "load", "-q"], stdin=data,
                              capture_output=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"{host}: docker load of {archive} failed: {proc.stderr.decode().strip()}")
    return "loaded"


class Phases:
    """Seconds spent per bring-up phase, printed at the end (where lab-up time goes)."""

    def __init__(self) -> None:
        self.start = self.mark = time.monotonic()
        self.spent: dict[str, float] = {}

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self.spent[phase] = now - self.mark
        self.mark = now

    def summary(self) -> str:
        parts = " ".join(f"{k} {v:.0f}s" for k, v in self.spent.items())
        return f"{time.monotonic() - self.start:.0f}s ({parts})"


def lab_record(lab: LabPlan, args: argparse.Namespace, cgroup: str) -> str:
    """lab.json: what this bring-up created, for debugging and for the scenarios."""
    return json.dumps({
        "name": lab.name, "slot": lab.slot, "node_image": args.node_image, "base_image": args.base_image, "cgroup": cgroup,
        "mgmt": {"network": lab.mgmt_network, "subnet": lab.mgmt_subnet, "gateway": lab.mgmt_gateway},
        "nodes": [n.__dict__ for n in lab.nodes],
        "fabric": [{"kind": n.kind, "network": n.network, "subnet": n.subnet, "gateway": n.gateway,
                    "forward_lldp": n.forward_lldp, "ends": [e.__dict__ for e in n.ends]} for n in lab.fabric],
    }, indent=2) + "\n"


def planned_lab(args: argparse.Namespace, state: Path) -> LabPlan:
    """The lab of an inventory: from its rendered plans, or its plain nodes when no host has a rank."""
    inventory = Path(args.inventory)
    if has_ranks(inventory):
        return lab_plan(args.topology, render_plan(inventory, state / "render"), slot=args.slot)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text()) or {}
    return lab_plan(args.topology, [], plain_nodes(hosts), slot=args.slot)


def up(args: argparse.Namespace) -> None:
    phases = Phases()
    state = Path(args.state_dir).resolve()
    lab = planned_lab(args, state)
    access = Access.of(state, lab)
    phases.done("render")
    close_masters(lab.slot)
    stale = remove_all(slot_filter(lab.slot))
    shutil.rmtree(state / REGISTRY_CA, ignore_errors=True)  # a new lab's nodes trust a new CA
    if any(stale.values()):
        log(f"removed leftovers of an earlier lab: {json.dumps(stale)}")
    phases.done("cleanup")
    cgroup = cgroup_mount(sh(["stat", "-fc", "%T", "/sys/fs/cgroup"]).stdout.strip(),
                          os.environ.get(CGROUP_ENV, "auto"))
    log(f"{lab.name}: {len(lab.nodes)} nodes, {len(lab.cables)} cable paths, {len(lab.rails)} switch rails, "
        f"cgroup mount {cgroup}")
    create_networks(lab)
    create_nodes(lab, args.node_image, cgroup)
    for node in lab.nodes:
        sh(["docker", "start", node.host])
        rename_interfaces(lab, node)
    phases.done("create")
    with ThreadPoolExecutor(max_workers=len(lab.nodes)) as pool:
        states = list(pool.map(wait_systemd, [n.host for n in lab.nodes]))
        renderers = list(pool.map(start_networkmanager, lab.nodes))
        phases.done("boot")
        loads = list(pool.map(lambda n: load_base_image(n.host, args.base_image, Path(args.base_archive)),
                              lab.nodes))
        phases.done("base-image")
        ensure_key(access)
        host_keys = list(pool.map(lambda n: authorize(n.host, access), lab.nodes))
    access.known_hosts.write_text("".join(known_hosts_line(n.mgmt_address, k) for n, k in zip(lab.nodes, host_keys)))
    access.control_dir.mkdir(parents=True, exist_ok=True)
    phases.done("ssh")
    inventory = write_inventory(Path(args.inventory), state / "inventory", lab, access)
    (state / "lab.json").write_text(lab_record(lab, args, cgroup))
    summary = ", ".join(f"{n.host}={s}/{r}/base {ld}" for n, s, r, ld in zip(lab.nodes, states, renderers, loads))
    log(f"{lab.name} up in {phases.summary()}: {summary}")
    print(inventory)


def inventory_only(args: argparse.Namespace) -> None:
    state = Path(args.state_dir).resolve()
    lab = planned_lab(args, state)
    print(write_inventory(Path(args.inventory), state / "inventory", lab, Access.of(state, lab)))


def down(args: argparse.Namespace) -> None:
    close_masters(args.slot)
    removed = remove_all(slot_filter(args.slot))
    for lab_json in Path(args.state_root).glob("*/lab.json"):
        if args.slot is None or json.loads(lab_json.read_text()).get("slot", FLEET) == args.slot:
            lab_json.unlink()
    log(f"removed {len(removed['container'])} containers, {len(removed['network'])} networks, "
        f"{len(removed['volume'])} volumes")


def leftovers(args: argparse.Namespace) -> None:
    left = {kind: labelled(kind, slot_filter(args.slot)) for kind in ("container", "network", "volume")}
    print(json.dumps(left))
    if any(left.values()):
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (("up", up), ("inventory", inventory_only)):
        p = sub.add_parser(name)
        p.add_argument("--topology", required=True)
        p.add_argument("--inventory", required=True)
        p.add_argument("--state-dir", required=True)
        p.add_argument("--slot", default=FLEET, help="the lab's slot (default: fleet, the topology labs)")
        if name == "up":
            p.add_argument("--node-image", required=True)
            p.add_argument("--base-image", required=True)
            p.add_argument("--base-archive", required=True)
        p.set_defaults(func=func)
    p = sub.add_parser("down")
    p.add_argument("--state-root", required=True)
    p.add_argument("--slot", help="only this slot's labs (default: every lab)")
    p.set_defaults(func=down)
    p = sub.add_parser("leftovers")
    p.add_argument("--slot", help="only this slot's objects (default: every lab's)")
    p.set_defaults(func=leftovers)
    p = sub.add_parser("session", help="run a command holding a slot's lab lock (lab.py session -- CMD ...)")
    p.add_argument("--slot", default=FLEET)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=session)
    args = parser.parse_args(argv)
    try:
        with lab_lock(args.slot or FLEET):
            args.func(args)
    except LabError as err:
        log(f"error: {err}")
        sys.exit(1)


if __name__ == "__main__":
    main()
