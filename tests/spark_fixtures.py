"""Shared helpers for the module tests: fixture sysfs/procfs trees in the kernel's exact text formats."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

Tree = Dict[str, Any]  # str or bytes -> file, dict -> directory
Slot = Tuple[str, str, str]  # gid, type as the kernel writes it, owning netdev

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
V1 = "IB/RoCE v1"
V2 = "RoCE v2"


def write_tree(root: Path, tree: Tree) -> Path:
    """str/bytes values become files, dicts become directories; returns root."""
    root.mkdir(parents=True, exist_ok=True)
    for name, value in tree.items():
        path = root / name
        if isinstance(value, dict):
            write_tree(path, value)
        elif isinstance(value, bytes):
            path.write_bytes(value)
        else:
            path.write_text(value)
    return root


def gid(address: str) -> str:
    """IPv4-mapped GID in sysfs form, built by hand (not by the code under test)."""
    a, b, c, d = (int(x) for x in address.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def link_local(mac_tail: str = "0a:1b:2c") -> str:
    """MAC-derived fe80:: default GID like slot 0/1 of a real port."""
    x, y, z = mac_tail.split(":")
    return f"fe80:0000:0000:0000:4cbb:58ff:fe{x}:{y}{z}"


def roce_device(slots: Dict[int, Slot], table_size: int = 8, netdev: Optional[str] = None) -> Tree:
    """class/infiniband/<dev> subtree: every gids/<i> exists (zeros when unused), attrs only for used slots.

    An unused slot's types/ndevs entry is a directory, so reading it fails like the kernel's EINVAL does.
    """
    gids: Tree = {}
    types: Tree = {}
    ndevs: Tree = {}
    for index in range(table_size):
        if index in slots:
            value, kind, owner = slots[index]
            gids[str(index)] = value + "\n"
            types[str(index)] = kind + "\n"
            ndevs[str(index)] = owner + "\n"
        else:
            gids[str(index)] = ZERO_GID + "\n"
            types[str(index)] = {}
            ndevs[str(index)] = {}
    device: Tree = {"ports": {"1": {"gids": gids, "gid_attrs": {"types": types, "ndevs": ndevs},
                                    "state": "4: ACTIVE\n"}}}
    if netdev:
        device["device"] = {"net": {netdev: {}}}
    return device


def default_slots(address: str, netdev: str) -> Dict[int, Slot]:
    """The typical layout with IPv6 off: 0/1 link-local v1/v2, 2/3 IPv4 v1/v2."""
    return {0: (link_local(), V1, netdev), 1: (link_local(), V2, netdev),
            2: (gid(address), V1, netdev), 3: (gid(address), V2, netdev)}


def sysfs_with_devices(root: Path, devices: Dict[str, Tree]) -> Path:
    return write_tree(root, {"class": {"infiniband": devices}})


SWAP_MAGIC = b"SWAPSPACE2"


def swap_header(page_size: int, total: int = 65536) -> bytes:
    """First bytes of a swap area made by `mkswap --pagesize <page_size>`: the magic ends the first page."""
    head = bytearray(total)
    head[1024:1028] = (1).to_bytes(4, "little")  # swap header version 1, as mkswap writes it
    head[page_size - len(SWAP_MAGIC):page_size] = SWAP_MAGIC
    return bytes(head)
