"""Several serving groups in one inventory: their validation, their plans and where render writes them.

The declaration itself (`spark_serving_groups`) is read by module_utils/spark_serving_groups.py. Each group is
validated and planned exactly as a one-group inventory is (spark_validate, spark_site_plan, called per group);
what this adds is what only several groups can get wrong: a host in two of them, a Spark in none, two switched
groups giving one rail address to two hosts, a serving profile sized for another group. Pure: the inventory's
variables in, data out.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_fabric as _FABRIC
from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_serve as _SERVE
from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_site_plan as _SITE
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serving_groups as _GROUPS

# Settings that name one machine: two hosts sharing one, even in different groups, are one node configured twice.
_SITE_UNIQUE: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "spark_mgmt_address": lambda e: e.get("spark_mgmt_address", e.get("ansible_host")),
    "ansible_host": lambda e: e.get("ansible_host"),
}


def spark_serving_groups(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
    """The inventory's serving groups: ['spark'] unless it declares others (spark_serving_groups)."""
    names, errors = _GROUPS.read(hostvars, groups)
    if errors:
        raise AnsibleFilterError("spark_serving_groups: the serving groups are invalid:\n  " + "\n  ".join(errors))
    return names


def spark_serving_batches(hostvars: Mapping[str, Any], groups: Mapping[str, Any],
                          hosts: Sequence[str]) -> list[dict[str, Any]]:
    """The hosts of a play (`hosts`, e.g. after --limit) split by serving group, in the order the groups are
    declared: [{"group", "hosts"}], each group once, empty ones left out. The serving plays run one batch per
    group (serial), so a group is planned, started, replaced or stopped whole and one group after another."""
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError(f"spark_serving_batches: expected the play's host names, got {hosts!r}")
    wanted = {str(h) for h in hosts}
    batches = []
    for name in spark_serving_groups(hostvars, groups):
        members = [h for h in _GROUPS.group_hosts(groups, name) if h in wanted]
        if members:
            batches.append({"group": name, "hosts": members})
    return batches


def spark_group_reports(hostvars: Sequence[Mapping[str, Any]], report: str, file: str, ok: str) -> dict[str, list[str]]:
    """The reports a serving play wrote, one per group, from the variables of its hosts (`hostvars`, each group's
    ranks): every host's `report` (a mapping) written to its `file`, each file once in play order, the failed ones
    those whose `ok` key is false. {"files": [...], "failed": [...]}; a host without the report is left out."""
    if isinstance(hostvars, (str, bytes, Mapping)) or not isinstance(hostvars, Sequence):
        raise AnsibleFilterError(f"spark_group_reports: expected a list of host variables, got {type(hostvars).__name__}")
    files: list[str] = []
    failed: list[str] = []
    for host in hostvars:
        if report not in host:
            continue
        if not isinstance(host[report], Mapping) or file not in host:
            raise AnsibleFilterError(f"spark_group_reports: host {host.get('inventory_hostname', '?')}: {report} must "
                                     f"be a mapping written to {file}")
        path = str(host[file])
        if path in files:
            continue
        files.append(path)
        if not host[report].get(ok):
            failed.append(path)
    return {"files": files, "failed": failed}


def spark_serving_group_of(hostvars: Mapping[str, Any], groups: Mapping[str, Any], host: str) -> str:
    """The serving group host `host` serves in: the group a stage plans when it acts on that host."""
    for name in spark_serving_groups(hostvars, groups):
        if host in _GROUPS.group_hosts(groups, name):
            return name
    raise AnsibleFilterError(f"spark_serving_group_of: host {host} is in no serving group "
                             f"({_GROUPS.NAME}: {', '.join(spark_serving_groups(hostvars, groups))})")


def _owners(raws: Mapping[str, Sequence[Mapping[str, Any]]], key: str) -> dict[Any, list[tuple[str, str]]]:
    """value -> [(host, group)] for a setting that must name one machine across the whole site."""
    seen: dict[Any, list[tuple[str, str]]] = {}
    for group, raw in raws.items():
        for entry in raw:
            value = _SITE_UNIQUE[key](entry)
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                seen.setdefault(value, []).append((entry["host"], group))
    return seen


