"""The device policy filter: playbooks/device-policy.yml settles each node's spark_device_policy through it.

The rule itself (values, default, refusal message) is module_utils/spark_policy.py.
"""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError


from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_policy as _POLICY


def spark_device_policy(value: Any, host: str) -> str:
    """The node's device policy: `require` when unset (none), the value when valid, else an error naming host and field."""
    try:
        return _POLICY.settle(value, str(host))
    except _POLICY.PolicyError as err:
        raise AnsibleFilterError(str(err)) from None


class FilterModule:
    """sparkfleet device policy filter."""

    def filters(self) -> dict[str, Any]:
        return {"spark_device_policy": spark_device_policy}
