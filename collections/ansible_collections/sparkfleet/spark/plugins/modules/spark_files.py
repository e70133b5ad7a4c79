#!/usr/bin/python
"""Make a set of directories and whole-text files match, in one module call."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_files
short_description: Make a set of directories and files (whole text, mode, owner) match in one call
description:
  - Creates the O(directories) first, then writes each of the O(files) whose text, mode or owner differs, in
    list order. A file is written to a temporary file in its directory, given its mode and owner, then renamed
    over the old one, so readers see the old or the new text, never half.
  - One call replaces a loop of M(ansible.builtin.copy) or M(ansible.builtin.template) tasks, each of which
    costs two round trips to the node even when nothing changes. Render templates on the controller with
    C(lookup('ansible.builtin.template', ...)) and pass the text.
  - Reports which paths changed (RV(changed_paths)), so handlers and later tasks react to the file that changed,
    not to the whole set.
  - Not for secrets, since the text of every file is shown by C(--diff). Keys and passwords stay in tasks of their
    own with C(no_log).
version_added: "0.1.0"
author: sparkfleet
options:
  directories:
    description: Directories that must exist, with their mode and owner (missing parents are created 0755).
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: Absolute path., type: path, required: true}
      mode: {description: Octal mode such as C("0755")., type: raw, required: true}
      owner: {description: User name; left as it is when omitted (a new path gets the connection user's)., type: str}
      group: {description: Group name; left as it is when omitted., type: str}
  files:
    description: Files with their whole text; a file that exists with other text, mode or owner is replaced.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: Absolute path; its directory must exist or be listed in O(directories)., type: path, required: true}
      content: {description: The whole text of the file (UTF-8)., type: str, required: true}
      mode: {description: Octal mode such as C("0644")., type: raw, required: true}
      owner: {description: User name; left as it is when omitted (a new path gets the connection user's)., type: str}
      group: {description: Group name; left as it is when omitted., type: str}
attributes:
  check_mode:
    support: full
    description: Reports what would change and writes nothing.
  diff_mode:
    support: full
    description: One diff per changed path (text, and mode/owner when they differ).
"""

EXAMPLES = r"""
- name: Host baseline | Write the managed files
  sparkfleet.spark.spark_files:
    directories:
      - {path: /etc/systemd/system.conf.d, mode: "0755", owner: root, group: root}
    files:
      - path: /etc/systemd/system.conf.d/90-sparkfleet-memlock.conf
        content: "[Manager]\nDefaultLimitMEMLOCK=infinity\n"
        mode: "0644"
        owner: root
        group: root
      - path: /etc/docker/daemon.json
        content: "{{ settings | to_nice_json(indent=2) }}\n"
        mode: "0644"
        owner: root
        group: root
  register: host_baseline_files

- name: Host baseline | Use the result
  ansible.builtin.debug:
    msg: "{{ '/etc/docker/daemon.json' in host_baseline_files.changed_paths }}"
"""

RETURN = r"""
changed_paths:
  description: Paths that were (or in check mode would be) created or changed, in the order applied.
  returned: always
  type: list
  elements: str
  sample: [/etc/docker/daemon.json]
changes:
  description: Per changed path, what changed (V(create), V(replace), V(content), V(mode), V(owner)).
  returned: always
  type: dict
  sample: {/etc/docker/daemon.json: [content]}
"""

import grp
import pwd
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_files import Wanted, apply, differences, file_diff, observe, parse_mode

ENTRY = dict(
    path=dict(type="path", required=True),
    mode=dict(type="raw", required=True),
    owner=dict(type="str"),
    group=dict(type="str"),
)


def wanted_entry(item: dict[str, Any], content: str | None) -> Wanted:
    path = item["path"]
    try:
        uid = None if item["owner"] is None else pwd.getpwnam(item["owner"]).pw_uid
        gid = None if item["group"] is None else grp.getgrnam(item["group"]).gr_gid
    except KeyError as exc:
        raise ValueError(f"{path}: unknown owner or group ({exc.args[0]})") from exc
    return Wanted(path=path, mode=parse_mode(item["mode"], path), uid=uid, gid=gid, content=content)


def apply_one(wanted: Wanted, found: list[str]) -> None:
    try:
        apply(wanted, found)
    except OSError as exc:
        raise ValueError(f"{wanted.path}: {exc.strerror or exc}") from exc


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=ENTRY),
            files=dict(type="list", elements="dict", default=[], options=dict(ENTRY, content=dict(type="str", required=True))),
        ),
        supports_check_mode=True,
    )
    changes: dict[str, list[str]] = {}
    diffs: list[dict[str, str]] = []
    try:
        entries = [wanted_entry(d, None) for d in module.params["directories"]]
        entries += [wanted_entry(f, f["content"]) for f in module.params["files"]]
        for wanted in entries:
            observed = observe(wanted.path)
            found = differences(wanted, observed)
            if not found:
                continue
            if not module.check_mode:
                apply_one(wanted, found)
            changes[wanted.path] = found
            diffs.append(file_diff(wanted, observed, found))
    except (OSError, ValueError) as exc:
        done = f" (already changed: {', '.join(changes)})" if changes else ""
        module.fail_json(msg=f"spark_files: {exc}{done}", changed=bool(changes), changed_paths=list(changes),
                         changes=changes)
    result: dict[str, Any] = dict(changed=bool(changes), changed_paths=list(changes), changes=changes)
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
