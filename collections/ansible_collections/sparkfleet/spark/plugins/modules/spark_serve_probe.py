#!/usr/bin/python
"""Everything the serve role asks a rank before a start, in one call."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_serve_probe
short_description: One read-only probe of a serving rank (host facts, image, run-option backing, containers, ports, guard)
description:
  - Answers in one Ansible round trip what a start needs to know about a rank, so probing costs one module
    transfer per node instead of a dozen.
  - Host facts serve compares (kernel release, page size and flavour, memory-saver packing, running driver)
    with the probes of C(spark_host_facts) (module_utils/spark_host.py).
  - "The serving image (C(docker image inspect)): present, ID and labels."
  - What the run options need, namely the Docker runtimes (C(docker info)), which of O(paths) exist, the
    locked-memory limit and capability bounding set a container started from here would inherit
    (C(/proc/self/limits), C(/proc/self/status), parsed by the role's filters).
  - Which O(binds) sources are missing (Docker would create empty directories).
  - The serving container's state and leftovers C(<container>-pre-*) of an interrupted replace (C(docker ps)).
  - Listeners on O(ports) (C(ss -Hltn)).
  - Whether anything of the container's memory guard is left (a loaded unit or a status file).
version_added: "0.2.0"
author: sparkfleet
options:
  image:
    description: Serving image reference.
    type: str
    required: true
  container:
    description: Serving container name.
    type: str
    required: true
  paths:
    description: Host paths the run options name (devices, mount sources); RV(paths) says which exist.
    type: list
    elements: path
    default: []
  binds:
    description: Bind-mount sources that must exist (model directory, cache).
    type: list
    elements: path
    default: []
  ports:
    description: Ports that must be free unless the serving container runs (API, rendezvous).
    type: list
    elements: int
    default: []
  guard_unit:
    description: Memory guard unit without C(.service). Defaults to C(<container>-memguard).
    type: str
  state_dir:
    description: Directory of the guards' status files.
    type: path
    default: /run/sparkfleet/memguard
  supervisor_unit:
    description: Unit of the supervised mode (C(<container>-supervisor.service)); RV(supervisor) says whether it is installed.
    type: str
  name:
    description: How RV(problems) name this rank (the inventory host); defaults to the node's hostname.
    type: str
  gid_expect:
    description:
      - Planned fabric address (with or without prefix) of each RDMA device, as in M(sparkfleet.spark.spark_roce_gid);
        RV(gid) says whether GID O(gid_index) of port 1 holds it as an IPv4 RoCE v2 GID (a peer reboot or a
        C(netplan apply) can move GIDs, and NCCL then fails with "unhandled system error").
    type: dict
    default: {}
  gid_index:
    description: GID index NCCL and the engine use (C(NCCL_IB_GID_INDEX)).
    type: int
    default: 3
  sysfs_root:
    description: Root of the sysfs tree to read the GID tables from (tests point it at a fixture tree).
    type: path
    default: /sys
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
notes:
  - Needs the docker CLI, C(ss) and C(systemctl) on the node.
"""

EXAMPLES = r"""
- name: Serve | Probe every rank in one call
  sparkfleet.spark.spark_serve_probe:
    image: vllm-ds41f-kkref:04c30fa98e79-r6
    container: dsv41-karmic-kraken
    paths: [/dev/infiniband]
    binds: [/var/lib/sparkfleet/models/deepseek-v4.1-flash, /var/lib/sparkfleet/serve-cache]
    ports: [8000, 9999]
    gid_expect: {rocep1s0f0: 10.12.1.1/24, roceP2p1s0f0: 10.12.2.1/24}
  register: serve_probe
"""

RETURN = r"""
host:
  description: kernel_release, page_size, page_size_flavour, uvm_packing, driver_running, kho_off and unavailable (reasons).
  returned: always
  type: dict
image:
  description: present, id, labels and error (why it is missing).
  returned: always
  type: dict
runtimes:
  description: Docker runtime names.
  returned: always
  type: list
  elements: str
paths:
  description: Each of O(paths) mapped to whether it exists.
  returned: always
  type: dict
missing_binds:
  description: O(binds) sources that do not exist.
  returned: always
  type: list
  elements: str
proc_limits:
  description: Text of C(/proc/self/limits) of the module process.
  returned: always
  type: str
proc_status:
  description: Text of C(/proc/self/status) of the module process.
  returned: always
  type: str
container:
  description: State of the serving container (running, exited, created, ...) or absent.
  returned: always
  type: str
strays:
  description: Leftover C(<container>-pre-*) containers of an interrupted replace.
  returned: always
  type: list
  elements: str
listeners:
  description: C(ss) lines of listeners on O(ports).
  returned: always
  type: list
  elements: str
guard:
  description: load_state, active_state, status_file (exists) and present (anything to disarm).
  returned: always
  type: dict
supervisor:
  description: load_state and active_state of O(supervisor_unit), or null without it.
  returned: always
  type: dict
gid:
  description:
    - rdma_class (whether C(/sys/class/infiniband) exists), ok, msg and devices (one verdict per planned device).
    - Without the RDMA class nothing is read and ok is null; the device policy decides what that means.
  returned: always
  type: dict
problems:
  description: Every reason this rank must not launch (missing image or bind source, strays, busy ports), each naming the host.
  returned: always
  type: list
  elements: str
"""

