"""Serve's fabric refusals: kho=off and the planned GIDs on every rank, under the device policy."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

FILTERS = load_source("filter", "sparkfleet_serve").FilterModule().filters()
refusals = FILTERS["spark_serve_fabric_refusals"]

GID_OK = {"rdma_class": True, "ok": True, "msg": "All 2 RDMA device(s) hold the IPv4 RoCE v2 GID at index 3."}
GID_MOVED = {"rdma_class": True, "ok": False,
             "msg": "GID index 3 check failed on 1 of 2 device(s): roceP2p1s0f0: index 3 holds 10.12.2.9"}
NO_RDMA = {"rdma_class": False, "ok": None, "msg": "no RDMA device class", "devices": {}}


def _probe(kho: Any, gid: dict[str, Any]) -> dict[str, Any]:
    return {"host": {"kho_off": kho}, "gid": gid}


# (kho_off, gid result, policy) -> fragments of the refusals, [] when the rank may serve
CASES = [
    (True, GID_OK, "require", []),
    (True, GID_MOVED, "require", ["host dgx2: GID index 3 check failed", "run playbooks/fabric.yml"]),
    (False, GID_OK, "require", ["host dgx2: kho=off is not on it"]),
    (None, GID_OK, "require", ["host dgx2: kho=off cannot be read"]),
    (True, NO_RDMA, "require", ["host dgx2: no /sys/class/infiniband", "spark_device_policy=require"]),
    (False, NO_RDMA, "available", []),
    (True, GID_MOVED, "available", ["host dgx2: GID index 3 check failed"]),
]


@pytest.mark.parametrize(("kho", "gid", "policy", "expected"), CASES)
def test_fabric_refusals(kho: Any, gid: dict[str, Any], policy: str, expected: list[str]) -> None:
    found = refusals({"dgx1": _probe(True, GID_OK), "dgx2": _probe(kho, gid)}, {"dgx1": "require", "dgx2": policy})
    assert len(found) == (1 if expected else 0) or all(any(e in f for f in found) for e in expected), found
    for fragment in expected:
        assert any(fragment in f for f in found), (fragment, found)
    if not expected:
        assert found == []


def test_bad_input_names_the_host() -> None:
    with pytest.raises(AnsibleFilterError, match="host dgx2: spark_device_policy must be one of require, available"):
        refusals({"dgx2": _probe(True, GID_OK)}, {})
    with pytest.raises(AnsibleFilterError, match="host dgx2: no serve probe result"):
        refusals({"dgx2": None}, {"dgx2": "require"})
