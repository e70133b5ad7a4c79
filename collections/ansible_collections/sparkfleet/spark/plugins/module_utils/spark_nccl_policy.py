"""Which NCCL overrides an inventory may set (hardware-and-fabric.md section 8), free of I/O.

Shared by validate (spark_validate reports every problem) and spark_nccl_env (which refuses to build an
environment from overrides validate would refuse), so both read one rule.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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


def override_errors(where: str, overrides: Any, ring: bool) -> list[str]:
    """Every problem of one host's spark_nccl_overrides; `where` names the host and the variable."""
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
    return errors
