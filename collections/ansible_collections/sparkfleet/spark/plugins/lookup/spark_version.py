"""Lookup plugin: sparkfleet's version (the collection's galaxy.yml or MANIFEST.json) on the controller."""
from __future__ import annotations

DOCUMENTATION = r"""
---
name: spark_version
short_description: sparkfleet's version, as the collection's metadata declares it
description:
  - Returns the collection's version from its C(galaxy.yml) (a checkout) or C(MANIFEST.json) (a built or
    installed collection), read on the controller. Modules run from a payload without the collection's
    metadata, so playbooks pass this value to them (the bench records it in its report).
  - Returns C(unknown) when neither file is found.
version_added: "1.0.0"
author: sparkfleet
options: {}
"""

EXAMPLES = r"""
- name: Show sparkfleet's version
  ansible.builtin.debug:
    msg: "{{ lookup('sparkfleet.spark.spark_version') }}"
"""

RETURN = r"""
_raw:
  description: One element, the version string.
  type: list
  elements: str
"""

from typing import Any  # noqa: E402

from ansible.plugins.lookup import LookupBase  # noqa: E402
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_version import sparkfleet_version  # noqa: E402


class LookupModule(LookupBase):
    """lookup('sparkfleet.spark.spark_version') -> ['1.0.0']."""

    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[str]:
        return [sparkfleet_version()]
