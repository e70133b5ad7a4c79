"""RoCE GID table parsing and the GID-index rule (hardware-and-fabric §6).

Pure functions turn sysfs text into classified entries and a per-device verdict; the two reader
functions at the bottom are the only I/O and never write anything.
"""
from __future__ import annotations

import errno
import ipaddress
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

ROCE_V2 = "RoCE v2"
ROCE_V1 = "IB/RoCE v1"

KIND_EMPTY = "empty"
KIND_IPV4 = "ipv4"
KIND_LINK_LOCAL = "link-local"
KIND_IPV6 = "ipv6"
KIND_INVALID = "invalid"


@dataclass(frozen=True)
class GidEntry:
    """One populated slot of a port's GID table, as the kernel reports it."""

    index: int
    gid: str
    type: Optional[str]
    ndev: Optional[str]


@dataclass(frozen=True)
class Expectation:
    """What one device's slot should hold: an address, a planned subnet, or both."""

    address: Optional[ipaddress.IPv4Address]
    subnet: Optional[ipaddress.IPv4Network]


# --- GIDs and addresses -----------------------------------------------------------------------

def normalise_gid(text: str) -> str:
    """sysfs GIDs end with a newline; compare them lower-case and stripped."""
    return text.strip().lower()


def _gid_address(gid: str) -> Optional[ipaddress.IPv6Address]:
    try:
        return ipaddress.IPv6Address(normalise_gid(gid))
    except ValueError:
        return None


def classify_gid(gid: str) -> str:
    """empty (all zero), ipv4 (IPv4-mapped), link-local (fe80::/10), ipv6, or invalid."""
    address = _gid_address(gid)
    if address is None:
        return KIND_INVALID
    if int(address) == 0:
        return KIND_EMPTY
    if address.ipv4_mapped is not None:
        return KIND_IPV4
    if address.is_link_local:
        return KIND_LINK_LOCAL
    return KIND_IPV6


def gid_to_ipv4(gid: str) -> Optional[str]:
    """The IPv4 address carried by an IPv4-mapped GID, else None."""
    address = _gid_address(gid)
    if address is None or address.ipv4_mapped is None:
        return None
    return str(address.ipv4_mapped)


def ipv4_to_gid(address: str) -> str:
    """The 39-character sysfs form of the IPv4-mapped GID of `address`."""
    packed = ipaddress.IPv6Address("::ffff:" + str(ipaddress.IPv4Address(address))).packed
    return ":".join(packed[i:i + 2].hex() for i in range(0, 16, 2))


def ipv4_hex_tail(address: str) -> str:
    """Last two GID groups for an address, e.g. 10.12.2.1 -> 0a0c:0201 (the form people grep for)."""
    return ipv4_to_gid(address)[-9:]


def is_roce_v2(gid_type: Optional[str]) -> bool:
    """The kernel writes 'RoCE v2'; spark-ds41f strips spaces, so accept 'RoCEv2' too."""
    return gid_type is not None and "".join(gid_type.split()).lower() == "rocev2"


def is_ipv4_v2(entry: GidEntry) -> bool:
    return classify_gid(entry.gid) == KIND_IPV4 and is_roce_v2(entry.type)


# --- Expectations -----------------------------------------------------------------------------

def parse_expectation(expect: Optional[str], subnet: Optional[str]) -> Expectation:
    """Combine `expect` ("10.12.1.1" or "10.12.1.1/24") and `subnets` ("10.12.1.0/24").

    Raises ValueError with a sentence naming the inconsistency.
    """
    address: Optional[ipaddress.IPv4Address] = None
    network: Optional[ipaddress.IPv4Network] = None
    if expect:
        interface = ipaddress.IPv4Interface(expect.strip())
        address = interface.ip
        if "/" in expect:
            network = interface.network
    if subnet:
        planned = ipaddress.IPv4Network(subnet.strip(), strict=True)
        if network is not None and network != planned:
            raise ValueError(f"expect {expect} implies subnet {network}, but subnets gives {planned}")
        network = planned
    if address is not None and network is not None and address not in network:
        raise ValueError(f"expected address {address} is outside the planned subnet {network}")
    return Expectation(address=address, subnet=network)


