"""Which NCCL profile fits a fabric and which overrides an inventory may set (hardware-and-fabric.md
section 8), free of I/O.

Shared by validate (spark_validate reports every problem) and spark_nccl_env (which refuses to build an
environment from overrides validate would refuse), so both read one rule.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Which profile fits which fabric (section 8.3): (topology, fewest nodes, most nodes, profile names). The
# first name is the one a cluster runs when its inventory names none; the others are controls it may choose.
PROFILE_FITS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("pair", 2, 2, ("tp2-direct",)),
    ("triangle", 3, 3, ("tp3-triangle",)),
    ("ring", 4, 4, ("tp4-ring",)),
    ("ring", 5, 9, ("ring-nccl-only",)),
    ("switched", 2, 16, ("switched", "switched-nccl-only")),
)
PROFILE_NAMES = tuple(name for *_, names in PROFILE_FITS for name in names)
RING_PROFILES = ("tp4-ring", "ring-nccl-only")
SWITCHED_PROFILES = ("switched", "switched-nccl-only")
# The example switched map's roce_traffic_class (section 4.4): a switch usually carries RoCE in a lossless
# class, and every rank must use the same one (the one-shot setup handshake compares it).
DEFAULT_TRAFFIC_CLASS = 106

# Overrides tune the collective library only: NCCL itself, PyTorch's NCCL switches and the sparknet
# one-shot transport. Anything else (LD_PRELOAD, PATH, ...) would change what the process loads.
OVERRIDE_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SPARKNET_")
_KEY = re.compile(r"^(?:NCCL|TORCH_NCCL|SPARKNET)_[A-Z0-9_]+$")
# A value is written as KEY=VALUE on one line of nccl.env and into the container environment.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f=]")
# Every profile sets these; removing one would silently fall back to NCCL's own default.
REQUIRED = {"NCCL_PROTO": "^LL128"}
# A ring must keep NCCL's ring in cable order: no plugin or file may choose another graph.
RING_FORBIDDEN = ("NCCL_ALGO_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_GRAPH_FILE", "NCCL_TOPO_FILE")
# On a switch every rail reaches every node, so a peer HCA map means nothing there (the reference forbids
# roce_peer_hcas); an NCCL-only control carries no one-shot route at all.
SWITCHED_FORBIDDEN: dict[str, tuple[tuple[str, ...], str]] = {
    "switched": (("SPARKNET_ROCE_PEER_HCAS",), "on a switch (every rail reaches every node: no peer HCA map)"),
    "switched-nccl-only": (("SPARKNET_ROCE_PEER_HCAS", "SPARKNET_ROCE_HCA", "SPARKNET_ROCE_TOPOLOGY"),
                           "with switched-nccl-only (an NCCL-only control carries no one-shot route)"),
}


def fitting_profiles(topology: Any, node_count: int) -> tuple[str, ...]:
    """The profiles a topology of node_count nodes may run, the default first; () when none fits."""
    for name, low, high, profiles in PROFILE_FITS:
        if name == topology and low <= node_count <= high:
            return profiles
    return ()


_FABRIC_WORDS = {"switched": "switched cluster"}


def _fabric_of(profile: str) -> str:
    for name, low, high, profiles in PROFILE_FITS:
        if profile in profiles:
            return f"a {_FABRIC_WORDS.get(name, name)} of {low}" + ("" if low == high else f"-{high}") + " nodes"
    return "no fabric"


def profile_error(where: str, profile: Any, topology: Any, node_count: int) -> str | None:
    """Why a chosen profile cannot run on this fabric (naming the ones that fit), or None."""
    if not isinstance(profile, str) or profile not in PROFILE_NAMES:
        return f"{where} must be one of {', '.join(PROFILE_NAMES)}, got {profile!r}"
    fits = fitting_profiles(topology, node_count)
    if profile in fits:
        return None
    fitting = f": use {' or '.join(fits)}" if fits else ""
    return (f"{where} {profile} is for {_fabric_of(profile)}, "
            f"not spark_topology {topology} with {node_count} nodes{fitting}")


def unsafe_text(value: str) -> bool:
    """True when the text holds a newline, '=' or another control character."""
    return bool(_UNSAFE.search(value))


def _key_error(where: str, key: Any) -> str | None:
    if not isinstance(key, str) or not _KEY.match(key):
        return (f"{where} has an invalid variable name {key!r} "
                f"(only {', '.join(OVERRIDE_PREFIXES)} variables, upper case, digits and _)")
    return None


def _value_error(where: str, key: str, value: Any) -> str | None:
    field = f"{where}.{key}"
    if value is None:
        return f"{field} cannot be removed: every profile requires it" if key in REQUIRED else None
    if isinstance(value, (Mapping, list, bool)) or not isinstance(value, (str, int, float)):
        return f"{field} must be a string, a number or null, got {value!r}"
    if unsafe_text(str(value)):
        return f"{field} must not contain a newline, '=' or a control character, got {value!r}"
    if key in REQUIRED and str(value) != REQUIRED[key]:
        return f"{field} must be {REQUIRED[key]} (LL128 is not qualified on this fabric), got {value!r}"
    return None


def override_errors(where: str, overrides: Any, ring: bool, switched_profile: str | None = None) -> list[str]:
    """Every problem of one host's spark_nccl_overrides; `where` names the host and the variable.

    switched_profile is the profile of a switched cluster (None on cabled topologies).
    """
    if not isinstance(overrides, Mapping):
        return [f"{where} must be a mapping of variable to value, got {type(overrides).__name__}"]
    errors: list[str] = []
    for key, value in overrides.items():
        problem = _key_error(where, key) or _value_error(where, key, value)
        if problem:
            errors.append(problem)
    bad = [k for k in RING_FORBIDDEN if ring and overrides.get(k) is not None]
    if bad:
        errors.append(f"{where}: {', '.join(bad)} must not be set on a ring "
                      "(ranks must keep NCCL's ring in cable order)")
    forbidden, why = SWITCHED_FORBIDDEN.get(switched_profile or "", ((), ""))
    bad = [k for k in forbidden if overrides.get(k) is not None]
    if bad:
        errors.append(f"{where}: {', '.join(bad)} must not be set {why}")
    return errors
