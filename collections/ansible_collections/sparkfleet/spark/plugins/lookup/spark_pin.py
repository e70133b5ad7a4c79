"""Lookup plugin: the collection's version pins (plugins/module_utils/spark_pins.py) by variable name."""
from __future__ import annotations

DOCUMENTATION = r"""
name: spark_pin
short_description: The sparkfleet version pin of a variable
version_added: "1.0.0"
description:
  - Returns the pinned value of each named variable (kernel, driver, Memory Saver, serving image lock, model),
    from the collection's one table of pins, C(plugins/module_utils/spark_pins.py).
  - Role defaults read their pins with it, so a version bump is one edit; an inventory that sets the variable
    itself overrides the pin for that site.
options:
  _terms:
    description: Variable names, for example C(spark_nvidia_driver_version).
    required: true
    type: list
    elements: str
author: sparkfleet
"""

EXAMPLES = r"""
- name: Show the pinned driver
  ansible.builtin.debug:
    msg: "{{ lookup('sparkfleet.spark.spark_pin', 'spark_nvidia_driver_version') }}"
"""

RETURN = r"""
_raw:
  description: One value per term (a string, a number, a list or a mapping).
  type: list
  elements: raw
"""

from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_pins


class LookupModule(LookupBase):
    """sparkfleet.spark.spark_pin"""

    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[Any]:
        values = []
        for term in terms:
            try:
                values.append(spark_pins.pin(str(term)))
            except KeyError as exc:
                raise AnsibleLookupError(f"spark_pin: {exc.args[0]}") from exc
        return values
