"""Pure NCCL / collective environment per node, from a node of the fabric plan.

Profile values are the reference's tables (hardware-and-fabric.md section 8); sites override single
variables with spark_nccl_overrides (a null value removes a variable).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError


from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_nccl_policy as _POLICY

_COMMON: dict[str, str] = {
    "NCCL_NET": "IB",
    "NCCL_NET_PLUGIN": "none",
    "NCCL_IB_DISABLE": "0",
    "NCCL_IB_MERGE_NICS": "1",
    "NCCL_IB_SUBNET_AWARE_ROUTING": "1",
    "NCCL_IB_ADDR_FAMILY": "AF_INET",
    "NCCL_IB_ROCE_VERSION_NUM": "2",
    "NCCL_CROSS_NIC": "1",
    "NCCL_IGNORE_CPU_AFFINITY": "1",
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_LL128_BUFFSIZE": "262144",
    "NCCL_PROTO": "^LL128",
    "NCCL_DEBUG": "WARN",
    "NCCL_DEBUG_SUBSYS": "INIT",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}

_DIRECT: dict[str, str] = _COMMON | {
    "NCCL_CUMEM_ENABLE": "0",
    "NCCL_MAX_NCHANNELS": "8",
    "NCCL_BUFFSIZE": "1048576",
    "SPARKNET_ROCE_ALLREDUCE_CAPACITY_BYTES": "2097152",
    "SPARKNET_ROCE_ALLGATHER_MAX_BYTES": "4194304",
    "SPARKNET_ROCE_SPIN_LIMIT": "5000000",
}

_RING_NCCL: dict[str, str] = _COMMON | {
    "NCCL_IB_SUBNET_PREFIX_LEN": "24",
    "NCCL_ALGO": "Ring",
    "NCCL_CUMEM_ENABLE": "1",
    "NCCL_CUMEM_HOST_ENABLE": "0",
    "NCCL_RUNTIME_CONNECT": "1",
    "NCCL_PAT_ENABLE": "0",
    "NCCL_COLLNET_ENABLE": "0",
    "NCCL_MNNVL_ENABLE": "0",
    "NCCL_RMA_DISABLE": "1",
    "NCCL_GIN_ENABLE": "0",
    "NCCL_MIN_NCHANNELS": "4",
    "NCCL_MAX_NCHANNELS": "4",
    "NCCL_BUFFSIZE": "1048576",
}

_TP4_RING: dict[str, str] = _RING_NCCL | {
    "NCCL_BUFFSIZE": "4194304",
    "NCCL_SWITCHLESS_BIDIRECTIONAL": "2",
    "NCCL_MIN_TRAFFIC_PER_CHANNEL": "512",
    "NCCL_THREAD_THRESHOLDS": "-2 -2 -2 1 1 1",
    "SPARKNET_ROCE_ALLREDUCE_CAPACITY_BYTES": "2097152",
    # The promoted r6d production value (2 MiB) rather than r6's 1 MiB; see the reference's decisions.
    "SPARKNET_ROCE_ALLREDUCE_DISPATCH_MAX_BYTES": "2097152",
    "SPARKNET_ROCE_ALLGATHER_MAX_BYTES": "2097152",
    "SPARKNET_ROCE_SPIN_LIMIT": "5000000",
}

# NCCL alone with the direct settings: the reference's direct-nccl-only / switched-nccl-only control.
_DIRECT_NCCL: dict[str, str] = {k: v for k, v in _DIRECT.items() if not k.startswith("SPARKNET_")}

PROFILES: dict[str, dict[str, str]] = {
    "tp2-direct": _DIRECT,
    "tp3-triangle": _DIRECT,
    "tp4-ring": _TP4_RING,
    # One-shot ring4 and the patched bidirectional rings need exactly 3-4 nodes; larger rings use
    # NCCL's ring alone (docs/decisions.md).
    "ring-nccl-only": _RING_NCCL,
    # A switch leaves NCCL's topology and algorithm choice alone, as a direct fabric does (unmeasured).
    "switched": _DIRECT,
    "switched-nccl-only": _DIRECT_NCCL,
}

ONESHOT_TOPOLOGY = {"tp2-direct": "direct", "tp3-triangle": "direct", "tp4-ring": "ring4", "switched": "direct"}
RING_FORBIDDEN = _POLICY.RING_FORBIDDEN
RING_CHANNELS = {"1", "2", "4", "8"}
# The one-shot transport drives at most the two functions of one port; NCCL every active rail.
SWITCHED_ROCE_HCAS = (1, 2)
SWITCHED_NCCL_HCAS = (1, 4)


def spark_nccl_profile(topology: str, node_count: int, chosen: str | None = None) -> str:
    """The NCCL profile of a topology and node count: the chosen one when it fits, else the reference's."""
    fits = _POLICY.fitting_profiles(topology, node_count)
    if not fits:
        raise AnsibleFilterError(f"no NCCL profile for topology {topology!r} with {node_count} nodes")
    if chosen is None:
        return fits[0]
    problem = _POLICY.profile_error("spark_nccl_profile", chosen, topology, node_count)
    if problem:
        raise AnsibleFilterError(problem)
    return chosen


