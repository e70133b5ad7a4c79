"""Pure helpers of the fabric role: apply order and the cluster-wide verification report.

They only reshape what the plan and the verification modules returned; nothing is recomputed. What a
node without RDMA devices means for the GID check is the device policy's call (module_utils/spark_policy.py).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError


from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_policy as _POLICY

RDMA_CLASS = "/sys/class/infiniband"
MATRIX_FIELDS = ("host", "netdev", "peer_host", "peer_netdev", "peer_address", "size", "ok", "rtt_ms",
                 "rtt_max_ms", "received", "transmitted", "oversize_refused", "problems")


def spark_fabric_apply_order(plan: Mapping[str, Any]) -> list[str]:
    """Workers in ascending rank, then the head (rank 0) last: the launch order of the serving stack."""
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else None
    if not nodes:
        raise AnsibleFilterError("spark_fabric_apply_order: expected a plan with nodes (spark_plan output)")
    ranked = sorted(nodes, key=lambda n: n["rank"])
    return [n["host"] for n in ranked if n["rank"] != 0] + [n["host"] for n in ranked if n["rank"] == 0]


def _interfaces(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if not isinstance(node, Mapping) or not isinstance(node.get("interfaces"), list):
        raise AnsibleFilterError("expected one node of the plan (spark_plan_node output)")
    return node["interfaces"]


def spark_fabric_lldp_expect(node: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Planned LLDP neighbour of each fabric netdev: the peer host and the peer's netdev."""
    return {i["netdev"]: {"host": i["peer_host"], "port": i["peer_netdev"]} for i in _interfaces(node)}


def spark_fabric_probe_paths(plan: Mapping[str, Any], host: str) -> list[dict[str, Any]]:
    """The paths `host` probes (spark_fabric_paths' paths): on cables each interface to its planned peer; on a
    switch each rail to every other node of the group on that rail, since a rail has no one peer and the
    node-to-node pings are what proves each port is on the right rail."""
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else None
    if not nodes:
        raise AnsibleFilterError("spark_fabric_probe_paths: expected a plan with nodes (spark_fabric_plan output)")
    own = next((n for n in nodes if n["host"] == host), None)
    if own is None:
        raise AnsibleFilterError(f"spark_fabric_probe_paths: host {host} is not a node of the plan")
    if plan.get("topology") != "switched":
        return [dict(i) for i in _interfaces(own)]
    return [{"netdev": mine["netdev"], "peer_host": peer["host"], "peer_netdev": theirs["netdev"],
             "peer_address": theirs["address"].split("/", 1)[0]}
            for mine in _interfaces(own) for peer in nodes if peer["host"] != host
            for theirs in _interfaces(peer) if theirs["subnet"] == mine["subnet"]]


def spark_fabric_gid_expect(node: Mapping[str, Any]) -> dict[str, str]:
    """Planned address (with prefix) of each RDMA device, as spark_roce_gid's expect."""
    return {i["rdma"]: i["address"] for i in _interfaces(node)}


def _results(hostvars: Mapping[str, Any], hosts: Sequence[str], key: str) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for host in hosts:
        result = hostvars[host].get(key)
        if not isinstance(result, Mapping):
            raise AnsibleFilterError(f"host {host}: no {key} result (did the probe run on it?)")
        out.append((str(host), result))
    return out


def spark_fabric_path_matrix(hostvars: Mapping[str, Any], hosts: Sequence[str], key: str) -> list[dict[str, Any]]:
    """One row per directed path (host -> peer), from each host's spark_fabric_paths result."""
    rows = []
    for host, result in _results(hostvars, hosts, key):
        for path in result.get("paths") or []:
            row = {"host": host} | {k: path.get(k) for k in MATRIX_FIELDS if k != "host"}
            rows.append(row)
    return sorted(rows, key=lambda r: (r["host"], r["netdev"]))


