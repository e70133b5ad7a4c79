"""The device policy: what a node may lack of the hardware a DGX Spark has (GPU, NVIDIA driver, RDMA devices).

`require` (the default, a real Spark) makes a missing device or driver a failure naming the node and what is
missing; `available` (hosts without that hardware, such as the lab's containers) reports each check that
needs it as not applicable. One value for the whole project: playbooks/device-policy.yml settles it for
every node before any role runs, and the host roles, fabric, serve and the doctor read what it settled.
Pure: no I/O, no Ansible imports, so modules and controller-side filters share it.
"""
from __future__ import annotations

from typing import Any, Optional

NAME = "spark_device_policy"
REQUIRE = "require"
AVAILABLE = "available"
POLICIES = (REQUIRE, AVAILABLE)
# Fail closed: a node nobody declared hardware-less is held to the hardware of a Spark.
DEFAULT = REQUIRE


class PolicyError(ValueError):
    """A device policy that is not one of POLICIES; the message names the field and the host."""


def check(value: Any, host: str) -> str:
    """The policy itself when it is one of POLICIES (exactly: `-e` values are strings), else PolicyError."""
    if isinstance(value, str) and value in POLICIES:
        return value
    raise PolicyError(f"host {host}: {NAME} must be one of {', '.join(POLICIES)}, got {value!r}")


def settle(value: Optional[Any], host: str) -> str:
    """The node's policy: DEFAULT when nothing sets it (None), otherwise the checked value."""
    return DEFAULT if value is None else check(value, host)


def not_applicable(policy: str, host: str) -> bool:
    """Whether a check of missing hardware is reported as not applicable rather than failed."""
    return check(policy, host) == AVAILABLE
