"""Serving groups: which Ansible groups of an inventory are each one tensor-parallel engine.

`spark` stays the group of every Spark. `spark_serving_groups` (an inventory-wide list, set for group spark or
all) names the serving groups: Ansible groups, each a subset of `spark`, each with its own ranks 0..n-1, its own
`spark_topology` and its own serving profile (the group's group_vars). Unset, or `[spark]`, means one serving
group, `spark` itself: what every inventory meant before several groups could be declared.
Every Spark serves in exactly one group: a Spark in none would get the host stage but no fabric plan.
Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain

NAME = "spark_serving_groups"
ALL_SPARKS = "spark"
SINGLE = [ALL_SPARKS]
# A serving group's name becomes a directory of render's output: Ansible's own group name characters, no dot.
_GROUP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# Groups every inventory has whatever it declares: neither is the hosts of one engine.
RESERVED = ("all", "ungrouped")


def group_hosts(groups: Mapping[str, Any], name: str) -> list[str]:
    """The hosts of group `name`; [] when the inventory does not define it."""
    hosts = groups.get(name) if isinstance(groups, Mapping) else None
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Sequence):
        return []
    return [str(h) for h in hosts]


def _declared(hostvars: Mapping[str, Any], sparks: Sequence[str]) -> tuple[Any, list[str]]:
    """The one value every Spark holds, or the hosts that disagree with the first."""
    first = sparks[0]
    want = _plain(hostvars[first].get(NAME)) if first in hostvars else None
    errors = []
    for host in sparks[1:]:
        have = _plain(hostvars[host].get(NAME)) if host in hostvars else None
        if have != want:
            errors.append(f"host {host}: {NAME} {have!r} differs from host {first}'s {want!r}: it is an "
                          "inventory-wide setting (set it for group spark or all)")
    return want, errors


def _form_errors(value: Any, first: str) -> list[str]:
    if (not isinstance(value, list) or not value or not all(isinstance(n, str) for n in value)
            or len(set(value)) != len(value)):
        return [f"host {first}: {NAME} must be a non-empty list of group names, each once, got {value!r}"]
    return []


def _name_errors(names: Sequence[str], groups: Mapping[str, Any]) -> list[str]:
    errors = []
    for name in names:
        if name == ALL_SPARKS:
            errors.append(f"{NAME}: lists group spark beside other groups; spark holds every Spark, a serving "
                          "group the hosts of one engine")
        elif name in RESERVED or not _GROUP_NAME.match(name):
            errors.append(f"{NAME}: {name!r} cannot be a serving group (letters, digits and _, not all or "
                          "ungrouped): it names a directory of render's output")
        elif name not in groups:
            errors.append(f"{NAME}: group {name} is not defined by the inventory")
        elif not group_hosts(groups, name):
            errors.append(f"{NAME}: group {name} has no hosts")
    return errors


def _membership_errors(names: Sequence[str], groups: Mapping[str, Any], sparks: Sequence[str]) -> list[str]:
    """Each Spark in exactly one serving group, and no serving host outside group spark."""
    member: dict[str, list[str]] = {}
    for name in names:
        for host in group_hosts(groups, name):
            member.setdefault(host, []).append(name)
    errors = [f"host {host}: in serving group {', '.join(found)} but not in group spark ({NAME}): every "
              "serving host is a Spark of group spark" for host, found in member.items() if host not in sparks]
    for host in sparks:
        found = member.get(host, [])
        if len(found) > 1:
            errors.append(f"host {host}: in serving groups {', '.join(found)} ({NAME}): a Spark serves in one group")
        elif not found:
            errors.append(f"host {host}: in group spark but in no serving group ({NAME}: {', '.join(names)}): "
                          "list it in one, or take it out of group spark")
    return errors


def read(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(the serving groups whose hosts can be checked, every error of the declaration itself).

    SINGLE when nothing is declared, the declaration is unreadable or group spark has no hosts (the fabric
    validation says so); otherwise the declared groups that exist and have hosts.
    """
    sparks = group_hosts(groups, ALL_SPARKS)
    if not sparks:
        return list(SINGLE), []
    value, errors = _declared(hostvars, sparks)
    if errors:
        return list(SINGLE), errors
    if value is None or value == SINGLE:
        return list(SINGLE), []
    errors = _form_errors(value, sparks[0])
    if errors:
        return list(SINGLE), errors
    errors = _name_errors(value, groups)
    usable = [n for n in value if n != ALL_SPARKS and n not in RESERVED and _GROUP_NAME.match(n)
              and group_hosts(groups, n)]
    return usable, errors + _membership_errors(usable, groups, sparks)


def group_spark_refusal(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> str:
    """Why group spark has no plan of its own in this inventory; "" when it is the one serving group."""
    names, errors = read(hostvars, groups)
    if not errors and names == SINGLE:
        return ""
    declared = ", ".join(names) if names != SINGLE else "an invalid list"
    return (f"This inventory declares serving groups ({NAME}: {declared}): group spark holds every Spark, not one "
            "engine, and has no plan of its own. Plan a serving group (spark_site_plan(groups, GROUP)) or every one "
            "(spark_serving_plans).")