def matches(entry: GidEntry, expectation: Expectation) -> bool:
    """True when the entry is an IPv4-mapped RoCE v2 GID that fits the expectation."""
    if not is_ipv4_v2(entry):
        return False
    ipv4 = ipaddress.IPv4Address(gid_to_ipv4(entry.gid))
    if expectation.address is not None:
        return ipv4 == expectation.address
    return expectation.subnet is None or ipv4 in expectation.subnet


def find_ipv4_index(entries: List[GidEntry], expectation: Expectation, preferred: int) -> Optional[int]:
    """The slot holding the expected IPv4 RoCE v2 GID: the preferred one if it fits, else the lowest."""
    fitting = sorted(e.index for e in entries if matches(e, expectation))
    if preferred in fitting:
        return preferred
    return fitting[0] if fitting else None


# --- Problems ---------------------------------------------------------------------------------

def _wanted(expectation: Expectation) -> str:
    if expectation.address is not None:
        return f"the IPv4-mapped RoCE v2 GID of {expectation.address}"
    if expectation.subnet is not None:
        return f"an IPv4-mapped RoCE v2 GID inside {expectation.subnet}"
    return "an IPv4-mapped RoCE v2 GID"


def describe_slot(dev: str, port: int, index: int, entry: Optional[GidEntry], expectation: Expectation) -> str:
    """One sentence saying why the configured slot does not hold what it should."""
    where = f"GID index {index} of {dev} port {port}"
    if entry is None:
        return f"{where} is empty."
    kind = classify_gid(entry.gid)
    if kind == KIND_LINK_LOCAL:
        return f"{where} holds the link-local GID {entry.gid} instead of {_wanted(expectation)}."
    if kind == KIND_IPV6:
        return f"{where} holds the IPv6 GID {entry.gid} instead of {_wanted(expectation)}."
    if kind != KIND_IPV4:
        return f"{where} holds an unreadable GID {entry.gid!r}."
    ipv4 = gid_to_ipv4(entry.gid)
    if not is_roce_v2(entry.type):
        return f"{where} holds a {entry.type or 'untyped'} entry for {ipv4}; NCCL needs the RoCE v2 entry."
    if expectation.address is not None and ipv4 != str(expectation.address):
        return f"{where} holds {ipv4}, not the expected {expectation.address}."
    return f"{where} holds {ipv4}, outside the planned subnet {expectation.subnet}."


def describe_location(dev: str, index: int, found: Optional[int], entries: List[GidEntry],
                      expectation: Expectation) -> str:
    """Where the wanted GID really sits and how to recover, or that it sits nowhere."""
    if found is None:
        return (f"No slot of {dev} holds {_wanted(expectation)}: address its netdev "
                f"(an unaddressed interface advertises only fe80:: GIDs) and re-check.")
    owner = next((e.ndev for e in entries if e.index == found and e.ndev), None) or f"the netdev of {dev}"
    return (f"It sits at index {found} (the GID moved): stop serving, re-activate {owner} "
            f"(link down/up or `netplan apply` of that interface) while nothing uses RDMA, "
            f"then re-check that index {index} holds it.")


# --- Verdicts ---------------------------------------------------------------------------------

def missing_device(dev: str, path: str) -> Dict[str, Any]:
    return _verdict(None, None, f"RDMA device {dev} is missing ({path} does not exist).")


def _verdict(slot: Optional[GidEntry], found: Optional[int], problem: Optional[str]) -> Dict[str, Any]:
    return {
        "ok": problem is None,
        "gid": slot.gid if slot else None,
        "type": slot.type if slot else None,
        "ipv4": gid_to_ipv4(slot.gid) if slot else None,
        "ndev": slot.ndev if slot else None,
        "index_of_ipv4": found,
        "problem": problem,
    }


