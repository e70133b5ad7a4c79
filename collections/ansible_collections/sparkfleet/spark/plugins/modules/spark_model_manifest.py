#!/usr/bin/python
"""Create or verify the manifest of a model directory (relative path, size, sha256 per file + revision stamp)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_model_manifest
short_description: Write or check the per-file size and sha256 manifest of a model directory
description:
  - O(mode=create) walks O(path) and writes a manifest (relative path, size and sha256 of every regular file)
    and a stamp naming O(revision), both atomically. Symlinks and other non-regular entries are refused
    with a message naming each one; a Hugging Face cache snapshot is a farm of links into a blob store and
    copying it ships dangling links, so materialise real files first.
  - When the existing manifest and stamp are for the same revision and every file still has the size and
    modification time the stamp recorded, the stored hashes are reused (no file is read) and nothing is
    written, so a second run reports RV(changed=false) without re-hashing hundreds of GB. O(rehash) forces
    hashing.
  - O(mode=verify) compares O(path) with the manifest. Sizes are always checked; sha256 only with
    O(hashes=true) (after the first sync and on demand). Missing, zero-length, short, long, non-regular
    and (with hashes) corrupted files fail the module with one message naming O(node) and every bad file.
    Files not in the manifest are warnings and listed in RV(extra_files).
  - Files are hashed streaming in 1 MiB chunks, O(jobs) files at a time.
version_added: "0.1.0"
author: sparkfleet
options:
  mode:
    description: C(create) writes the manifest; C(verify) checks the directory against it.
    type: str
    choices: [create, verify]
    required: true
  path:
    description: The model directory.
    type: path
    required: true
  manifest:
    description: Manifest file (default C(<path>/sparkfleet-manifest.json)); excluded from the walk.
    type: path
  stamp:
    description: Stamp file (default C(<path>/sparkfleet-stamp.json)) with the revision, the manifest's sha256
      and size and mtime per file; excluded from the walk.
    type: path
  revision:
    description: Model revision recorded in the manifest and stamp. Required for O(mode=create).
    type: str
  expected_revision:
    description: With O(mode=verify), fail unless the manifest is for this revision.
    type: str
  hashes:
    description: With O(mode=verify), also compare every file's sha256 (reads every byte).
    type: bool
    default: false
  fail_on_problems:
    description: With O(mode=verify), fail when a file is bad. Set false before a sync to learn
      RV(transfer_bytes) for the free-space check; the problems are still returned.
    type: bool
    default: true
  rehash:
    description: With O(mode=create), hash every file even when the stamp says nothing changed.
    type: bool
    default: false
  jobs:
    description: Files hashed in parallel.
    type: int
    default: 4
  node:
    description: Name used in messages (the inventory host name); defaults to the host name.
    type: str
attributes:
  check_mode:
    support: full
    description: Create computes the manifest and reports whether it would change without writing; verify
      is read-only and behaves the same.
  diff_mode:
    support: full
    description: Create returns the manifest before and after.
"""

EXAMPLES = r"""
- name: model | Write the manifest of the downloaded model
  sparkfleet.spark.spark_model_manifest:
    mode: create
    path: /var/lib/sparkfleet/models/deepseek-v4.1-flash
    revision: dba1be0a40aa45a94ad051997016db3960a90277

- name: model | Verify the model on every rank (hashes on the first sync)
  sparkfleet.spark.spark_model_manifest:
    mode: verify
    path: /var/lib/sparkfleet/models/deepseek-v4.1-flash
    expected_revision: dba1be0a40aa45a94ad051997016db3960a90277
    hashes: "{{ spark_model_sync is changed or spark_model_verify_hashes }}"
    node: "{{ inventory_hostname }}"
"""

RETURN = r"""
manifest: {description: Manifest path, returned: always, type: str}
revision: {description: Revision of the manifest, returned: always, type: str}
file_count: {description: Files described (create), returned: mode=create, type: int}
total_size: {description: Sum of the file sizes in bytes (create), returned: mode=create, type: int}
checked_files: {description: Manifest entries checked (verify), returned: mode=verify, type: int}
hashed_files: {description: Files whose bytes were hashed in this run, returned: always, type: int}
hashed_bytes: {description: Bytes hashed in this run, returned: always, type: int}
ok: {description: Every file matches (verify), returned: mode=verify, type: bool}
problems:
  description: One entry per bad file (path, problem, expected_size, actual_size).
  returned: mode=verify
  type: list
  elements: dict
  sample: [{path: model-00003-of-00048.safetensors, problem: "short (1048576 of 10737418240 bytes)",
            expected_size: 10737418240, actual_size: 1048576}]
transfer_bytes:
  description: Sum of the manifest sizes of the bad files, what a sync has to write (verify).
  returned: mode=verify
  type: int
extra_files:
  description: Files present but not in the manifest (a warning, not a failure).
  returned: mode=verify
  type: list
  elements: str
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_manifest import (
    DEFAULT_MANIFEST, DEFAULT_STAMP, ManifestError, create, verify)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["create", "verify"], required=True),
            path=dict(type="path", required=True),
            manifest=dict(type="path"),
            stamp=dict(type="path"),
            revision=dict(type="str"),
            expected_revision=dict(type="str"),
            hashes=dict(type="bool", default=False),
            fail_on_problems=dict(type="bool", default=True),
            rehash=dict(type="bool", default=False),
            jobs=dict(type="int", default=4),
            node=dict(type="str"),
        ),
        required_if=[("mode", "create", ("revision",))],
        supports_check_mode=True,
    )
    p = module.params
    node = p["node"] or socket.gethostname()
    manifest = p["manifest"] or os.path.join(p["path"], DEFAULT_MANIFEST)
    stamp = p["stamp"] or os.path.join(p["path"], DEFAULT_STAMP)
    if p["jobs"] < 1:
        module.fail_json(msg=f"{node}: jobs must be >= 1, got {p['jobs']}")
    try:
        if p["mode"] == "create":
            result = create(p["path"], manifest, stamp, p["revision"], p["jobs"], p["rehash"], module.check_mode)
        else:
            result = verify(p["path"], manifest, stamp, p["hashes"], p["jobs"], node)
    except (ManifestError, OSError) as exc:
        module.fail_json(msg=f"{node}: {exc}" if not str(exc).startswith(f"{node}:") else str(exc))
    for warning in result.pop("warnings", []):
        module.warn(f"{node}: {warning}")
    if not module._diff:
        result.pop("diff", None)
    if p["mode"] == "verify":
        finish_verify(module, result, p["expected_revision"], node, p["fail_on_problems"])
    module.exit_json(**result)


def finish_verify(module: AnsibleModule, result: dict, expected_revision: str, node: str, fail: bool) -> None:
    for path in result["extra_files"]:
        module.warn(f"{node}: {path} is not in the manifest")
    if expected_revision and result["revision"] != expected_revision:
        module.fail_json(**{**result, "ok": False, "msg": f"{node}: manifest is for revision {result['revision']}, "
                                                          f"expected {expected_revision}"})
    if fail and not result["ok"]:
        module.fail_json(**result)


if __name__ == "__main__":
    main()
