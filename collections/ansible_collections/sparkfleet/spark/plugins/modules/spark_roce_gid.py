#!/usr/bin/python
"""Check that the configured GID index holds each RDMA device's IPv4 RoCE v2 GID (read-only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_roce_gid
short_description: Check that a RoCE GID index holds each device's IPv4-mapped RoCE v2 GID
description:
  - Reads C(class/infiniband/<dev>/ports/<port>/gids/<i>), C(gid_attrs/types/<i>) and C(gid_attrs/ndevs/<i>)
    for every populated slot of each named RDMA device and checks that O(gid_index) holds the IPv4-mapped
    RoCE v2 GID of the device's cable address (NCCL_IB_GID_INDEX, default 3).
  - An all-zero GID is an unpopulated slot; unreadable C(types)/C(ndevs) of such slots are tolerated.
  - When the IPv4 GID sits at another index (the kernel re-filed it after a link flap under RDMA load),
    the problem names that index and the recovery, stop serving, re-activate that netdev while nothing
    uses RDMA, and re-check.
  - Never changes anything; C(changed) is always false.
version_added: "0.1.0"
author: sparkfleet
options:
  sysfs_root:
    description: Root of the sysfs tree (tests point it at a fixture tree).
    type: path
    default: /sys
  devices:
    description: RDMA device names to check, normally the node's planned devices (for example C(rocep1s0f0)).
    type: list
    elements: str
    required: true
  port:
    description: RDMA port number; a ConnectX-7 function on a DGX Spark only has port 1.
    type: int
    default: 1
  gid_index:
    description: GID index the fabric uses (C(NCCL_IB_GID_INDEX)).
    type: int
    default: 3
  expect:
    description:
      - Map of device to its expected IPv4 address, for example C(10.12.1.1).
      - With a prefix (C(10.12.1.1/24)) the prefix also gives the device's planned subnet.
      - Without an entry any IPv4-mapped RoCE v2 GID passes (inside the planned subnet when one is known).
    type: dict
    default: {}
  subnets:
    description: Map of device to its planned subnet, for example C(10.12.1.0/24).
    type: dict
    default: {}
  fail_on_error:
    description: Fail the task when any device is not ok; when false the result still carries C(ok=false).
    type: bool
    default: true
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
notes:
  - Reference rule and formats are in hardware-and-fabric section 6.
"""

EXAMPLES = r"""
- name: fabric | Check GID index 3 on every planned RDMA device
  sparkfleet.spark.spark_roce_gid:
    devices: [rocep1s0f0, roceP2p1s0f0]
    expect:
      rocep1s0f0: 10.12.1.1/24
      roceP2p1s0f0: 10.12.2.1/24
  register: spark_fabric_gid

- name: fabric | Report GIDs without failing (doctor)
  sparkfleet.spark.spark_roce_gid:
    devices: [rocep1s0f1]
    subnets:
      rocep1s0f1: 10.13.1.0/24
    fail_on_error: false
  register: spark_doctor_gid
"""

RETURN = r"""
ok:
  description: True when every device passes.
  returned: always
  type: bool
msg:
  description: Summary; on failure it lists every bad device and its problem.
  returned: always
  type: str
gid_index:
  description: The index that was checked.
  returned: always
  type: int
port:
  description: The port that was checked.
  returned: always
  type: int
devices:
  description: Verdict per device.
  returned: always
  type: dict
  contains:
    ok:
      description: The configured index holds the wanted IPv4-mapped RoCE v2 GID.
      type: bool
    gid:
      description: GID in the configured slot (39-character sysfs form), null when the slot is empty.
      type: str
    type:
      description: GID type of the slot as the kernel writes it (C(RoCE v2), C(IB/RoCE v1)).
      type: str
    ipv4:
      description: IPv4 address carried by the slot's GID, null unless it is IPv4-mapped.
      type: str
    ndev:
      description: Netdev owning the slot's GID.
      type: str
    index_of_ipv4:
      description: Index that actually holds the wanted IPv4-mapped RoCE v2 GID, null when none does.
      type: int
    problem:
      description: Null when ok, else the reason and, for a moved GID, the recovery.
      type: str
  sample:
    rocep1s0f0:
      ok: true
      gid: "0000:0000:0000:0000:0000:ffff:0a0c:0101"
      type: RoCE v2
      ipv4: 10.12.1.1
      ndev: enp1s0f0np0
      index_of_ipv4: 3
      problem: null
"""

from typing import Any, Dict

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_gid import (
    Expectation, check_device, parse_expectation, summarise)


def _expectations(module: AnsibleModule) -> Dict[str, Expectation]:
    """Validate the per-device maps before reading anything; bad input names the option and device."""
    devices = module.params["devices"]
    for option in ("expect", "subnets"):
        unknown = sorted(set(module.params[option]) - set(devices))
        if unknown:
            module.fail_json(msg=f"{option} names device(s) not in devices: {', '.join(unknown)}")
    result = {}
    for dev in devices:
        expect = module.params["expect"].get(dev)
        subnet = module.params["subnets"].get(dev)
        try:
            result[dev] = parse_expectation(None if expect is None else str(expect),
                                            None if subnet is None else str(subnet))
        except ValueError as exc:
            module.fail_json(msg=f"Bad expect/subnets for device {dev}: {exc}")
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            devices=dict(type="list", elements="str", required=True),
            port=dict(type="int", default=1),
            gid_index=dict(type="int", default=3),
            expect=dict(type="dict", default={}),
            subnets=dict(type="dict", default={}),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["port"] < 1 or params["gid_index"] < 0:
        module.fail_json(msg=f"port must be >= 1 and gid_index >= 0 (got port={params['port']}, "
                             f"gid_index={params['gid_index']})")
    expectations = _expectations(module)
    devices: Dict[str, Any] = {
        dev: check_device(params["sysfs_root"], dev, params["port"], params["gid_index"], expectations[dev])
        for dev in params["devices"]
    }
    ok, msg = summarise(devices, params["gid_index"])
    result = dict(changed=False, ok=ok, msg=msg, devices=devices, gid_index=params["gid_index"],
                  port=params["port"])
    if not ok and params["fail_on_error"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