def _peer_hcas(node: Mapping[str, Any]) -> dict[str, list[str]]:
    """Peer rank -> local HCAs in stripe order; a pair's second cable (paths 3-4) carries NCCL only."""
    peers: dict[str, list[str]] = {}
    for iface in sorted(node["interfaces"], key=lambda i: (i["port"], i["path"])):
        if iface["path"] <= 2:
            peers.setdefault(str(iface["peer_rank"]), []).append(iface["rdma"])
    return peers


def _roce_hcas(node: Mapping[str, Any]) -> list[str]:
    """A switched node's one-shot rails: the two functions of its first switch port, in path order."""
    ifaces = sorted(node["interfaces"], key=lambda i: (i["port"], i["path"]))
    return [i["rdma"] for i in ifaces if i["port"] == ifaces[0]["port"]]


def _check_overrides(host: str, profile: str, overrides: Mapping[str, Any]) -> None:
    errors = _POLICY.override_errors(f"host {host}: spark_nccl_overrides", overrides,
                                     ring=profile in _POLICY.RING_PROFILES,
                                     switched_profile=profile if profile in _POLICY.SWITCHED_PROFILES else None)
    if errors:
        raise AnsibleFilterError("; ".join(errors))


def _hca_names(value: str) -> list[str]:
    """Device names of an NCCL_IB_HCA / SPARKNET_ROCE_HCA list ('=' exact match, ':<port>' suffixes)."""
    return [name.split(":")[0] for name in value.lstrip("=").split(",") if name]


def _check_switched(where: str, env: Mapping[str, str]) -> None:
    nccl = _hca_names(env.get("NCCL_IB_HCA", ""))
    if env.get("NCCL_IB_HCA", "").startswith("^") or not SWITCHED_NCCL_HCAS[0] <= len(nccl) <= SWITCHED_NCCL_HCAS[1]:
        raise AnsibleFilterError(f"{where}: NCCL_IB_HCA must list 1-4 rails, got {env.get('NCCL_IB_HCA')!r}")
    if "SPARKNET_ROCE_HCA" not in env:
        return
    roce = _hca_names(env["SPARKNET_ROCE_HCA"])
    if not SWITCHED_ROCE_HCAS[0] <= len(roce) <= SWITCHED_ROCE_HCAS[1] or not set(roce) <= set(nccl):
        raise AnsibleFilterError(f"{where}: SPARKNET_ROCE_HCA must be 1-2 of the NCCL_IB_HCA rails "
                                 f"({','.join(nccl)}), got {env['SPARKNET_ROCE_HCA']!r}")


