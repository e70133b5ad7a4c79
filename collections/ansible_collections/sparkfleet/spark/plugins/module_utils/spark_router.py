"""The router in front of the serving groups: which host runs vllm-router, where it listens, how it routes, and
each serving group's endpoint as a backend. Pure: no I/O, no Ansible imports.

The router host is the one host of Ansible group `spark_router` (none: no router). Its settings are
inventory variables of that host (spark_router_port, spark_router_policy); the backends are the serving
groups' heads, taken from their site plans (serve.head), so the router sends requests exactly where serve
waits, the doctor asks and the bench measures.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Dict, List, Optional
from urllib.parse import quote

GROUP = "spark_router"
# The router host's variables the plan reads.
KEYS = ("spark_router_port", "spark_router_policy", "spark_mgmt_address", "ansible_host")
DEFAULT_PORT = 8080
# vllm-router's routing policies for plain (not prefill/decode split) workers. cache_aware keeps a prompt's
# prefix on the group that has it cached and falls back to the least loaded group when loads diverge.
POLICIES = ("cache_aware", "round_robin", "power_of_two", "random")
DEFAULT_POLICY = "cache_aware"


def router_host(groups: Mapping[str, Any]) -> tuple[Optional[str], List[str]]:
    """(the router host or None, errors of the group itself)."""
    hosts = groups.get(GROUP) if isinstance(groups, Mapping) else None
    if not hosts:
        return None, []
    hosts = [str(h) for h in hosts]
    if len(hosts) > 1:
        return None, [f"group {GROUP}: one router host, found {', '.join(hosts)}"]
    return hosts[0], []


def _port(host: str, value: Any) -> tuple[Optional[int], List[str]]:
    if isinstance(value, str) and value.isdigit():
        value = int(value)  # -e spark_router_port=8081 arrives as a string
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return None, [f"host {host}: spark_router_port must be an integer port 1-65535, got {value!r}"]
    return value, []


def _address(host: str, hostvars: Mapping[str, Any]) -> tuple[Optional[str], List[str]]:
    value = hostvars.get("spark_mgmt_address", hostvars.get("ansible_host"))
    if not isinstance(value, str) or not value:
        return None, [f"host {host}: the router listens on its management address: set spark_mgmt_address "
                      "or ansible_host"]
    return value, []


def settings(host: str, hostvars: Mapping[str, Any]) -> tuple[Dict[str, Any], List[str]]:
    """The router host's own settings and every error in them, each naming the host and the variable."""
    port, errors = _port(host, hostvars.get("spark_router_port", DEFAULT_PORT))
    address, more = _address(host, hostvars)
    errors += more
    policy = hostvars.get("spark_router_policy", DEFAULT_POLICY)
    if policy not in POLICIES:
        errors.append(f"host {host}: spark_router_policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    return {"host": host, "address": address, "port": port, "policy": policy}, errors


def _backend(group: str, plan: Mapping[str, Any]) -> tuple[Optional[Dict[str, Any]], List[str]]:
    serve = plan.get("serve") or {}
    head = serve.get("head")
    if serve.get("error") is not None or head is None or serve.get("refusals"):
        return None, [f"group {group}: serves no endpoint (no serving profile, an unreadable setting or a "
                      "refusal; render.yml says which): the router needs every serving group's head"]
    profile = serve["profiles"][head["host"]]
    return {"group": group, "host": head["host"], "url": head["url"], "model": profile["model_name"],
            "ports": [profile["api_port"], profile["master_port"]]}, []


def _collision_errors(router: Mapping[str, Any], serving_hosts: Mapping[str, Sequence[int]]) -> List[str]:
    """The router's port must not be one a serving engine on the same host listens on."""
    taken = serving_hosts.get(router["host"], ())
    if router["port"] in taken:
        return [f"host {router['host']}: spark_router_port {router['port']} is a port its serving engine "
                f"listens on ({', '.join(str(p) for p in taken)}): choose another"]
    return []


def plan(router: Mapping[str, Any], plans: Mapping[str, Mapping[str, Any]]) -> tuple[Dict[str, Any], List[str]]:
    """The router's plan from its settings and every serving group's site plan (group -> plan), and its errors."""
    backends, errors = [], []
    for group, group_plan in plans.items():
        backend, more = _backend(group, group_plan)
        errors += more
        if backend:
            backends.append(backend)
    models = sorted({b["model"] for b in backends})
    if len(models) > 1:
        errors.append(f"groups {', '.join(b['group'] for b in backends)}: serve different models "
                      f"({', '.join(models)}; spark_serve_model_name): one router endpoint serves one model")
    serving_hosts = {n["host"]: p["serve"]["profiles"].get(n["host"], {}) for p in plans.values() for n in p["nodes"]}
    ports = {h: [pr["api_port"], pr["master_port"]] for h, pr in serving_hosts.items() if pr.get("profile")}
    errors += _collision_errors(router, ports)
    url = f"http://{router['address']}:{router['port']}"
    return dict(router) | {"url": url, "backends": [{k: b[k] for k in ("group", "host", "url")} for b in backends],
                           "model": models[0] if len(models) == 1 else None}, errors


def rotation(router: Optional[Mapping[str, Any]], group: str) -> Optional[Dict[str, str]]:
    """The router calls that take serving group `group` out of rotation and put it back (vllm-router's
    /remove_worker and /add_worker, the worker named by its URL), or None: no router, or the group is not one of
    its backends. Removing is idempotent; adding waits until the worker answers its health check."""
    if not router:
        return None
    for backend in router.get("backends", ()):
        if backend["group"] == group:
            worker = quote(backend["url"], safe="")
            return {"router": router["url"], "worker": backend["url"],
                    "remove": f"{router['url']}/remove_worker?url={worker}",
                    "add": f"{router['url']}/add_worker?url={worker}"}
    return None
