#!/usr/bin/python
"""Read several small text files in one call; a missing file is reported, not an error."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_file_contents
short_description: Read several small text files from a node in one call
description:
  - Returns the text of each of O(paths) (UTF-8), or null for a path that does not exist, in one round trip.
    A stat followed by a slurp costs two per file and fails on a missing file.
  - A path that exists but is not a readable regular UTF-8 text file, or is larger than O(max_bytes), fails
    naming the path.
version_added: "0.1.0"
author: sparkfleet
options:
  paths:
    description: Absolute paths to read.
    type: list
    elements: path
    required: true
  max_bytes:
    description: Refuse files larger than this (these are configuration and state files, never data).
    type: int
    default: 1048576
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
"""

EXAMPLES = r"""
- name: Memory saver | Read the target kernel's release and configuration
  sparkfleet.spark.spark_file_contents:
    paths:
      - /lib/modules/6.17.0-1008-nvidia-64k/build/include/generated/utsrelease.h
      - /lib/modules/6.17.0-1008-nvidia-64k/build/include/config/auto.conf
  register: headers

- name: Memory saver | Use them
  ansible.builtin.debug:
    msg: "{{ headers.contents['/lib/modules/6.17.0-1008-nvidia-64k/build/include/config/auto.conf'] is not none }}"
"""

RETURN = r"""
contents:
  description: Path to its text, or null when the path does not exist.
  returned: always
  type: dict
  sample: {/etc/default/grub.d/90-sparkfleet.cfg: "GRUB_CMDLINE_LINUX=...\n", /boot/grub/grubenv: null}
missing:
  description: The paths that do not exist, in the order given.
  returned: always
  type: list
  elements: str
  sample: [/boot/grub/grubenv]
"""

import os
import stat
from typing import Optional

from ansible.module_utils.basic import AnsibleModule


def read_one(path: str, max_bytes: int) -> Optional[str]:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path} is not a regular file")
    if info.st_size > max_bytes:
        raise ValueError(f"{path} has {info.st_size} bytes, more than max_bytes {max_bytes}")
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text") from exc


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="path", required=True),
            max_bytes=dict(type="int", default=1048576),
        ),
        supports_check_mode=True,
    )
    contents: dict[str, Optional[str]] = {}
    try:
        for path in module.params["paths"]:
            contents[path] = read_one(path, module.params["max_bytes"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"spark_file_contents: {exc}")
    missing = [path for path, text in contents.items() if text is None]
    module.exit_json(changed=False, contents=contents, missing=missing)


if __name__ == "__main__":
    main()
