"""Pure helpers of the bench playbooks: what a run measures (a serving group's head from its site plan, or the
router in front of every group), the monitor stream of every rank, and a scheduled run's options typed and
checked as the spark_bench module does.

playbooks/bench.yml and playbooks/bench-schedule.yml both take the endpoint from here, so both benchmark the
URL serve waits on, or the one users get through the router.
"""
from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_bench_options import typed_options
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_memguard import parse_size

GIB = 1024 ** 3
SSH_CONNECTIONS = ("ssh", "ansible.builtin.ssh", "ansible.legacy.ssh", "paramiko", "ansible.builtin.paramiko_ssh")
DOCKER_CONNECTIONS = ("docker", "community.docker.docker")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local", "ansible.legacy.local")


def spark_bench_head(plan: Any) -> dict[str, Any]:
    """The serving group's endpoint from its site plan ({"host", "profile", "url"}): the URL serve waits on and
    the doctor asks, and the profile a report records; an error says why the plan has none."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("serve"), Mapping) or "nodes" not in plan:
        raise AnsibleFilterError("spark_bench_head: expected the output of spark_site_plan")
    serve = plan["serve"]
    if serve.get("error"):
        raise AnsibleFilterError(f"bench: no endpoint, the serving settings cannot be read: {serve['error']}")
    if not serve.get("head"):
        head = next((n["host"] for n in plan["nodes"] if n.get("rank") == 0), "?")
        raise AnsibleFilterError(f"{head}: the head (spark_rank 0) serves no profile (spark_serve_profile), "
                                 "so there is no endpoint to benchmark; pass -e spark_bench_url=http://HOST:PORT")
    return dict(serve["head"])


def spark_bench_target(plans: Any, router: Any, group: Any = "", via_router: Any = False) -> dict[str, Any]:
    """What a run measures, from every serving group's plan ({group: spark_site_plan}) and the router's plan
    (spark_router_plan, or none): {"url", "group", "head"}. The router when asked, or by default where there are
    several groups, a router and no group named (group and head then none); else the head of the group named, or
    of the only one. Several groups, no router and no group named is an error naming the groups: one head's
    figures are not the site's."""
    if not isinstance(plans, Mapping):
        raise AnsibleFilterError("spark_bench_target: expected {group: spark_site_plan} (spark_serving_plans)")
    if not isinstance(via_router, bool):
        raise AnsibleFilterError(f"spark_bench_target: via_router must be a boolean, got {via_router!r}")
    names = ", ".join(plans)
    if group and group not in plans:
        raise AnsibleFilterError(f"bench: spark_bench_group {group} is not a serving group of the inventory ({names})")
    if via_router or (len(plans) > 1 and not group and router):
        if not isinstance(router, Mapping) or not router.get("url"):
            raise AnsibleFilterError("bench: spark_bench_via_router is true and the inventory has no group spark_router")
        return {"url": str(router["url"]), "group": None, "head": {}}
    if not group and len(plans) > 1:
        raise AnsibleFilterError(f"bench: the inventory has several serving groups ({names}) and no router: name the "
                                 "one to measure (-e spark_bench_group=GROUP) or pass -e spark_bench_url=http://HOST:PORT")
    name = group or next(iter(plans), None)
    if name is None:
        return {"url": "", "group": None, "head": {}}
    head = spark_bench_head(plans[name])
    return {"url": str(head["url"]), "group": name, "head": head}


def spark_bench_site_monitors(plans: Any, hostvars: Any, margin_gib: Any = 1) -> list[dict[str, Any]]:
    """spark_bench_monitors of every serving group ({group: spark_site_plan}), group after group: a run through
    the router watches every rank that may serve it."""
    if not isinstance(plans, Mapping):
        raise AnsibleFilterError("spark_bench_site_monitors: expected {group: spark_site_plan} (spark_serving_plans)")
    return [m for plan in plans.values() for m in spark_bench_monitors(plan, hostvars, margin_gib)]


