#!/usr/bin/python
"""Report the live state of the fabric netdevs and every difference from the plan (read-only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_fabric_state
short_description: Live addresses, MTU, IPv6 and link state of the fabric netdevs, compared with the plan
description:
  - Runs C(ip -j address show) and, for each planned interface, reports every difference from the plan
    (missing netdev, MTU, IPv4 addresses, any IPv6 address, link not up).
  - Never changes anything; C(changed) is always false.
version_added: "0.1.0"
author: sparkfleet
options:
  interfaces:
    description: The node's planned interfaces; each needs C(netdev) and C(address) (with prefix length).
    type: list
    elements: dict
    required: true
  mtu:
    description: MTU every fabric netdev must have.
    type: int
    default: 9000
  fail_on_error:
    description: Fail when the live state differs from the plan; when false the result still carries C(ok=false).
    type: bool
    default: false
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
requirements:
  - iproute2 with JSON output (C(ip -j))
"""

EXAMPLES = r"""
- name: fabric | Compare the live fabric with the plan
  sparkfleet.spark.spark_fabric_state:
    interfaces:
      - {netdev: enp1s0f0np0, address: 10.12.1.1/24}
  register: spark_fabric_state
"""

RETURN = r"""
ok:
  description: True when the live state matches the plan.
  returned: always
  type: bool
msg:
  description: Summary; every difference when there are any.
  returned: always
  type: str
differences:
  description: One line per difference, each naming the netdev.
  returned: always
  type: list
  elements: str
interfaces:
  description: Per planned netdev its live state (null when missing) and its differences.
  returned: always
  type: dict
  sample:
    enp1s0f0np0:
      state: {netdev: enp1s0f0np0, mtu: 9000, operstate: UP, ipv4: [10.12.1.1/24], ipv6: []}
      differences: []
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_fabric_probe import fabric_drift, parse_ip_address


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type="list", elements="dict", required=True),
            mtu=dict(type="int", default=9000),
            fail_on_error=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    for i, iface in enumerate(module.params["interfaces"]):
        missing = [k for k in ("netdev", "address") if not iface.get(k)]
        if missing:
            module.fail_json(msg=f"interfaces[{i}] is missing {', '.join(missing)}")
    ip = module.get_bin_path("ip", required=True)
    rc, out, err = module.run_command([ip, "-j", "address", "show"])
    if rc != 0:
        module.fail_json(msg=f"ip -j address show failed (rc={rc}): {err.strip()}")
    try:
        drift = fabric_drift(module.params["interfaces"], parse_ip_address(out), module.params["mtu"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    msg = "live fabric matches the plan" if drift["ok"] else "; ".join(drift["differences"])
    result = dict(changed=False, msg=msg, **drift)
    if not drift["ok"] and module.params["fail_on_error"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
