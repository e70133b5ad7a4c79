#!/usr/bin/python
"""Read-only host facts of a DGX Spark node (kernel, driver, memory saver, Secure Boot, memory policy)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_host_facts
short_description: Gather the kernel, driver, memory-saver and host-policy facts of a DGX Spark node
description:
  - Reads, never writes, the facts the host roles and the doctor compare across nodes and against the pins
    (all nodes must be identical in kernel, page size, driver, UVM sources, packing, THP, C(min_free_kbytes)
    and Secure Boot state).
  - Kernel release and machine (C(os.uname)), page size (C(SC_PAGESIZE)) and the page flavour of the release
    name (C(-64k) suffix), C(kho=off) on the kernel command line.
  - Installed NVIDIA driver version from C(dpkg-query -W) of C(nvidia-kernel-source-*), C(nvidia-driver-*)
    (version-bearing) and C(linux-modules-nvidia-*); running driver from C(/sys/module/nvidia/version) or
    C(/proc/driver/nvidia/version).
  - nvidia-uvm C(srcversion) and the memory-saver parameter C(uvm_pack_sysmem_leaf_tables).
  - Secure Boot state (C(mokutil --sb-state)) and MOK enrolment of O(mok_certificate) (C(mokutil --test-key),
    judged by its text only because its exit code is 1 on DGX OS even when enrolled).
  - C(dkms status) in the DKMS 3.x and 2.x formats, THP mode, memory and recovery sysctls from C(/proc/sys)
    plus which C(sysctl.d) files set them, active swaps with the page size of each swap header, the
    C(RLIMIT_MEMLOCK) of the module process plus C(memlock) lines of C(limits.conf)/C(limits.d), and the
    display-manager state and default systemd target.
  - Commands run with C(LC_ALL=C) and list arguments. A missing tool or file never fails the module, the fact
    is null and RV(unavailable) says why.
version_added: "0.1.0"
author: sparkfleet
options:
  proc_root:
    description: Root of procfs (tests point it at a fixture tree).
    type: path
    default: /proc
  sys_root:
    description: Root of sysfs.
    type: path
    default: /sys
  etc_root:
    description: Root of the configuration tree (C(sysctl.d), C(security/limits.d)).
    type: path
    default: /etc
  mok_certificate:
    description:
      - DER certificate whose enrolment is tested, for example the fleet key
        C(/root/.local/share/dgx-spark-fan-control/keys/MOK.der). Without it RV(host.mok_enrolled) is null.
    type: path
  dkms_module:
    description: Only report C(dkms status) lines of this DKMS package, for example C(dgx-spark-memory-saver).
    type: str
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
attributes:
  facts:
    support: full
    description: Sets C(ansible_facts.spark_host).
notes:
  - Run it with become; reading swap headers and C(mokutil) need root.
  - RV(host.memlock) is the limit of the module process, so it reflects the session Ansible connected with.
"""

EXAMPLES = r"""
- name: host_baseline | Gather host facts
  sparkfleet.spark.spark_host_facts:
    mok_certificate: /root/.local/share/dgx-spark-fan-control/keys/MOK.der
    dkms_module: dgx-spark-memory-saver

- name: host_baseline | Require kho=off and the 64 KiB page size
  ansible.builtin.assert:
    that:
      - ansible_facts.spark_host.kho_off
      - ansible_facts.spark_host.page_size == 65536
    fail_msg: "{{ inventory_hostname }}: kho_off={{ ansible_facts.spark_host.kho_off }},
      page_size={{ ansible_facts.spark_host.page_size }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host's facts.
  returned: always
  type: dict
  contains:
    spark_host:
      description: The same dictionary as RV(host).
      type: dict
host:
  description: Host facts; every value is null when its probe could not answer (see RV(unavailable)).
  returned: always
  type: dict
  contains:
    kernel_release:
      description: Running kernel release.
      type: str
      sample: 7.0.0-1019-nvidia-64k
    machine:
      description: Machine type.
      type: str
      sample: aarch64
    page_size:
      description: Page size in bytes.
      type: int
      sample: 65536
    page_size_flavour:
      description: Page flavour of the release name, C(64k) or C(4k).
      type: str
      sample: 64k
    page_size_matches_flavour:
      description: The page size agrees with the release name.
      type: bool
    cmdline:
      description: Kernel command line.
      type: str
    kho_off:
      description: C(kho=off) is a token of the kernel command line.
      type: bool
    packages:
      description: Installed driver packages mapped to their versions.
      type: dict
    driver_installed:
      description: Upstream version of the installed driver packages.
      type: str
      sample: 580.178.04
    driver_running:
      description: Version of the loaded nvidia module.
      type: str
      sample: 580.178.04
    uvm_srcversion:
      description: srcversion of the loaded nvidia_uvm.
      type: str
      sample: 34683B82C2D3339BBD2EEC9
    uvm_packing:
      description: Value of uvm_pack_sysmem_leaf_tables; null for a stock module.
      type: str
      sample: "Y"
    secure_boot:
      description: Secure Boot is enabled.
      type: bool
    secure_boot_state:
      description: First line of C(mokutil --sb-state).
      type: str
      sample: SecureBoot enabled
    mok_certificate:
      description: The certificate that was tested.
      type: str
    mok_enrolled:
      description: The certificate is enrolled as a MOK.
      type: bool
    dkms:
      description: C(dkms status) lines with module, version, kernel, arch, state and note; kernel is null for C(added).
      type: list
      elements: dict
    dkms_modules:
      description: C(dkms status) as module, then version, then kernel mapped to its state.
      type: dict
    thp:
      description: Selected transparent hugepage mode.
      type: str
      sample: never
    sysctls:
      description: Tracked sysctl values from /proc/sys.
      type: dict
    sysctl_files:
      description: Per tracked sysctl the files setting it, in the order they apply.
      type: dict
    swaps:
      description: Active swaps with filename, type, size_kib, used_kib, priority and header_page_size.
      type: list
      elements: dict
    memlock:
      description: RLIMIT_MEMLOCK soft and hard limit, C(unlimited) or bytes.
      type: dict
    memlock_config:
      description: C(memlock) lines of limits.conf and limits.d with file, domain, type and value.
      type: list
      elements: dict
    display_manager:
      description: State printed by C(systemctl is-active display-manager).
      type: str
      sample: inactive
    display_manager_active:
      description: The display manager is active, activating or reloading.
      type: bool
    default_target:
      description: Output of C(systemctl get-default).
      type: str
      sample: multi-user.target
    unavailable:
      description: Fact name mapped to the reason it is null.
      type: dict
unavailable:
  description: Same as RV(host.unavailable), at the top level for quick reading.
  returned: always
  type: dict
"""

from typing import List, Optional, Tuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import C_LOCALE, HostIO, gather


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            proc_root=dict(type="path", default="/proc"),
            sys_root=dict(type="path", default="/sys"),
            etc_root=dict(type="path", default="/etc"),
            mok_certificate=dict(type="path"),
            dkms_module=dict(type="str"),
        ),
        supports_check_mode=True,
    )

    def run(args: List[str]) -> Tuple[int, str, str]:
        return module.run_command(args, environ_update=C_LOCALE, check_rc=False)

    def which(tool: str) -> Optional[str]:
        return module.get_bin_path(tool, required=False)

    params = module.params
    io = HostIO(run, which, params["proc_root"], params["sys_root"], params["etc_root"])
    host = gather(io, params["mok_certificate"], params["dkms_module"])
    module.exit_json(changed=False, ansible_facts={"spark_host": host}, host=host,
                     unavailable=host["unavailable"])


if __name__ == "__main__":
    main()