def _ssh_argv(host: str, hv: Mapping[str, Any]) -> list[str]:
    """ssh to the node as Ansible reaches it: address, port, user, key and the inventory's extra ssh arguments."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5"]
    port = hv.get("ansible_port") or hv.get("ansible_ssh_port")
    if port:
        argv += ["-p", str(port)]
    key = hv.get("ansible_ssh_private_key_file") or hv.get("ansible_private_key_file")
    if key:
        argv += ["-i", str(key)]
    for field in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        try:
            argv += shlex.split(str(hv.get(field) or ""))
        except ValueError as exc:
            raise AnsibleFilterError(f"host {host}: {field} does not parse as ssh arguments: {exc}") from None
    user = hv.get("ansible_user") or hv.get("ansible_ssh_user")
    address = str(hv.get("ansible_host") or host)
    return argv + [f"{user}@{address}" if user else address]


def monitor_transport(host: str, hv: Mapping[str, Any]) -> tuple[list[str], bool]:
    """(argv that reaches the node, whether its command goes through a remote shell), by its ansible_connection."""
    connection = str(hv.get("ansible_connection") or "ssh")
    if connection in SSH_CONNECTIONS:
        return _ssh_argv(host, hv), True
    if connection in DOCKER_CONNECTIONS:
        argv = ["docker"] + (["-H", str(hv["ansible_docker_host"])] if hv.get("ansible_docker_host") else [])
        user = hv.get("ansible_user")
        return argv + ["exec", "-i"] + (["-u", str(user)] if user else []) + [str(hv.get("ansible_host") or host)], False
    if connection in LOCAL_CONNECTIONS:
        return [], False
    raise AnsibleFilterError(f"host {host}: ansible_connection {connection!r} cannot carry the bench monitor stream "
                             f"(supported: ssh, community.docker.docker, local)")


def _floor_gib(host: str, guard: Optional[Mapping[str, Any]], margin_gib: Any) -> float:
    threshold = (guard or {}).get("steady_threshold", "3GiB")
    try:
        margin = float(margin_gib)
        steady = parse_size(threshold) / GIB
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"host {host}: bench memory floor: steady guard {threshold!r} plus margin "
                                 f"{margin_gib!r}: {exc}") from None
    if margin < 0:
        raise AnsibleFilterError(f"host {host}: spark_bench_monitor_margin_gib must not be negative, got {margin_gib!r}")
    return round(steady + margin, 3)


def _python(hv: Mapping[str, Any]) -> str:
    """The node's interpreter when the inventory names one by path; otherwise python3 (auto, or unset)."""
    value = str(hv.get("ansible_python_interpreter") or "")
    return value if value.startswith("/") else "python3"


def spark_bench_monitors(plan: Any, hostvars: Any, margin_gib: Any = 1) -> list[dict[str, Any]]:
    """One monitor per rank of the site plan (spark_site_plan), in rank order: how to reach it (its inventory
    connection), the MemAvailable floor (the plan's steady memory guard plus `margin_gib`) and whether its GPU
    must be readable (the plan's device policy)."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("nodes"), list):
        raise AnsibleFilterError("spark_bench_monitors: expected the output of spark_site_plan")
    monitors = []
    for node in sorted(plan["nodes"], key=lambda n: int(n["rank"])):
        host = str(node["host"])
        hv: Mapping[str, Any] = hostvars[host]
        argv, remote_shell = monitor_transport(host, hv)
        monitors.append({"node": host, "argv": argv, "remote_shell": remote_shell,
                         "memory_floor_gib": _floor_gib(host, node.get("guard"), margin_gib),
                         "gpu_required": node["device_policy"] == "require",
                         "python": _python(hv)})
    return monitors


def spark_bench_options(options: Any, host: str = "localhost", prefix: str = "") -> dict[str, Any]:
    """The bench options given (spark_bench module option names), typed as the module types them, for a run
    configured outside the module; an error names the host and every bad option (as `prefix` + its name)."""
    if not isinstance(options, Mapping):
        raise AnsibleFilterError(f"{host}: bench options must be a mapping, got {type(options).__name__}")
    typed, problems = typed_options(options)
    if problems:
        raise AnsibleFilterError(f"{host}: bad bench settings ({prefix}<option>): " + "; ".join(problems))
    return typed


class FilterModule:
    """Bench filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_bench_head": spark_bench_head, "spark_bench_monitors": spark_bench_monitors,
                "spark_bench_target": spark_bench_target, "spark_bench_site_monitors": spark_bench_site_monitors,
                "spark_bench_options": spark_bench_options}
