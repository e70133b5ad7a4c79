"""Pure helper of the bench playbooks: the serving endpoint of an inventory's head node.

One function feeds playbooks/bench.yml and playbooks/bench-schedule.yml, so both benchmark the same URL.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError


def spark_bench_head_url(hostvars: Any, hosts: Any, default_port: int = 8000) -> str:
    """http://<head mgmt address>:<serve port> of the rank-0 host among hosts; '' when hosts is empty."""
    hosts = list(hosts or [])
    if not hosts:
        return ""
    heads = [h for h in hosts if str(hostvars[h].get("spark_rank", "")) == "0"]
    if len(heads) != 1:
        raise AnsibleFilterError(f"bench: expected exactly one host with spark_rank 0 in group spark, found {heads}")
    head = heads[0]
    hv: Mapping[str, Any] = hostvars[head]
    address = hv.get("spark_mgmt_address") or hv.get("ansible_host") or head
    port = hv.get("spark_serve_port", default_port)
    try:
        port = int(port)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"{head}: spark_serve_port {port!r} is not a port number") from exc
    if not 0 < port < 65536:
        raise AnsibleFilterError(f"{head}: spark_serve_port {port} is out of range")
    return f"http://{address}:{port}"


class FilterModule:
    """Bench filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_bench_head_url": spark_bench_head_url}
