"""The site plan: everything the inventory decides for one serving group, computed in one place.

render.yml writes it as plan.json and renders every node's files from it; the fabric, serve, doctor, model and
image stages read the same values from it instead of assembling them again from hostvars, so what a site
reviewed is what gets applied. Pure: the inventory's variables in, data out.

Shape (docs/decisions.md): {"group", "topology", "nodes", ["rails"], "serve"}. Each node is its fabric plan
node plus its netplan renderer, GID index, collective environment (profile and env), memory guard settings
and device policy. "serve" holds what can carry a site's secrets (the serving profiles and specs, an API key
among them) apart from the nodes, which the fabric stages copy into facts: {"profiles", "refusals", "specs",
"head", "error"}. "head" is the group's endpoint ({"host", "profile", "url"}, None while the head serves no
profile): serve, the doctor and the bench all ask that one URL. A serving setting that cannot be read is kept
as "error" rather than raised, so the doctor can report it; render and serve refuse a plan that has one. The
error is kept with every value the group's hosts mark secret already redacted: plan.json and doctor.json are
shared, and ansible-core prints a failed assert's message even under no_log.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_fabric as _FABRIC
from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_nccl as _NCCL
from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_serve as _SERVE
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_policy as _POLICY
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_redact as _REDACT
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serving_groups as _GROUPS
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain

GUARD_FIELDS = ("startup_threshold", "startup_interval", "startup_wait", "steady_threshold", "steady_interval")
# What the site plan adds to a fabric plan; spark_fabric_plan removes it again.
SERVE = "serve"


def _group_hosts(groups: Mapping[str, Any], group: str) -> list[str]:
    if not isinstance(group, str) or not group:
        raise AnsibleFilterError(f"spark_site_plan: the serving group must be a group name, got {group!r}")
    hosts = groups.get(group) if isinstance(groups, Mapping) else None
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError(f"spark_site_plan: the inventory has no group {group!r}")
    return [str(h) for h in hosts]


def _device_policy(hostvars: Mapping[str, Any], host: str) -> str:
    try:
        return _POLICY.settle(_plain(hostvars[host].get(_POLICY.NAME)), host)
    except _POLICY.PolicyError as err:
        raise AnsibleFilterError(str(err)) from None


def _guard(profile: Mapping[str, Any]) -> dict[str, Any] | None:
    """The memory guard settings the node's serving profile carries; None where it serves nothing."""
    if profile.get("profile") is None:
        return None
    return {field: profile[f"guard_{field}"] for field in GUARD_FIELDS}


def _node(entry: Mapping[str, Any], fabric_node: Mapping[str, Any], fabric: Mapping[str, Any]) -> dict[str, Any]:
    """One node of the fabric plan with what the inventory sets for its files: renderer, GID index, NCCL env."""
    topology, count = fabric["topology"], len(fabric["nodes"])
    gid = entry.get("spark_roce_gid_index", _FABRIC.DEFAULT_GID_INDEX)
    chosen = entry.get("spark_nccl_profile")
    env = _NCCL.spark_nccl_env(fabric_node, topology, count, entry.get("spark_nccl_overrides", {}), gid, chosen,
                               entry.get("spark_roce_traffic_class"))
    return dict(fabric_node) | {
        "netplan_renderer": entry.get("spark_fabric_netplan_renderer", _FABRIC.DEFAULT_NETPLAN_RENDERER),
        "gid_index": gid,
        "nccl": {"profile": _NCCL.spark_nccl_profile(topology, count, chosen), "env": env},
    }


def _specs(fabric: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]],
           profiles: Mapping[str, Any]) -> dict[str, Any]:
    """Each rank's serve spec wherever it has a named profile: the doctor checks the image and container of a
    plan serve refuses; whether it may launch is the refusals' verdict."""
    return {n["host"]: _SERVE.spark_serve_spec(n, fabric, profiles[n["host"]], n["nccl"]["env"])
            for n in nodes if profiles[n["host"]].get("profile") is not None}


def _head(nodes: Sequence[Mapping[str, Any]], profiles: Mapping[str, Any]) -> dict[str, Any] | None:
    """The group's endpoint: the rank-0 node's management address and its profile's API port."""
    head = next(n for n in nodes if n["rank"] == 0)
    profile = profiles.get(head["host"]) or {}
    if profile.get("profile") is None:
        return None
    url = f"http://{head['mgmt_address']}:{profile['api_port']}"  # the plan admits IPv4 management addresses only
    return {"host": head["host"], "profile": profile["profile"], "url": url}


def _redacted(hostvars: Mapping[str, Any], hosts: Sequence[str], message: str) -> str:
    """`message` with every value a host of the group marks secret replaced, as plan.json may show it."""
    secrets: list[str] = []
    for host in hosts:
        try:
            secrets += _REDACT.known_secrets(hostvars[host])
        except ValueError as err:
            raise AnsibleFilterError(f"spark_site_plan: host {host}: {err}") from None
    return _REDACT.redact_text(message, secrets)


def _serve(hostvars: Mapping[str, Any], hosts: Sequence[str], fabric: Mapping[str, Any],
           nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    try:
        profiles = _SERVE.spark_serve_profiles(hostvars, hosts)
        refusals = _SERVE.spark_serve_refusals(profiles, fabric)
        specs = _specs(fabric, nodes, profiles)
    except AnsibleFilterError as err:
        return {"profiles": {}, "refusals": [], "specs": {}, "head": None,
                "error": _redacted(hostvars, hosts, str(err.message))}
    return {"profiles": profiles, "refusals": refusals, "specs": specs, "head": _head(nodes, profiles),
            "error": None}


def spark_site_plan(hostvars: Mapping[str, Any], groups: Mapping[str, Any], group: str) -> dict[str, Any]:
    """The plan of serving group `group` (a name of `groups`): its fabric, every node's files, its serving.

    Group spark is a serving group only where the inventory declares no others: a stage asking for its plan in
    an inventory of several serving groups is refused here, before it acts on any node.
    """
    hosts = _group_hosts(groups, group)
    refusal = _GROUPS.group_spark_refusal(hostvars, groups) if group == _GROUPS.ALL_SPARKS else ""
    if refusal:
        raise AnsibleFilterError(f"spark_site_plan: {refusal}")
    raw = _FABRIC.spark_inventory(hostvars, hosts)
    fabric = _FABRIC.spark_plan(raw)
    entries = {e["host"]: e for e in raw}
    nodes = [_node(entries[n["host"]], n, fabric) for n in fabric["nodes"]]
    serve = _serve(hostvars, hosts, fabric, nodes)
    for node in nodes:
        profile = serve["profiles"].get(node["host"], {})
        node["guard"] = _guard(profile) if profile else None
        node["device_policy"] = _device_policy(hostvars, node["host"])
    return {"group": group} | fabric | {"nodes": nodes, SERVE: serve}


def spark_fabric_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The site plan without its serving part: what the fabric, model and image stages keep as a fact (the
    serving part can carry a site's API key)."""
    if not isinstance(plan, Mapping) or "nodes" not in plan:
        raise AnsibleFilterError("spark_fabric_plan: expected the output of spark_site_plan")
    return {k: v for k, v in plan.items() if k != SERVE}


class FilterModule:
    """sparkfleet site plan filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_site_plan": spark_site_plan, "spark_fabric_plan": spark_fabric_plan}
