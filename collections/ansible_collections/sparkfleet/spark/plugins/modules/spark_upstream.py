#!/usr/bin/python
"""Prepare one upstream source tree from the lock: pinned commit plus an ordered patch series, verified."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_upstream
short_description: Check out a pinned upstream commit, apply its patch series reproducibly, verify the tree
description:
  - Makes O(dest) a git work directory detached at O(commit) with every patch of O(patches) applied in order
    by C(git am), then compares the resulting C(HEAD^{tree}) with the lock's O(tree) and fails naming the
    upstream and both ids when they differ.
  - Before anything changes, the patch-set fingerprint (sha256 over each patch's base name, size and bytes in
    series order, see docs/image-and-model.md) is computed and compared with O(patchset_sha256).
  - Commits are reproducible. The committer name and e-mail are fixed (O(committer_name),
    O(committer_email)), the committer date is each patch's author date (C(--committer-date-is-author-date)),
    and the system and global git configuration, hooks, three-way merging and signing are shut out. Two
    builders preparing the same lock entry get identical tree and commit ids.
  - Local paths and C(file://) URLs work as O(repository) as well as remote URLs. The pinned commit is fetched
    by id (shallow when O(depth) > 0); when the server refuses that, its branches are fetched instead.
  - Idempotent. A stamp in the work directory's git dir records the state the directory was prepared to. When
    the stamp matches the lock entry and HEAD, the tree and a clean work tree agree with it, nothing runs and
    RV(changed) is false.
version_added: "0.1.0"
author: sparkfleet
options:
  name:
    description: Name of the upstream in the lock (lower-case letters, digits, C(.), C(_), C(-)).
    type: str
    required: true
  repository:
    description: Absolute local path or URL (C(file://), C(https://), C(ssh://)) of the upstream repository.
    type: str
    required: true
  commit:
    description: The pinned commit, a full 40 (or 64) hex digit object id.
    type: str
    required: true
  patches:
    description: Patch files in series order, as produced by C(git format-patch). Relative names are
      resolved against O(patch_dir).
    type: list
    elements: str
    default: []
  patch_dir:
    description: Directory that relative O(patches) entries are resolved against.
    type: path
  patchset_sha256:
    description: Expected patch-set fingerprint from the lock.
    type: str
  tree:
    description: Expected tree id of the patched source from the lock.
    type: str
  head:
    description: Expected commit id of the patched HEAD; optional (the tree is the identity).
    type: str
  dest:
    description: Work directory. Created when missing; an existing non-empty directory that is not its
      own git work directory is refused.
    type: path
    required: true
  require_pins:
    description: Fail before any change when O(patchset_sha256) or O(tree) is missing. Set false only to
      learn the values for a new lock entry; the result then carries a warning with the tree to record.
    type: bool
    default: true
  depth:
    description: Fetch depth for the pinned commit; 0 fetches full history.
    type: int
    default: 1
  committer_name:
    description: Fixed committer name for every applied patch.
    type: str
    default: sparkfleet
  committer_email:
    description: Fixed committer e-mail for every applied patch.
    type: str
    default: sparkfleet@localhost
attributes:
  check_mode:
    support: full
    description: Verifies the patch files and their fingerprint and reports whether the directory would
      change; fetches, checks out and applies nothing.
  diff_mode:
    support: none
    description: The change is a source tree; RV(actions) lists what would run instead.
notes:
  - Needs C(git) 2.32 or newer on the host (C(GIT_CONFIG_GLOBAL)).
  - A work directory whose tree differs from the lock is left as prepared (without a stamp) for inspection;
    the next run rebuilds it.
"""

EXAMPLES = r"""
- name: image_build | Prepare upstream sources
  sparkfleet.spark.spark_upstream:
    name: "{{ item.name }}"
    repository: "{{ item.repository }}"
    commit: "{{ item.commit }}"
    patches: "{{ item.patches | default([]) }}"
    patch_dir: /var/lib/sparkfleet/build/patches/{{ item.name }}
    patchset_sha256: "{{ item.patchset_sha256 }}"
    tree: "{{ item.tree }}"
    dest: /var/lib/sparkfleet/build/src/{{ item.name }}
  loop: "{{ spark_image_upstreams }}"
  loop_control:
    label: "{{ item.name }}"
  register: spark_image_build_sources
"""

RETURN = r"""
name: {description: Upstream name, returned: always, type: str, sample: vllm}
dest: {description: Work directory, returned: always, type: str}
commit: {description: The pinned base commit, returned: always, type: str}
patchset_sha256:
  description: Fingerprint of the patch series as computed from the files.
  returned: always
  type: str
  sample: 5d41402abc4b2a76b9719d911017c592ae1f6d2e7e6b4b3a2b1c0d9e8f7a6b5c
tree:
  description: Tree id of the patched source (in check mode with changes pending, the lock's tree).
  returned: always
  type: str
head:
  description: Commit id of the patched HEAD (in check mode with changes pending, the lock's head or null).
  returned: always
  type: str
patches:
  description: Number of patches in the series.
  returned: always
  type: int
actions:
  description: Steps that ran (or would run in check mode); empty when the directory was already prepared.
  returned: always
  type: list
  elements: str
"""

import os
from typing import Dict, List, Optional, Tuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_upstream import (
    GitIO, UpstreamError, prepare, validate_entry)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            repository=dict(type="str", required=True),
            commit=dict(type="str", required=True),
            patches=dict(type="list", elements="str", default=[]),
            patch_dir=dict(type="path"),
            patchset_sha256=dict(type="str"),
            tree=dict(type="str"),
            head=dict(type="str"),
            dest=dict(type="path", required=True),
            require_pins=dict(type="bool", default=True),
            depth=dict(type="int", default=1),
            committer_name=dict(type="str", default="sparkfleet"),
            committer_email=dict(type="str", default="sparkfleet@localhost"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["depth"] < 0:
        module.fail_json(msg=f"upstream {params['name']}: depth must be >= 0, got {params['depth']}")
    git = module.get_bin_path("git", required=True)

    def run(args: List[str], cwd: Optional[str], env: Dict[str, str]) -> Tuple[int, str, str]:
        return module.run_command(args, cwd=cwd if cwd and os.path.isdir(cwd) else None,
                                  environ_update=env, check_rc=False)

    try:
        entry = validate_entry(params, params["patch_dir"], params["require_pins"])
        io = GitIO(run, git, params["dest"], params["committer_name"], params["committer_email"])
        outcome = prepare(io, entry, params["depth"], module.check_mode)
    except UpstreamError as exc:
        module.fail_json(msg=str(exc), name=params["name"], dest=params["dest"])
    for warning in outcome.warnings:
        module.warn(warning)
    module.exit_json(patches=len(entry.patches), **outcome.as_dict())


if __name__ == "__main__":
    main()