import os
from typing import Any, Dict, List, Tuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_gid import check_planned
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import (
    Facts, HostIO, probe_cmdline, probe_driver_running, probe_kernel, probe_uvm)
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_serve_probe import (
    container_summary, guard_summary, host_subset, parse_containers, parse_image, parse_runtimes, parse_unit,
    rank_problems, ss_filter)

C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


class Rank:
    """The rank's I/O: docker, ss, systemctl and files."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.docker = module.get_bin_path("docker", required=True)

    def run(self, argv: List[str]) -> Tuple[int, str, str]:
        return self.module.run_command(argv, environ_update=C_LOCALE, check_rc=False)

    def host(self) -> Dict[str, Any]:
        io = HostIO(self.run, lambda tool: self.module.get_bin_path(tool, required=False))
        facts = Facts()
        for probe in (probe_kernel, probe_cmdline, probe_driver_running, probe_uvm):
            probe(io, facts)
        return host_subset(facts.result())

    def image(self, image: str) -> Dict[str, Any]:
        return parse_image(*self.run([self.docker, "image", "inspect", "--format", "{{json .}}", image]))

    def runtimes(self) -> List[str]:
        rc, out, _ = self.run([self.docker, "info", "--format", "{{json .Runtimes}}"])
        return parse_runtimes(rc, out)

    def containers(self, name: str) -> Dict[str, str]:
        rc, out, err = self.run([self.docker, "ps", "--all", "--filter", f"name=^{name}", "--format",
                                 "{{.Names}}\t{{.State}}"])
        if rc != 0:
            self.module.fail_json(msg=f"docker ps failed (rc {rc}): {err.strip()}")
        return parse_containers(out)

    def listeners(self, ports: List[int]) -> List[str]:
        if not ports:
            return []
        ss = self.module.get_bin_path("ss", required=True)
        rc, out, err = self.run([ss, "-Hltn", ss_filter(ports)])
        if rc != 0:
            self.module.fail_json(msg=f"ss failed (rc {rc}): {err.strip()}")
        return [line.strip() for line in out.splitlines() if line.strip()]

    def unit(self, unit_file: str) -> Dict[str, str]:
        systemctl = self.module.get_bin_path("systemctl", required=True)
        _, out, _ = self.run([systemctl, "show", "--property=LoadState,ActiveState", "--", unit_file])
        return parse_unit(out)

    def guard(self, unit: str, state_dir: str) -> Dict[str, Any]:
        return guard_summary(self.unit(f"{unit}.service"), os.path.exists(os.path.join(state_dir, f"{unit}.json")))


def probe(module: AnsibleModule, rank: Rank) -> Dict[str, Any]:
    p = module.params
    unit = p["guard_unit"] or f"{p['container']}-memguard"
    image = rank.image(p["image"])
    container, strays = container_summary(rank.containers(p["container"]), p["container"])
    listeners = rank.listeners(p["ports"])
    missing = [path for path in p["binds"] if not os.path.exists(path)]
    return {
        "host": rank.host(), "image": image, "runtimes": rank.runtimes(),
        "paths": {path: os.path.exists(path) for path in p["paths"]}, "missing_binds": missing,
        "proc_limits": _read("/proc/self/limits"), "proc_status": _read("/proc/self/status"),
        "container": container, "strays": strays, "listeners": listeners,
        "guard": rank.guard(unit, p["state_dir"]),
        "supervisor": rank.unit(p["supervisor_unit"]) if p["supervisor_unit"] else None,
        "gid": check_planned(p["sysfs_root"], p["gid_expect"], 1, p["gid_index"]),
        "problems": rank_problems(p["name"] or os.uname()[1], image, p["image"], missing,
                                  strays, container, listeners, p["ports"]),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "image": {"type": "str", "required": True},
            "container": {"type": "str", "required": True},
            "paths": {"type": "list", "elements": "path", "default": []},
            "binds": {"type": "list", "elements": "path", "default": []},
            "ports": {"type": "list", "elements": "int", "default": []},
            "guard_unit": {"type": "str"},
            "state_dir": {"type": "path", "default": "/run/sparkfleet/memguard"},
            "supervisor_unit": {"type": "str"},
            "name": {"type": "str"},
            "gid_expect": {"type": "dict", "default": {}},
            "gid_index": {"type": "int", "default": 3},
            "sysfs_root": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **probe(module, Rank(module)))


if __name__ == "__main__":
    main()