def _check_env(host: str, profile: str, env: Mapping[str, str]) -> None:
    where = f"host {host}: NCCL environment ({profile})"
    if profile in _POLICY.RING_PROFILES:
        low, high = env.get("NCCL_MIN_NCHANNELS"), env.get("NCCL_MAX_NCHANNELS")
        if low != high or high not in RING_CHANNELS:
            raise AnsibleFilterError(f"{where}: a ring needs NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS "
                                     f"in {{1, 2, 4, 8}}, got {low}/{high}")
    if profile in _POLICY.SWITCHED_PROFILES:
        _check_switched(where, env)


def _traffic_class(host: str, profile: str, traffic_class: Any) -> int | None:
    """The switch's RoCE traffic class (default 106 on a switch); None on cabled fabrics, which have none."""
    if profile not in _POLICY.SWITCHED_PROFILES:
        if traffic_class is not None:
            raise AnsibleFilterError(f"host {host}: spark_roce_traffic_class is only for spark_topology switched, "
                                     f"profile {profile} has no switch")
        return None
    if traffic_class is None:
        return _POLICY.DEFAULT_TRAFFIC_CLASS
    if not isinstance(traffic_class, int) or isinstance(traffic_class, bool) or not 0 <= traffic_class <= 255:
        raise AnsibleFilterError(f"host {host}: spark_roce_traffic_class must be an integer 0-255, "
                                 f"got {traffic_class!r}")
    return traffic_class


def _oneshot_vars(node: Mapping[str, Any], profile: str, gid_index: int) -> dict[str, str]:
    env = {"SPARKNET_ROCE_TOPOLOGY": ONESHOT_TOPOLOGY[profile], "SPARKNET_ROCE_GID_INDEX": str(gid_index)}
    if profile in _POLICY.SWITCHED_PROFILES:
        env["SPARKNET_ROCE_HCA"] = ",".join(_roce_hcas(node))
    else:
        env["SPARKNET_ROCE_PEER_HCAS"] = json.dumps(_peer_hcas(node), separators=(",", ":"))
    return env


def spark_nccl_env(node: Mapping[str, Any], topology: str, node_count: int,
                   overrides: Mapping[str, Any] | None = None, gid_index: int = 3,
                   profile: str | None = None, traffic_class: int | None = None) -> dict[str, str]:
    """The complete collective environment of one node of the plan.

    profile is the inventory's spark_nccl_profile (None: the topology's default), traffic_class its
    spark_roce_traffic_class (switched only).
    """
    host = node.get("host", "?")
    if not isinstance(gid_index, int) or isinstance(gid_index, bool) or gid_index < 0:
        raise AnsibleFilterError(f"host {host}: spark_roce_gid_index must be an integer >= 0, got {gid_index!r}")
    overrides = overrides if overrides is not None else {}
    profile = spark_nccl_profile(topology, node_count, profile)
    _check_overrides(host, profile, overrides)
    tclass = _traffic_class(host, profile, traffic_class)
    env = dict(PROFILES[profile])
    env["NCCL_IB_GID_INDEX"] = str(gid_index)
    env["NCCL_IB_HCA"] = "=" + ",".join(sorted({i["rdma"] for i in node["interfaces"]}))
    for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        env[key] = node["mgmt_interface"]
    env["VLLM_HOST_IP"] = node["mgmt_address"]
    if profile in ONESHOT_TOPOLOGY:
        env |= _oneshot_vars(node, profile, gid_index)
    if tclass is not None:
        env["NCCL_IB_TC"] = str(tclass)
        if profile in ONESHOT_TOPOLOGY:
            env["SPARKNET_ROCE_TRAFFIC_CLASS"] = str(tclass)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    _check_env(host, profile, env)
    return dict(sorted(env.items()))


class FilterModule:
    """sparkfleet collective environment filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_nccl_env": spark_nccl_env, "spark_nccl_profile": spark_nccl_profile}