def spark_fabric_matrix_json(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """The path matrix as JSON with exactly one line per path (diff- and grep-friendly)."""
    head = json.dumps(dict(meta), sort_keys=True)[:-1]
    lines = [json.dumps({k: row.get(k) for k in MATRIX_FIELDS}) for row in rows]
    body = ",\n".join("  " + line for line in lines)
    return f"{head}, \"paths\": [\n{body}\n]}}\n" if lines else f"{head}, \"paths\": []}}\n"


def spark_fabric_problems(hostvars: Mapping[str, Any], hosts: Sequence[str], key: str,
                          field: str = "problems") -> list[str]:
    """Every host's problems from one check, each prefixed with the host name."""
    lines = []
    for host, result in _results(hostvars, hosts, key):
        if result.get("skipped"):
            continue
        for problem in result.get(field) or []:
            lines.append(f"{host} {problem}")
        if not result.get(field) and result.get("ok") is False:
            lines.append(f"{host} {result.get('msg', 'failed')}")
    return lines


def spark_fabric_gid_verdict(gid_check: Mapping[str, Any], rdma_class_exists: bool, planned: Sequence[str],
                             policy: str, host: str) -> dict[str, Any]:
    """This node's GID result as the verdict reads it (spark_fabric_problems), under the device policy.

    With RDMA_CLASS present the GID check ran and its result stands: a planned device that is missing is one of
    its problems under either policy (the node has RDMA hardware, so all of it is checked). Without RDMA_CLASS
    no RDMA driver is loaded: `require` makes that a problem naming the node and every planned device,
    `available` records the check as skipped by the policy, with the reason.
    """
    try:
        hardware_optional = _POLICY.not_applicable(policy, str(host))
    except _POLICY.PolicyError as err:
        raise AnsibleFilterError(str(err)) from None
    if rdma_class_exists:
        if not isinstance(gid_check, Mapping) or gid_check.get("skipped"):
            raise AnsibleFilterError(f"host {host}: {RDMA_CLASS} exists but the GID check did not run")
        return dict(gid_check)
    absent = (f"no {RDMA_CLASS} (no RDMA device, is mlx5_ib loaded?): planned RDMA device(s) "
              f"{', '.join(planned) or 'none'} missing")
    if hardware_optional:
        return {"ok": None, "skipped": True, "skipped_by": _POLICY.NAME,
                "msg": f"not checked under {_POLICY.NAME}={_POLICY.AVAILABLE}: {absent}"}
    return {"ok": False, "skipped": False,
            "problems": [f"{absent}; {_POLICY.NAME}={_POLICY.REQUIRE} fails a node without them"]}


def spark_fabric_gid_summary(hostvars: Mapping[str, Any], hosts: Sequence[str], key: str) -> str:
    """How many nodes had their GIDs checked, naming those the device policy left unchecked."""
    results = _results(hostvars, hosts, key)
    unchecked = [host for host, result in results if result.get("skipped")]
    summary = f"GIDs checked on {len(results) - len(unchecked)} of {len(results)} nodes"
    if unchecked:
        summary += f"; not checked (no RDMA devices, {_POLICY.NAME}={_POLICY.AVAILABLE}): {', '.join(sorted(unchecked))}"
    return summary


def spark_fabric_path_problems(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per broken path of the matrix, naming host, interface and peer."""
    return [f"{r['host']} {r['netdev']} -> {r['peer_host']}:{r['peer_netdev']} ({r['peer_address']}): "
            f"{'; '.join(r.get('problems') or ['failed'])}" for r in rows if not r.get("ok")]


class FilterModule:
    """sparkfleet fabric verification filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_fabric_apply_order": spark_fabric_apply_order,
            "spark_fabric_lldp_expect": spark_fabric_lldp_expect,
            "spark_fabric_gid_expect": spark_fabric_gid_expect,
            "spark_fabric_probe_paths": spark_fabric_probe_paths,
            "spark_fabric_path_matrix": spark_fabric_path_matrix,
            "spark_fabric_matrix_json": spark_fabric_matrix_json,
            "spark_fabric_problems": spark_fabric_problems,
            "spark_fabric_gid_verdict": spark_fabric_gid_verdict,
            "spark_fabric_gid_summary": spark_fabric_gid_summary,
            "spark_fabric_path_problems": spark_fabric_path_problems,
        }