def _named(owners: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{host} (group {group})" for host, group in owners)


def _site_unique_errors(raws: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Duplicates across groups; spark_validate already names those inside one group."""
    errors = []
    for key in _SITE_UNIQUE:
        for value, owners in sorted(_owners(raws, key).items(), key=lambda kv: str(kv[0])):
            if len({group for _, group in owners}) > 1:
                errors.append(f"hosts {_named(owners)}: {key} {value} is duplicated across serving groups")
    return errors


def _rail_address_errors(plans: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Switched groups with the same rails (prefix and ports) put their nodes on the same subnets: the host
    octet, the node id, must then differ across those groups. Cabled groups may reuse node ids: a cable
    subnet exists on its two ports only, and cables never cross groups."""
    owners: dict[str, list[tuple[str, str, int]]] = {}
    for group, plan in plans.items():
        if plan["topology"] != "switched":
            continue
        for node in plan["nodes"]:
            for iface in node["interfaces"]:
                owners.setdefault(iface["address"], []).append((node["host"], group, node["node_id"]))
    reported: set[tuple[tuple[str, str, int], ...]] = set()
    errors = []
    for address, found in owners.items():
        key = tuple(found)
        if len({group for _, group, _ in found}) < 2 or key in reported:
            continue
        reported.add(key)
        named = ", ".join(f"{host} (group {group})" for host, group, _ in found)
        errors.append(f"hosts {named}: spark_node_id {found[0][2]} gives each the rail address {address.split('/')[0]} "
                      "on the switch: switched groups sharing rails need distinct node ids (or their own "
                      "spark_fabric_prefix)")
    return errors


def _size_errors(group: str, plan: Mapping[str, Any]) -> list[str]:
    """The serving profile of the group's head rank where it does not fit the group; a group without a named
    profile, or whose serving settings cannot be read (render reports those, redacted), has nothing to check."""
    serve = plan[_SITE.SERVE]
    if serve["error"] is not None:
        return []
    head = plan["nodes"][0]["host"]
    profile = serve["profiles"].get(head, {})
    if profile.get("profile") is None:
        return []
    return [f"group {group}, host {head}: spark_serve_profile does not fit the group: {refusal}"
            for refusal in _SERVE.spark_serve_size_refusals(profile, plan)]


def _group_errors(hostvars: Mapping[str, Any], groups: Mapping[str, Any], names: Sequence[str],
                  roots: Sequence[str]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    raws = {name: _FABRIC.spark_inventory(hostvars, _GROUPS.group_hosts(groups, name)) for name in names}
    errors = [e for name, raw in raws.items() for e in _FABRIC.spark_validate(raw, roots, group=name)]
    return raws, errors


def spark_serving_validate(hostvars: Mapping[str, Any], groups: Mapping[str, Any],
                           controller_roots: Sequence[str] = ()) -> list[str]:
    """Every error of the inventory, each naming the host(s) or group and the variable; [] when valid.

    An inventory of one serving group gets exactly spark_validate's answer for group spark; one of several
    gets each group's spark_validate, the declaration's errors, and what only several groups can get wrong.
    """
    names, errors = _GROUPS.read(hostvars, groups)
    raws, group_errors = _group_errors(hostvars, groups, names, controller_roots)
    if names == _GROUPS.SINGLE and not errors:
        return group_errors
    errors += group_errors
    if not errors:
        errors += _site_unique_errors(raws)
    if not errors:
        plans = {name: _SITE.spark_site_plan(hostvars, groups, name) for name in names}
        errors += _rail_address_errors(plans)
        errors += [e for name, plan in plans.items() for e in _size_errors(name, plan)]
    # A host listed in two groups is checked in both: each of its errors once.
    return list(dict.fromkeys(errors))


def spark_serving_plans(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """group -> spark_site_plan of that group, for every serving group of the inventory."""
    return {name: _SITE.spark_site_plan(hostvars, groups, name) for name in spark_serving_groups(hostvars, groups)}


def spark_fabric_plans(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """group -> that group's plan without its serving part (spark_fabric_plan): what the node stages (fabric,
    image, model) keep as a fact for every Spark of the site, whichever group it serves in."""
    return {name: _SITE.spark_fabric_plan(plan) for name, plan in spark_serving_plans(hostvars, groups).items()}


def spark_site_fabric(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, Any]:
    """{"nodes": every Spark's node of its group's fabric plan, group after group}: what a stage that moves bytes
    between any two Sparks (image, model, transfer keys) plans its paths over, cables and switch rails alike."""
    return {"nodes": [node for plan in spark_fabric_plans(hostvars, groups).values() for node in plan["nodes"]]}


def spark_render_layout(plans: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Where render.yml writes each group's plan and files: the output directory itself for the one group spark
    (as it always has), a directory per group otherwise. Each entry: group, dir ("" or "<group>/"), plan, hosts,
    serve (whether serve.json is written: no refusals), directories and files (relative to the output)."""
    if not isinstance(plans, Mapping) or not plans:
        raise AnsibleFilterError("spark_render_layout: expected the output of spark_serving_plans")
    single = list(plans) == _GROUPS.SINGLE
    layout = []
    for group, plan in plans.items():
        prefix = "" if single else f"{group}/"
        serve = not plan[_SITE.SERVE]["refusals"]
        hosts = [n["host"] for n in plan["nodes"]]
        layout.append({"group": group, "dir": prefix, "plan": plan, "hosts": hosts, "serve": serve,
                       "directories": ([] if single else [group]) + [prefix + h for h in hosts],
                       "files": [prefix + f for f in _FABRIC.spark_render_files(plan, serve)]})
    return layout


class FilterModule:
    """sparkfleet serving group filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_serving_groups": spark_serving_groups, "spark_serving_batches": spark_serving_batches, "spark_serving_group_of": spark_serving_group_of,
                "spark_group_reports": spark_group_reports,
                "spark_serving_validate": spark_serving_validate, "spark_serving_plans": spark_serving_plans,
                "spark_fabric_plans": spark_fabric_plans, "spark_site_fabric": spark_site_fabric,
                "spark_render_layout": spark_render_layout}
