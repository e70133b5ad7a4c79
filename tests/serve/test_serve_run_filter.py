"""Fitting a serve spec's docker run options to what a host has (plugins/filter/sparkfleet_serve_run.py)."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

F = load_source("filter", "sparkfleet_serve_run")
RUN: dict[str, Any] = {
    "network_mode": "host",
    "device_requests": [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}],
    "devices": ["/dev/infiniband:/dev/infiniband:rwm"],
    "capabilities": ["IPC_LOCK"],
    "ulimits": ["memlock:-1:-1", "stack:67108864:67108864"],
    "mounts": [{"type": "bind", "source": "/dev/dri/by-path/card", "target": "/dev/dri/card0"}],
}
SPARK = {"paths": {"/dev/infiniband": True, "/dev/dri/by-path/card": True}, "runtimes": ["runc", "nvidia"],
         "memlock_hard": -1, "cap_bounding": "000001ffffffffff"}
LAB = {"paths": {"/dev/infiniband": False, "/dev/dri/by-path/card": False}, "runtimes": ["runc"],
       "memlock_hard": 8388608, "cap_bounding": "00000000a82435fb"}


def test_a_spark_keeps_every_option() -> None:
    fitted = F.spark_serve_fit_run(RUN, SPARK, "require", "dgx1")
    assert fitted == {"run": RUN, "missing": []}


def test_require_refuses_naming_host_and_options() -> None:
    with pytest.raises(AnsibleFilterError) as err:
        F.spark_serve_fit_run(RUN, LAB, "require", "dgx2")
    text = str(err.value)
    assert text.startswith("host dgx2:") and "no nvidia runtime" in text and "/dev/infiniband" in text
    assert "memlock:-1:-1" in text and "IPC_LOCK" in text and "spark_device_policy=available" in text


def test_available_drops_only_what_the_host_lacks() -> None:
    fitted = F.spark_serve_fit_run(RUN, LAB, "available", "dgx2")
    assert fitted["run"] == {"network_mode": "host", "ulimits": ["stack:67108864:67108864"]}
    assert len(fitted["missing"]) == 5


def test_bad_policy_is_an_error() -> None:
    with pytest.raises(AnsibleFilterError, match="host dgx1: spark_device_policy must be one of"):
        F.spark_serve_fit_run(RUN, SPARK, "lab", "dgx1")


def test_paths_limits_and_caps_parsing() -> None:
    assert F.spark_serve_device_paths(RUN) == ["/dev/dri/by-path/card", "/dev/infiniband"]
    limits = "Limit   Soft Limit   Hard Limit   Units\nMax locked memory         8388608              8388608              bytes\n"
    assert F.spark_serve_memlock(limits) == 8388608
    assert F.spark_serve_memlock(limits.replace("8388608              bytes", "unlimited            bytes")) == -1
    assert F.spark_serve_cap_bounding("Name:\tx\nCapBnd:\t00000000a82435fb\n") == "00000000a82435fb"
