"""Free-space arithmetic for transfers (model fan-out, image archives): pure, statvfs numbers in.

Free space is what an unprivileged writer may use (`f_bavail * f_frsize`), not `f_bfree`, which includes the
root reserve. The requirement is the bytes still to write plus a margin (fixed bytes and/or a fraction of
them), so a nearly-full disk is refused before a transfer starts rather than failing halfway.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict

GIB = 1024 ** 3


class DiskError(Exception):
    """Invalid numbers; the message names the field."""


def human_bytes(count: int) -> str:
    """Binary units with one decimal: 1536 -> '1.5 KiB', 510 GB -> '475.0 GiB'."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def free_from_statvfs(f_bavail: int, f_frsize: int) -> int:
    if f_bavail < 0 or f_frsize <= 0:
        raise DiskError(f"statvfs numbers out of range: f_bavail={f_bavail}, f_frsize={f_frsize}")
    return f_bavail * f_frsize


def required_bytes(needed: int, margin_bytes: int = 0, margin_fraction: float = 0.0) -> int:
    if needed < 0:
        raise DiskError(f"needed_bytes must be >= 0, got {needed}")
    if margin_bytes < 0:
        raise DiskError(f"margin_bytes must be >= 0, got {margin_bytes}")
    if not 0.0 <= margin_fraction <= 1.0:
        raise DiskError(f"margin_fraction must be between 0 and 1, got {margin_fraction}")
    return needed + margin_bytes + int(needed * margin_fraction)


def space_verdict(host: str, path: str, free: int, needed: int, margin_bytes: int = 0,
                  margin_fraction: float = 0.0) -> Dict[str, Any]:
    """{ok, free_bytes, needed_bytes, required_bytes, shortfall_bytes, msg}; msg names host and path."""
    required = required_bytes(needed, margin_bytes, margin_fraction)
    shortfall = max(0, required - free)
    margin = required - needed
    if shortfall:
        msg = (f"{host}: not enough free space for {path}: {human_bytes(free)} free, {human_bytes(required)} "
               f"required ({human_bytes(needed)} to write + {human_bytes(margin)} margin); free "
               f"{human_bytes(shortfall)} more")
    else:
        msg = (f"{host}: {human_bytes(free)} free for {path}, {human_bytes(required)} required "
               f"({human_bytes(needed)} to write + {human_bytes(margin)} margin)")
    return {"ok": not shortfall, "free_bytes": free, "needed_bytes": needed, "required_bytes": required,
            "shortfall_bytes": shortfall, "msg": msg}


def nearest_existing(path: str, exists: Callable[[str], bool] = os.path.exists) -> str:
    """The path itself or its closest existing ancestor: a target directory may not exist yet."""
    current = os.path.abspath(path)
    while not exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current