def evaluate_device(dev: str, port: int, index: int, entries: List[GidEntry],
                    expectation: Expectation) -> Dict[str, Any]:
    """Verdict for one device's populated GID table against the GID-index rule."""
    slot = next((e for e in entries if e.index == index), None)
    found = find_ipv4_index(entries, expectation, index)
    if found == index:
        return _verdict(slot, found, None)
    problem = describe_slot(dev, port, index, slot, expectation)
    problem += " " + describe_location(dev, index, found, entries, expectation)
    return _verdict(slot, found, problem)


def summarise(devices: Dict[str, Dict[str, Any]], index: int) -> Tuple[bool, str]:
    """Overall ok and a message listing every bad device."""
    bad = {dev: r for dev, r in devices.items() if not r["ok"]}
    if not devices:
        return False, "No RDMA devices were given to check."
    if not bad:
        return True, f"All {len(devices)} RDMA device(s) hold the IPv4 RoCE v2 GID at index {index}."
    listed = " | ".join(f"{dev}: {r['problem']}" for dev, r in sorted(bad.items()))
    return False, f"GID index {index} check failed on {len(bad)} of {len(devices)} device(s): {listed}"


# --- Reading sysfs (read-only) ----------------------------------------------------------------

def read_attribute(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(stripped text, None) or (None, reason). Sysfs may answer EINVAL for unpopulated slots."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip(), None
    except FileNotFoundError:
        return None, f"{path} does not exist"
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "error")
        return None, f"{path} is unreadable ({name}: {exc.strerror})"


def port_dir(sysfs_root: str, dev: str, port: int) -> str:
    return os.path.join(sysfs_root, "class", "infiniband", dev, "ports", str(port))


def read_gid_table(sysfs_root: str, dev: str, port: int) -> List[GidEntry]:
    """Every populated slot of the port (all-zero GIDs skipped), in index order."""
    base = port_dir(sysfs_root, dev, port)
    names = sorted((n for n in os.listdir(os.path.join(base, "gids")) if n.isdigit()), key=int)
    entries = []
    for name in names:
        gid, _ = read_attribute(os.path.join(base, "gids", name))
        if gid is None or classify_gid(gid) == KIND_EMPTY:
            continue
        gid_type, _ = read_attribute(os.path.join(base, "gid_attrs", "types", name))
        ndev, _ = read_attribute(os.path.join(base, "gid_attrs", "ndevs", name))
        entries.append(GidEntry(int(name), normalise_gid(gid), gid_type or None, ndev or None))
    return entries


def check_device(sysfs_root: str, dev: str, port: int, index: int, expectation: Expectation) -> Dict[str, Any]:
    """Read one device and return its verdict; a missing device or port is a verdict, not an error."""
    device_path = os.path.join(sysfs_root, "class", "infiniband", dev)
    if not os.path.isdir(device_path):
        return missing_device(dev, device_path)
    gids_path = os.path.join(port_dir(sysfs_root, dev, port), "gids")
    if not os.path.isdir(gids_path):
        return _verdict(None, None, f"RDMA device {dev} has no port {port} ({gids_path} does not exist).")
    return evaluate_device(dev, port, index, read_gid_table(sysfs_root, dev, port), expectation)


def check_planned(sysfs_root: str, expect: Dict[str, str], port: int, index: int) -> Dict[str, Any]:
    """Every planned device (expect: RDMA device -> planned address, with or without prefix) at GID `index`:
    {rdma_class, ok, msg, devices}. Without the RDMA class directory nothing is read (rdma_class false, ok None):
    whether that fails the node is the device policy's call, not this function's."""
    rdma_class = os.path.isdir(os.path.join(sysfs_root, "class", "infiniband"))
    if not rdma_class:
        return {"rdma_class": False, "ok": None, "msg": "no RDMA device class", "devices": {}}
    devices = {dev: check_device(sysfs_root, dev, port, index, parse_expectation(str(address), None))
               for dev, address in sorted(expect.items())}
    ok, msg = summarise(devices, index)
    return {"rdma_class": True, "ok": ok, "msg": msg, "devices": devices}
