#!/usr/bin/python
"""Read the identity of a serving image on one node's Docker engine: ID, labels, layer digests."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_image_identity
short_description: Report the image ID, labels and layer digests a node's Docker engine holds for a tag
description:
  - Runs C(docker image inspect) (argument list, no shell) for O(image) on the node and returns whether it is
    present, its image ID, labels, C(RootFS.Layers) digests and repository tags.
  - With O(expected_id) it also reports whether that exact image is on the node under any name
    (RV(id_present)), which the distribution plan needs; a node holding the ID needs only a tag,
    a node holding another image under the tag is a conflict.
  - With O(expected_id) and/or O(expected_labels) it lists what differs on this node in RV(problems)
    (missing image, other ID, missing or different labels). The module fails on them only with
    O(fail_on_mismatch); the role usually collects every node first and fails once naming each node.
  - With O(collect_layers) it also returns the layer chains of every image on the engine, so the
    distributor can send only the layers a node lacks.
version_added: "0.1.0"
author: sparkfleet
options:
  image:
    description: Image reference to inspect, normally the content-addressed tag.
    type: str
    required: true
  expected_id:
    description: The builder's image ID (C(sha256:...)).
    type: str
  expected_labels:
    description: Identity labels the image must carry with these exact values.
    type: dict
    default: {}
  fail_on_mismatch:
    description: Fail when RV(problems) is not empty.
    type: bool
    default: false
  collect_layers:
    description: Also return RV(layer_chains), the C(RootFS.Layers) of every image on the engine.
    type: bool
    default: false
  node:
    description: Name used in messages (the inventory host name); defaults to the host name.
    type: str
  docker_bin:
    description: Docker CLI to run; found on C(PATH) when not given.
    type: path
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
notes:
  - Reads only; RV(changed) is always false.
"""

EXAMPLES = r"""
- name: image_distribute | Read the image identity on every rank
  sparkfleet.spark.spark_image_identity:
    image: "{{ spark_image_tag }}"
    expected_id: "{{ spark_image_build_id }}"
    expected_labels: "{{ spark_image_labels }}"
    node: "{{ inventory_hostname }}"
  register: spark_image_distribute_identity
"""

RETURN = r"""
present: {description: The engine holds an image under O(image), returned: always, type: bool}
id:
  description: Its image ID; null when absent.
  returned: always
  type: str
  sample: "sha256:468fdb259ba940a886f956b32fa8a14f89bb0cc78621912661754dc0b1917f82"
labels: {description: Its labels, returned: always, type: dict}
layers: {description: Its C(RootFS.Layers) digests in order, returned: always, type: list, elements: str}
repo_tags: {description: Its repository tags, returned: always, type: list, elements: str}
id_present:
  description: The engine holds O(expected_id) under any name; null without O(expected_id).
  returned: always
  type: bool
architecture: {description: Image architecture, returned: when present, type: str, sample: arm64}
os: {description: Image OS, returned: when present, type: str, sample: linux}
size: {description: Image size in bytes, returned: when present, type: int}
problems:
  description: What differs from O(expected_id) and O(expected_labels) on this node.
  returned: always
  type: list
  elements: str
  sample: ["label org.sparkfleet.tree.vllm is 1a64..., expected a00a..."]
matches: {description: RV(problems) is empty, returned: always, type: bool}
layer_chains:
  description: C(RootFS.Layers) of every image on the engine.
  returned: when collect_layers
  type: list
  elements: list
"""

import socket
from typing import List, Tuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import (
    ImageError, layer_chains, node_problems, read_node_image)

C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            expected_id=dict(type="str"),
            expected_labels=dict(type="dict", default={}),
            fail_on_mismatch=dict(type="bool", default=False),
            collect_layers=dict(type="bool", default=False),
            node=dict(type="str"),
            docker_bin=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    node = p["node"] or socket.gethostname()
    docker = p["docker_bin"] or module.get_bin_path("docker", required=False)
    if not docker:
        module.fail_json(msg=f"{node}: the docker CLI is not installed (needed to inspect {p['image']})")

    def run(args: List[str]) -> Tuple[int, str, str]:
        return module.run_command(args, environ_update=C_LOCALE, check_rc=False)

    labels = {str(k): str(v) for k, v in p["expected_labels"].items()}
    try:
        facts, extra = read_node_image(run, docker, p["image"], p["expected_id"])
        chains = layer_chains(run, docker) if p["collect_layers"] else None
    except ImageError as exc:
        module.fail_json(msg=f"{node}: {exc}")
    problems = node_problems(p["expected_id"], labels, facts) if (p["expected_id"] or labels) else []
    result = dict(changed=False, node=node, image=p["image"], problems=problems, matches=not problems,
                  **facts.as_dict(), **extra)
    if chains is not None:
        result["layer_chains"] = chains
    if problems and p["fail_on_mismatch"]:
        module.fail_json(msg=f"{node}: image {p['image']}: {', '.join(problems)}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
