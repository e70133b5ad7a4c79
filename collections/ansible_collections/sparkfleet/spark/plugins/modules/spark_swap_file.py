#!/usr/bin/python
"""A dedicated swap file with the header of one page size, in one call."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_swap_file
short_description: Make a swap file exist, belong to root (0600) and carry a swap header of a given page size
description:
  - Allocates O(path) with O(size_mib) MiB when it does not exist (C(posix_fallocate)), restricts it to
    root with mode 0600, and writes a swap header for O(page_size) with C(mkswap --pagesize) when the file has
    none or one of another page size. The header is read back and must show the page size.
  - An existing file is never resized or re-allocated, since it may be the swap in use.
  - mkswap puts C(SWAPSPACE2) in the last 10 bytes of the first page, so the offset of that signature gives the
    header's page size (a 4 KiB header is unusable on the 64 KiB kernel).
  - Does not activate the file; the host's page-size selection unit does at boot.
version_added: "0.1.0"
author: sparkfleet
options:
  path: {description: The swap file., type: path, required: true}
  size_mib: {description: Size of a newly allocated file in MiB., type: int, required: true}
  page_size: {description: Page size the header must be written for., type: int, choices: [4096, 16384, 65536], default: 65536}
  label: {description: Swap label given to mkswap., type: str, default: swap-64k}
attributes:
  check_mode:
    support: full
    description: Reports the steps that would run and changes nothing.
  diff_mode:
    support: none
    description: The file is binary; RV(steps) says what changes.
"""

EXAMPLES = r"""
- name: Host baseline | Prepare the 64 KiB swap file
  sparkfleet.spark.spark_swap_file:
    path: /swap-64k.img
    size_mib: 16384
    page_size: 65536
    label: swap-64k
"""

RETURN = r"""
steps:
  description: The steps that ran (or in check mode would run), in order (V(allocate), V(restrict), V(mkswap)).
  returned: always
  type: list
  elements: str
  sample: [mkswap]
header:
  description: The file carries a header of O(page_size) (after the run; before it in check mode).
  returned: always
  type: bool
  sample: true
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import SWAP_PAGE_SIZES, has_swap_header, swap_file_steps


def header_ok(path: str, page_size: int) -> bool:
    with open(path, "rb") as handle:
        return has_swap_header(handle.read(page_size), page_size)


def allocate(path: str, size_mib: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, size_mib * 1024 * 1024)
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            size_mib=dict(type="int", required=True),
            page_size=dict(type="int", default=65536, choices=list(SWAP_PAGE_SIZES)),
            label=dict(type="str", default="swap-64k"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = p["path"]
    if p["size_mib"] <= 0:
        module.fail_json(msg=f"spark_swap_file: size_mib must be positive, got {p['size_mib']}")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        module.fail_json(msg=f"spark_swap_file: {path} exists and is not a regular file")
    ready = info is not None and header_ok(path, p["page_size"])
    steps = swap_file_steps(info is not None, stat.S_IMODE(info.st_mode) if info else 0,
                            info.st_uid if info else 0, info.st_gid if info else 0, ready)
    if module.check_mode or not steps:
        module.exit_json(changed=bool(steps), steps=steps, header=ready)
    try:
        if "allocate" in steps:
            allocate(path, p["size_mib"])
        if "restrict" in steps:
            os.chmod(path, 0o600)
            os.chown(path, 0, 0)
    except OSError as exc:
        module.fail_json(msg=f"spark_swap_file: {path}: {exc.strerror or exc}", steps=steps)
    if "mkswap" in steps:
        module.run_command(["mkswap", "--pagesize", str(p["page_size"]), "--label", p["label"], path],
                           check_rc=True, environ_update={"LC_ALL": "C"})
    if not header_ok(path, p["page_size"]):
        module.fail_json(msg=f"spark_swap_file: {path} has no SWAPSPACE2 signature at offset "
                             f"{p['page_size'] - 10} after mkswap", steps=steps)
    module.exit_json(changed=True, steps=steps, header=True)


if __name__ == "__main__":
    main()
