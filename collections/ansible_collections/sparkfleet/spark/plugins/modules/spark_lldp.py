#!/usr/bin/python
"""Read LLDP neighbours with lldpctl and compare each fabric port's neighbour with the plan (read-only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_lldp
short_description: Compare each fabric port's LLDP neighbour (system name and port) with the cable plan
description:
  - Runs C(lldpctl -f json0) and parses the neighbours of every local interface.
  - A ConnectX-7 port hears both PCIe functions of the far port. When a port lists more than one neighbour,
    only those on the port's own PCIe path (PCI domain, bus and slot read from the netdev name, e.g.
    C(enP2p1s0f1np1) is domain 2) count; the far port's other function is ignored.
  - For each port in O(expect) the single neighbour left must be the planned host (LLDP system name) and the
    planned far netdev (LLDP port id of subtype ifname, else the port description).
  - A port whose neighbour is the planned peer of another local port is reported as carrying that port's
    cable; two ports carrying each other's cables are reported as swapped.
  - Never changes anything; C(changed) is always false.
version_added: "0.1.0"
author: sparkfleet
options:
  expect:
    description:
      - Map of local netdev to its planned neighbour, C({host, port}) or the string C(host:port).
    type: dict
    required: true
  fail_on_error:
    description: Fail when any port differs from the plan; when false the result still carries C(ok=false).
    type: bool
    default: true
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
requirements:
  - lldpd running on this node and on its peers (C(lldpctl) on the PATH)
notes:
  - Peers advertise their netdev as port id when lldpd is configured with C(configure lldp portidsubtype ifname).
"""

EXAMPLES = r"""
- name: fabric | Read the LLDP neighbours of every fabric port
  sparkfleet.spark.spark_lldp:
    expect:
      enp1s0f0np0: {host: dgx2, port: enp1s0f1np1}
      enp1s0f1np1: dgx3:enp1s0f0np0
    fail_on_error: false
  register: spark_fabric_lldp
"""

RETURN = r"""
ok:
  description: True when every planned port has exactly its planned neighbour on its PCIe path.
  returned: always
  type: bool
msg:
  description: Summary; on failure every problem.
  returned: always
  type: str
problems:
  description: One line per differing port (naming the local port, the neighbour seen and the planned one) and per swapped pair.
  returned: always
  type: list
  elements: str
missing:
  description: Planned ports with no LLDP neighbour at all (a caller may wait for these).
  returned: always
  type: list
  elements: str
swapped:
  description: Pairs of local ports that carry each other's planned cables.
  returned: always
  type: list
  elements: list
ports:
  description: Verdict per planned port with the expected neighbour, every neighbour seen and the one kept
    (the single neighbour on the port's PCIe path, else null).
  returned: always
  type: dict
  sample:
    enp1s0f0np0:
      ok: true
      expected: {host: dgx2, port: enp1s0f1np1}
      neighbours:
        - {system: dgx2, port: enp1s0f1np1, port_id: enp1s0f1np1, port_id_type: ifname, port_descr: enp1s0f1np1}
        - {system: dgx2, port: enP2p1s0f1np1, port_id: enP2p1s0f1np1, port_id_type: ifname, port_descr: enP2p1s0f1np1}
      kept: {system: dgx2, port: enp1s0f1np1, port_id: enp1s0f1np1, port_id_type: ifname, port_descr: enp1s0f1np1}
      problem: null
neighbours:
  description: Every neighbour lldpd knows, per local interface (planned or not).
  returned: always
  type: dict
"""

from dataclasses import asdict
from typing import Any, Dict

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_lldp import (
    compare_cabling, parse_expect, parse_lldpctl_json0)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            expect=dict(type="dict", required=True),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        expect = parse_expect(module.params["expect"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    lldpctl = module.get_bin_path("lldpctl", required=True)
    rc, out, err = module.run_command([lldpctl, "-f", "json0"])
    if rc != 0:
        module.fail_json(msg=f"lldpctl -f json0 failed (rc={rc}): {err.strip() or out.strip()}; is lldpd running?")
    try:
        neighbours = parse_lldpctl_json0(out)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    verdict = compare_cabling(expect, neighbours)
    result: Dict[str, Any] = dict(
        changed=False, **verdict,
        missing=sorted(n for n, p in verdict["ports"].items() if not p["neighbours"]),
        neighbours={k: [asdict(n) for n in v] for k, v in neighbours.items()},
        msg="every fabric port sees its planned neighbour" if verdict["ok"]
        else "; ".join(verdict["problems"]),
    )
    if not verdict["ok"] and module.params["fail_on_error"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
