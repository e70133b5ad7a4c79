"""The router's plan: vllm-router on the one host of group spark_router, every serving group's head a backend.

Pure: the inventory's variables in, data out. The logic is module_utils/spark_router.py; this reads the
inventory and every serving group's site plan (spark_serving_plans) and raises one error naming every host and
variable at fault.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.filter import sparkfleet_serving_groups as _SERVING
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_router as _ROUTER
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain
from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench import metrics as _METRICS


def _host_settings(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> tuple[Optional[dict[str, Any]], list[str]]:
    host, errors = _ROUTER.router_host(groups)
    if host is None:
        return None, errors
    if host not in hostvars:
        return None, [f"group {_ROUTER.GROUP}: host {host} has no variables in the inventory"]
    found = hostvars[host]
    return _ROUTER.settings(host, {key: _plain(found[key]) for key in _ROUTER.KEYS if key in found})


def spark_router_validate(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
    """Every error of the router's own settings (group spark_router, spark_router_port, _policy, its address);
    [] when there is no router or it is valid. What needs the serving plans is refused by spark_router_plan."""
    return _host_settings(hostvars, groups)[1]


def spark_router_planned(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, Any]:
    """{"plan": the router's plan or None, "errors": why it cannot be planned}, raising nothing: what the doctor
    reports. No router: {"plan": None, "errors": []}."""
    router, errors = _host_settings(hostvars, groups)
    if router is None or errors:
        return {"plan": None, "errors": errors}
    result, errors = _ROUTER.plan(router, _SERVING.spark_serving_plans(hostvars, groups))
    return {"plan": None if errors else result, "errors": errors}


def spark_router_plan(hostvars: Mapping[str, Any], groups: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """{host, address, port, url, policy, model, backends: [{group, host, url}]}, or None without a router."""
    planned = spark_router_planned(hostvars, groups)
    if planned["errors"]:
        raise AnsibleFilterError("spark_router_plan: the router cannot be planned:\n  " + "\n  ".join(planned["errors"]))
    return planned["plan"]


def spark_router_rotation(hostvars: Mapping[str, Any], groups: Mapping[str, Any], group: str) -> Optional[dict[str, str]]:
    """{router, worker, remove, add}: the calls that take serving group `group` out of the router and put it back;
    None without a router, or when the router cannot be planned (router.yml and validate say why)."""
    return _ROUTER.rotation(spark_router_planned(hostvars, groups)["plan"], group)


def spark_requests_in_flight(metrics: str) -> int:
    """Requests an engine is running or holding (vllm:num_requests_running + _waiting) in its /metrics text."""
    if not isinstance(metrics, str):
        raise AnsibleFilterError(f"spark_requests_in_flight: expected the /metrics text, got {type(metrics).__name__}")
    snapshot = _METRICS.parse_prometheus(metrics)
    return int(snapshot.get(_METRICS.RUNNING, 0.0) + snapshot.get(_METRICS.WAITING, 0.0))


class FilterModule:
    """sparkfleet router filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_router_validate": spark_router_validate, "spark_router_plan": spark_router_plan,
                "spark_router_planned": spark_router_planned, "spark_router_rotation": spark_router_rotation,
                "spark_requests_in_flight": spark_requests_in_flight}
