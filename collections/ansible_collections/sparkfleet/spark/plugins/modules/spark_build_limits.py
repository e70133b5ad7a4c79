#!/usr/bin/python
"""Decide how many compile jobs an image build may use on this host, or refuse when memory is too low."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_build_limits
short_description: Refuse an image build below a MemAvailable floor and bound its parallel compile jobs
description:
  - Reads C(MemAvailable) from C(/proc/meminfo) and the usable CPU count of the builder.
  - Fails, naming O(node) and the figure, when C(MemAvailable) is below O(floor_gib) or when no compile job
    fits; otherwise returns RV(jobs) = min(O(max_jobs), (CPUs - O(cpu_reserve)) // 2,
    (MemAvailable - O(reserve_gib)) // O(per_job_gib)).
  - Defaults are the reference limits (64 GiB floor, at most 10 jobs, 4 CPUs and 24 GiB kept back, 8 GiB
    per job). A parallel JIT compile once exhausted host memory on four nodes at once.
version_added: "0.1.0"
author: sparkfleet
options:
  floor_gib: {description: Minimum MemAvailable to start a build., type: float, default: 64}
  max_jobs: {description: Upper bound on compile jobs., type: int, default: 10}
  cpu_reserve: {description: CPUs kept back before halving the rest., type: int, default: 4}
  reserve_gib: {description: Memory kept back before dividing by O(per_job_gib)., type: float, default: 24}
  per_job_gib: {description: Memory one compile job may need., type: float, default: 8}
  cpus:
    description: CPU count to use instead of the CPUs this process may run on.
    type: int
  proc_root: {description: Root of procfs (tests point it at a fixture tree)., type: path, default: /proc}
  node: {description: Name used in messages; defaults to the host name., type: str}
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
"""

EXAMPLES = r"""
- name: image_build | Check memory and bound compile jobs
  sparkfleet.spark.spark_build_limits:
    floor_gib: "{{ spark_image_build_mem_floor_gib }}"
    node: "{{ inventory_hostname }}"
  register: spark_image_build_limits
"""

RETURN = r"""
jobs: {description: Compile jobs the build may use, returned: always, type: int, sample: 10}
by_cpu: {description: The CPU bound, returned: always, type: int}
by_memory: {description: The memory bound, returned: always, type: int}
mem_available: {description: MemAvailable in bytes, returned: always, type: int}
cpus: {description: CPUs considered, returned: always, type: int}
msg: {description: The verdict naming the node, returned: always, type: str}
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import BuildLimits, build_jobs
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_memguard import mem_available


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            floor_gib=dict(type="float", default=64), max_jobs=dict(type="int", default=10),
            cpu_reserve=dict(type="int", default=4), reserve_gib=dict(type="float", default=24),
            per_job_gib=dict(type="float", default=8), cpus=dict(type="int"),
            proc_root=dict(type="path", default="/proc"), node=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    node = p["node"] or socket.gethostname()
    if p["per_job_gib"] <= 0 or p["max_jobs"] < 1:
        module.fail_json(msg=f"{node}: per_job_gib must be > 0 and max_jobs >= 1")
    limits = BuildLimits(p["floor_gib"], p["max_jobs"], p["cpu_reserve"], p["reserve_gib"], p["per_job_gib"])
    cpus = p["cpus"] or len(os.sched_getaffinity(0))
    try:
        with open(os.path.join(p["proc_root"], "meminfo"), encoding="ascii") as handle:
            available = mem_available(handle.read())
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"{node}: cannot read MemAvailable: {exc}")
    verdict = build_jobs(node, cpus, available, limits)
    if not verdict.pop("ok"):
        module.fail_json(**verdict)
    module.exit_json(changed=False, **verdict)


if __name__ == "__main__":
    main()
