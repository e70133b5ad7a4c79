"""The device policy's value check: every node's spark_device_policy goes through it (module_utils/spark_policy.py
and the filter playbooks/device-policy.yml calls). Values from `-e` are strings, so only the two exact words pass."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_policy

POLICY = load_source("filter", "sparkfleet_policy")


@pytest.mark.parametrize(("value", "settled"), [
    (None, "require"), ("require", "require"), ("available", "available"),
])
def test_accepted_values_settle(value: Any, settled: str) -> None:
    assert spark_policy.settle(value, "dgx1") == settled
    assert POLICY.spark_device_policy(value, "dgx1") == settled


@pytest.mark.parametrize("value", ["true", True, "bogus", "", "Require", "available ", 1, ["available"]])
def test_other_values_are_refused_naming_field_and_host(value: Any) -> None:
    with pytest.raises(spark_policy.PolicyError, match=r"^host dgx2: spark_device_policy must be one of require, available, got "):
        spark_policy.settle(value, "dgx2")
    with pytest.raises(AnsibleFilterError, match=r"host dgx2: spark_device_policy must be one of require, available"):
        POLICY.spark_device_policy(value, "dgx2")


def test_the_default_fails_closed() -> None:
    assert spark_policy.DEFAULT == spark_policy.REQUIRE
    assert spark_policy.not_applicable("available", "dgx1") and not spark_policy.not_applicable("require", "dgx1")
