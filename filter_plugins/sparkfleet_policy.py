"""The device policy filter: playbooks/device-policy.yml settles each node's spark_device_policy through it.

The rule itself (values, default, refusal message) is module_utils/spark_policy.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import ansible.module_utils
from ansible.errors import AnsibleFilterError

# Controller-side plugins do not see the project's module_utils/ the way modules do (see sparkfleet_serve.py).
_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils import spark_policy as _POLICY  # noqa: E402


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
