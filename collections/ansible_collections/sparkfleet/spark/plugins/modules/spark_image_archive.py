#!/usr/bin/python
"""Write the docker save archive of the serving image once, and thin copies without layers a rank already has."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_image_archive
short_description: Save an image to an archive once, or derive a thin archive without shared layers
description:
  - O(mode=save) runs C(docker image save --output) (argument list) into a temporary file next to O(path),
    checks that the archive holds exactly O(image_id), and renames it into place with mode 0600. An
    existing archive of the same image ID is kept (RV(changed=false)); a damaged or different one is replaced.
  - O(mode=thin) copies the archive O(src) to O(path) (never O(src) itself; the same path, a symlink or a hard
    link to it is refused) without the layer files of its first O(depth) layers,
    the layers a receiving rank already holds in the same order (from C(spark_image_identity) with
    C(collect_layers) and the C(shared_prefix) of the two chains). C(docker load) reads a layer file only
    when that layer chain is missing on the engine, so the thin archive loads to the same image ID while
    moving roughly the changed layers only. Layer files that a kept member links to stay.
  - Thin archives rely on the load behaviour of Docker's classic image store (checked with 20.10); see
    docs/image-and-model.md. Callers should load the full archive where that is not known to hold.
version_added: "0.1.0"
author: sparkfleet
options:
  mode:
    description: C(save) or C(thin).
    type: str
    choices: [save, thin]
    required: true
  path:
    description: Archive to write.
    type: path
    required: true
  image:
    description: Image reference to save (O(mode=save)).
    type: str
  image_id:
    description: Image ID the saved archive must hold (O(mode=save)).
    type: str
  src:
    description: Full archive to derive from (O(mode=thin)).
    type: path
  depth:
    description: Number of leading layers the receiver already holds (O(mode=thin)); 0 copies everything.
    type: int
    default: 0
  docker_bin:
    description: Docker CLI to run; found on C(PATH) when not given.
    type: path
attributes:
  check_mode:
    support: full
    description: Reports whether the archive would be written; writes nothing.
  diff_mode:
    support: none
    description: Archives are binary; RV(skipped_members) and RV(skipped_bytes) describe the thin copy.
"""

EXAMPLES = r"""
- name: image_distribute | Save the image once on the builder
  sparkfleet.spark.spark_image_archive:
    mode: save
    image: "{{ spark_image_tag }}"
    image_id: "{{ spark_image_build_id }}"
    path: /var/lib/sparkfleet/images/{{ spark_image_build_id | replace('sha256:', '') }}.tar

- name: image_distribute | Derive the thin archive for one rank
  sparkfleet.spark.spark_image_archive:
    mode: thin
    src: /var/lib/sparkfleet/images/{{ spark_image_build_id | replace('sha256:', '') }}.tar
    path: /var/lib/sparkfleet/images/{{ item.to }}.tar
    depth: "{{ spark_image_distribute_depth[item.to] }}"
"""

RETURN = r"""
path: {description: The archive, returned: always, type: str}
size: {description: Its size in bytes (null in check mode when it would be written), returned: always, type: int}
depth: {description: Leading layers left out, returned: mode=thin, type: int}
skipped_members: {description: Archive members left out, returned: mode=thin, type: int}
skipped_bytes: {description: Bytes of the layer files left out, returned: mode=thin, type: int}
kept_bytes: {description: Bytes of the members kept, returned: mode=thin, type: int}
"""

from typing import List, Tuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import ImageError
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image_archive import save_image, write_thin


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["save", "thin"], required=True),
            path=dict(type="path", required=True),
            image=dict(type="str"),
            image_id=dict(type="str"),
            src=dict(type="path"),
            depth=dict(type="int", default=0),
            docker_bin=dict(type="path"),
        ),
        required_if=[("mode", "save", ("image", "image_id")), ("mode", "thin", ("src",))],
        supports_check_mode=True,
    )
    p = module.params
    if p["depth"] < 0:
        module.fail_json(msg=f"depth must be >= 0, got {p['depth']}")

    def run(args: List[str]) -> Tuple[int, str, str]:
        return module.run_command(args, environ_update={"LC_ALL": "C"}, check_rc=False)

    try:
        if p["mode"] == "save":
            docker = p["docker_bin"] or module.get_bin_path("docker", required=True)
            result = save_image(run, docker, p["image"], p["image_id"], p["path"], module.check_mode)
        else:
            result = write_thin(p["src"], p["path"], p["depth"], module.check_mode)
    except (ImageError, OSError) as exc:
        module.fail_json(msg=str(exc), path=p["path"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
