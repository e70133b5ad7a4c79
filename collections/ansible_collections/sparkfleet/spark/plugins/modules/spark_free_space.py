#!/usr/bin/python
"""Refuse a transfer before it starts when the target file system lacks the space (plus a margin)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_free_space
short_description: Check that the file system holding a path has room for a transfer plus a margin
description:
  - Reads C(statvfs) of O(path) (or its nearest existing ancestor, since a target directory may not exist
    yet) and compares the space available to unprivileged writers (C(f_bavail * f_frsize)) with
    O(needed_bytes) plus O(margin_bytes) plus O(margin_fraction) of O(needed_bytes).
  - Fails with a message naming O(node), O(path), the free and required space and the shortfall, before the
    caller writes anything; succeeds with the same figures otherwise.
version_added: "0.1.0"
author: sparkfleet
options:
  path:
    description: Where the data will be written.
    type: path
    required: true
  needed_bytes:
    description: Bytes still to be written (for a model sync, the files that are missing or differ).
    type: int
    required: true
  margin_bytes:
    description: Space that must remain free after the transfer.
    type: int
    default: 0
  margin_fraction:
    description: Additional margin as a fraction of O(needed_bytes) (0 to 1).
    type: float
    default: 0.0
  node:
    description: Name used in messages (the inventory host name); defaults to the host name.
    type: str
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
"""

EXAMPLES = r"""
- name: model | Check free disk space before the fan-out
  sparkfleet.spark.spark_free_space:
    path: "{{ spark_model_dir }}"
    needed_bytes: "{{ spark_model_manifest_data.total_size }}"
    margin_bytes: "{{ spark_model_free_margin_gib * 1073741824 }}"
    node: "{{ inventory_hostname }}"
"""

RETURN = r"""
checked_path: {description: The existing path whose file system was measured, returned: always, type: str}
free_bytes: {description: Bytes available to unprivileged writers, returned: always, type: int}
needed_bytes: {description: O(needed_bytes), returned: always, type: int}
required_bytes: {description: Needed plus margins, returned: always, type: int}
shortfall_bytes: {description: Bytes missing (0 when enough), returned: always, type: int}
ok: {description: Enough space, returned: always, type: bool}
msg: {description: The verdict naming node and path, returned: always, type: str}
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_disk import (
    DiskError, free_from_statvfs, nearest_existing, space_verdict)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            needed_bytes=dict(type="int", required=True),
            margin_bytes=dict(type="int", default=0),
            margin_fraction=dict(type="float", default=0.0),
            node=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    node = p["node"] or socket.gethostname()
    checked = nearest_existing(p["path"])
    try:
        stats = os.statvfs(checked)
        verdict = space_verdict(node, p["path"], free_from_statvfs(stats.f_bavail, stats.f_frsize),
                                p["needed_bytes"], p["margin_bytes"], p["margin_fraction"])
    except (DiskError, OSError) as exc:
        module.fail_json(msg=f"{node}: free-space check of {p['path']}: {exc}", checked_path=checked)
    if not verdict["ok"]:
        module.fail_json(checked_path=checked, **verdict)
    module.exit_json(changed=False, checked_path=checked, **verdict)


if __name__ == "__main__":
    main()
