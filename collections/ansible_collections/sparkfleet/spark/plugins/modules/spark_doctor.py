#!/usr/bin/python
"""Read what the doctor needs from a node that no other sparkfleet module reads (read-only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_doctor
short_description: Read device nodes, RDMA devices, nvidia_drm parameters, units, the serving container and the GPU clock
description:
  - The node side of C(playbooks/doctor.yml) for what spark_host_facts, spark_fabric_state, spark_roce_gid,
    spark_image_identity, spark_model_manifest and spark_memory_guard do not read.
  - Whether each of O(devices) exists (C(/dev/nvidia0) tells a Spark from a host without a GPU), the RDMA
    devices under C(class/infiniband), whether the node booted with EFI firmware (C(firmware/efi)), and the
    C(modeset) and C(fbdev) parameters of a loaded C(nvidia_drm).
  - C(systemctl show) of every unit in O(units) (load, active and unit-file state).
  - C(docker inspect) of O(container) when given (state, image ID, C(Cmd), C(Env), labels, start time and restart
    count); a missing container is C(exists=false), not a failure.
  - The SM clock of the first GPU from C(nvidia-smi) when the GPU device node exists.
  - Never changes anything and never fails because something is missing; the doctor judges the result
    (module_utils/spark_doctor.py).
version_added: "0.1.0"
author: sparkfleet
options:
  devices:
    description: Device nodes whose existence is reported.
    type: list
    elements: path
    default: [/dev/nvidia0]
  units:
    description: systemd units whose state is reported.
    type: list
    elements: str
    default: [dgx-fan-control.service]
  container:
    description: Serving container to inspect; nothing is inspected without it.
    type: str
  sys_root:
    description: Root of sysfs (tests point it at a fixture tree).
    type: path
    default: /sys
  docker_bin:
    description: Docker CLI; found on C(PATH) when not given. Without one the container is reported as not inspected.
    type: path
  secrets:
    description:
      - Values the site marks secret (token, API key, passwords). They, and the values of secret-named
        variables and engine flags (C(HF_TOKEN), C(--api-key)), are replaced by C(<redacted>) in the returned
        container's C(env), C(cmd) and C(labels), so C(-v) output and saved reports never show them.
    type: list
    elements: str
    default: []
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
"""

EXAMPLES = r"""
- name: Doctor | Read devices, units, the serving container and the GPU clock
  sparkfleet.spark.spark_doctor:
    container: dsv41-karmic-kraken
  register: doctor_probe
"""

RETURN = r"""
devices:
  description: Each requested device node mapped to whether it exists.
  returned: always
  type: dict
  sample: {/dev/nvidia0: false}
rdma_devices:
  description: Names under class/infiniband (empty without RDMA devices).
  returned: always
  type: list
  elements: str
  sample: [rocep1s0f0, rocep1s0f1]
efi:
  description: The node booted with EFI firmware.
  returned: always
  type: bool
nvidia_drm:
  description: C(modeset) and C(fbdev) of the loaded nvidia_drm, null when it is not loaded.
  returned: always
  type: dict
  sample: {modeset: "Y", fbdev: "Y"}
units:
  description: Per unit its C(found), C(load), C(active) and C(enabled) state.
  returned: always
  type: dict
container:
  description: The serving container (exists, status, running, exit_code, oom_killed, error, image, cmd, env, labels,
    started_at, restart_count); empty without O(container).
  returned: always
  type: dict
gpu:
  description: C(sm_clock_mhz) of the first GPU and the C(reason) when it is null.
  returned: always
  type: dict
missing_tools:
  description:
    - The tools these probes need that the node lacks (systemctl for O(units), docker for O(container),
      nvidia-smi on a node with a GPU device), each with what it is needed for. The doctor reports each as a
      failed check (C(node.tools)); the module itself does not fail.
  returned: always
  type: list
  elements: dict
  sample: [{tool: docker, needed_for: inspecting the serving container dsv41-karmic-kraken}]
"""

import os
from typing import Any, Dict, List

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_doctor import (
    parse_container, parse_sm_clock, unit_state)
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import C_LOCALE
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_gid import read_attribute
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_redact import redact_inspect


def _rdma(sys_root: str) -> List[str]:
    path = os.path.join(sys_root, "class", "infiniband")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def _drm(sys_root: str) -> Dict[str, Any]:
    base = os.path.join(sys_root, "module", "nvidia_drm", "parameters")
    return {name: read_attribute(os.path.join(base, name))[0] for name in ("modeset", "fbdev")}


def _missing_tools(module: AnsibleModule, has_gpu: bool) -> List[Dict[str, str]]:
    """The tools the probes below need that the node lacks, with what each is needed for."""
    needs = []
    if module.params["units"]:
        needs.append(("systemctl", "reading the units " + ", ".join(module.params["units"])))
    if module.params["container"] and not module.params["docker_bin"]:
        needs.append(("docker", "inspecting the serving container " + module.params["container"]))
    if has_gpu:
        needs.append(("nvidia-smi", "reading the GPU clock"))
    return [{"tool": tool, "needed_for": why} for tool, why in needs if not module.get_bin_path(tool)]


def _units(module: AnsibleModule) -> Dict[str, Dict[str, Any]]:
    systemctl = module.get_bin_path("systemctl")
    states = {}
    for unit in module.params["units"]:
        if not systemctl:
            states[unit] = {"found": False, "load": "no systemctl", "active": "unknown", "enabled": "unknown"}
            continue
        rc, out, _ = module.run_command([systemctl, "show", "-p", "LoadState", "-p", "ActiveState",
                                         "-p", "UnitFileState", "--", unit], environ_update=C_LOCALE)
        states[unit] = unit_state(rc, out)
    return states


def _container(module: AnsibleModule) -> Dict[str, Any]:
    name = module.params["container"]
    if not name:
        return {}
    docker = module.params["docker_bin"] or module.get_bin_path("docker")
    if not docker:
        return dict(parse_container(1, ""), status="not inspected", error="docker is not installed")
    rc, out, _ = module.run_command([docker, "inspect", "--type", "container", "--format", "{{json .}}", name],
                                    environ_update=C_LOCALE)
    return redact_inspect(parse_container(rc, out), module.params["secrets"])


def _gpu(module: AnsibleModule, has_gpu: bool) -> Dict[str, Any]:
    if not has_gpu:
        return {"sm_clock_mhz": None, "reason": "no GPU device node"}
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        return {"sm_clock_mhz": None, "reason": "nvidia-smi is not installed"}
    rc, out, err = module.run_command([smi, "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                                      environ_update=C_LOCALE)
    clock, reason = parse_sm_clock(rc, out or err)
    return {"sm_clock_mhz": clock, "reason": reason}


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type="list", elements="path", default=["/dev/nvidia0"]),
            units=dict(type="list", elements="str", default=["dgx-fan-control.service"]),
            container=dict(type="str"),
            sys_root=dict(type="path", default="/sys"),
            docker_bin=dict(type="path"),
            secrets=dict(type="list", elements="str", default=[], no_log=True),
        ),
        supports_check_mode=True,
    )
    sys_root = module.params["sys_root"]
    devices = {path: os.path.exists(path) for path in module.params["devices"]}
    module.exit_json(
        changed=False, devices=devices, rdma_devices=_rdma(sys_root),
        efi=os.path.isdir(os.path.join(sys_root, "firmware", "efi")), nvidia_drm=_drm(sys_root),
        units=_units(module), container=_container(module), gpu=_gpu(module, any(devices.values())),
        missing_tools=_missing_tools(module, any(devices.values())),
    )


if __name__ == "__main__":
    main()
