"""NCCL profiles per topology (hardware-and-fabric.md section 8) and per-node variables."""
from __future__ import annotations

import json
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

fabric = load_source("filter", "sparkfleet_fabric")
nccl = load_source("filter", "sparkfleet_nccl")


def plan(topology: str, count: int) -> dict[str, Any]:
    return fabric.spark_plan([
        {"host": f"dgx{r + 1}", "spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": topology}
        for r in range(count)])


def env_of(topology: str, count: int, host: str, **kwargs: Any) -> dict[str, str]:
    p = plan(topology, count)
    return nccl.spark_nccl_env(fabric.spark_plan_node(p, host), topology, count, **kwargs)


TP3_DGX1 = {
    "NCCL_NET": "IB", "NCCL_NET_PLUGIN": "none", "NCCL_IB_DISABLE": "0", "NCCL_IB_MERGE_NICS": "1",
    "NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_ADDR_FAMILY": "AF_INET", "NCCL_IB_ROCE_VERSION_NUM": "2",
    "NCCL_IB_GID_INDEX": "3", "NCCL_CROSS_NIC": "1", "NCCL_IGNORE_CPU_AFFINITY": "1", "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "0", "NCCL_MAX_NCHANNELS": "8",
    "NCCL_BUFFSIZE": "1048576", "NCCL_LL128_BUFFSIZE": "262144", "NCCL_PROTO": "^LL128", "NCCL_DEBUG": "WARN",
    "NCCL_DEBUG_SUBSYS": "INIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "SPARKNET_ROCE_ALLREDUCE_CAPACITY_BYTES": "2097152", "SPARKNET_ROCE_ALLGATHER_MAX_BYTES": "4194304",
    "SPARKNET_ROCE_SPIN_LIMIT": "5000000", "SPARKNET_ROCE_GID_INDEX": "3", "SPARKNET_ROCE_TOPOLOGY": "direct",
    "SPARKNET_ROCE_PEER_HCAS": '{"1":["rocep1s0f0","roceP2p1s0f0"],"2":["rocep1s0f1","roceP2p1s0f1"]}',
    "NCCL_IB_HCA": "=roceP2p1s0f0,roceP2p1s0f1,rocep1s0f0,rocep1s0f1",
    "NCCL_SOCKET_IFNAME": "enP7s7", "GLOO_SOCKET_IFNAME": "enP7s7", "TP_SOCKET_IFNAME": "enP7s7",
    "VLLM_HOST_IP": "10.0.1.71",
}

TP4_RING_ONLY = {
    "NCCL_IB_SUBNET_PREFIX_LEN": "24", "NCCL_ALGO": "Ring", "NCCL_CUMEM_ENABLE": "1", "NCCL_CUMEM_HOST_ENABLE": "0",
    "NCCL_RUNTIME_CONNECT": "1", "NCCL_PAT_ENABLE": "0", "NCCL_COLLNET_ENABLE": "0", "NCCL_MNNVL_ENABLE": "0",
    "NCCL_RMA_DISABLE": "1", "NCCL_GIN_ENABLE": "0", "NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4",
    "NCCL_BUFFSIZE": "4194304", "NCCL_SWITCHLESS_BIDIRECTIONAL": "2", "NCCL_MIN_TRAFFIC_PER_CHANNEL": "512",
    "NCCL_THREAD_THRESHOLDS": "-2 -2 -2 1 1 1", "SPARKNET_ROCE_ALLREDUCE_DISPATCH_MAX_BYTES": "2097152",
    "SPARKNET_ROCE_ALLGATHER_MAX_BYTES": "2097152", "SPARKNET_ROCE_TOPOLOGY": "ring4",
}


def test_triangle_profile_is_the_reference_table() -> None:
    assert env_of("triangle", 3, "dgx1") == dict(sorted(TP3_DGX1.items()))


def test_ring_profile_values_and_peer_maps() -> None:
    env = env_of("ring", 4, "dgx1")
    for key, value in TP4_RING_ONLY.items():
        assert env[key] == value, key
    assert json.loads(env["SPARKNET_ROCE_PEER_HCAS"]) == {
        "1": ["rocep1s0f0", "roceP2p1s0f0"], "3": ["rocep1s0f1", "roceP2p1s0f1"]}
    dgx3 = env_of("ring", 4, "dgx3")
    assert json.loads(dgx3["SPARKNET_ROCE_PEER_HCAS"]) == {
        "3": ["rocep1s0f0", "roceP2p1s0f0"], "1": ["rocep1s0f1", "roceP2p1s0f1"]}
    assert dgx3["VLLM_HOST_IP"] == "10.0.1.73"


def test_triangle_carries_no_ring_only_controls() -> None:
    env = env_of("triangle", 3, "dgx2")
    for key in ("NCCL_SWITCHLESS_BIDIRECTIONAL", "NCCL_MIN_TRAFFIC_PER_CHANNEL", "NCCL_ALGO",
                "SPARKNET_ROCE_ALLREDUCE_DISPATCH_MAX_BYTES", "NCCL_IB_SUBNET_PREFIX_LEN"):
        assert key not in env


def test_pair_lists_all_four_devices_but_one_shot_uses_the_first_cable() -> None:
    env = env_of("pair", 2, "dgx2")
    assert env["NCCL_IB_HCA"] == "=roceP2p1s0f0,roceP2p1s0f1,rocep1s0f0,rocep1s0f1"
    assert json.loads(env["SPARKNET_ROCE_PEER_HCAS"]) == {"0": ["rocep1s0f1", "roceP2p1s0f1"]}
    assert nccl.spark_nccl_profile("pair", 2) == "tp2-direct"


def test_large_ring_uses_nccl_ring_without_one_shot_or_patched_controls() -> None:
    env = env_of("ring", 6, "dgx4")
    assert nccl.spark_nccl_profile("ring", 6) == "ring-nccl-only"
    assert env["NCCL_ALGO"] == "Ring" and env["NCCL_BUFFSIZE"] == "1048576"
    assert not [k for k in env if k.startswith("SPARKNET_")]
    assert "NCCL_SWITCHLESS_BIDIRECTIONAL" not in env


def test_overrides_set_and_remove_variables_and_gid_index() -> None:
    env = env_of("triangle", 3, "dgx1", overrides={"NCCL_DEBUG": "INFO", "NCCL_MAX_NCHANNELS": None,
                                                   "NCCL_IB_TIMEOUT": 22}, gid_index=4)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_IB_TIMEOUT"] == "22"
    assert "NCCL_MAX_NCHANNELS" not in env
    assert env["NCCL_IB_GID_INDEX"] == env["SPARKNET_ROCE_GID_INDEX"] == "4"


@pytest.mark.parametrize("key", ["NCCL_ALGO_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_GRAPH_FILE", "NCCL_TOPO_FILE"])
def test_ring_refuses_forbidden_variables(key: str) -> None:
    with pytest.raises(AnsibleFilterError, match=f"host dgx2: spark_nccl_overrides: {key} must not be set on a ring"):
        env_of("ring", 4, "dgx2", overrides={key: "/x"})
    assert env_of("triangle", 3, "dgx2", overrides={key: "/x"})[key] == "/x"


@pytest.mark.parametrize("overrides,message", [
    ({"NCCL_PROTO": "LL,LL128,Simple"}, "NCCL_PROTO must be \\^LL128"),
    ({"nccl_debug": "INFO"}, "invalid variable name"),
    ({"NCCL_DEBUG": ["INFO"]}, "NCCL_DEBUG must be a string, a number or null"),
    ({"NCCL_DEBUG": "INFO\nLD_PRELOAD=/x.so"}, "NCCL_DEBUG must not contain a newline, '=' or a control character"),
    ({"LD_PRELOAD": "/x.so"}, "invalid variable name 'LD_PRELOAD' \\(only NCCL_, TORCH_NCCL_, SPARKNET_"),
    ({"NCCL_PROTO": None}, "NCCL_PROTO cannot be removed: every profile requires it"),
])
def test_bad_overrides(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        env_of("triangle", 3, "dgx1", overrides=overrides)


def test_ring_channels_must_match() -> None:
    with pytest.raises(AnsibleFilterError, match="NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS"):
        env_of("ring", 4, "dgx1", overrides={"NCCL_MAX_NCHANNELS": 8})
    with pytest.raises(AnsibleFilterError, match="got 3/3"):
        env_of("ring", 4, "dgx1", overrides={"NCCL_MAX_NCHANNELS": 3, "NCCL_MIN_NCHANNELS": 3})


def test_bad_gid_index_and_unknown_profile() -> None:
    with pytest.raises(AnsibleFilterError, match="host dgx1: spark_roce_gid_index must be an integer >= 0"):
        env_of("triangle", 3, "dgx1", gid_index=-1)
    with pytest.raises(AnsibleFilterError, match="no NCCL profile for topology 'ring' with 3 nodes"):
        nccl.spark_nccl_profile("ring", 3)


# --- the switched profiles (section 8.1 `switched` / `switched-nccl-only` columns, section 8.2) -----------

SWITCHED_ONESHOT = {
    "SPARKNET_ROCE_ALLREDUCE_CAPACITY_BYTES": "2097152", "SPARKNET_ROCE_ALLGATHER_MAX_BYTES": "4194304",
    "SPARKNET_ROCE_SPIN_LIMIT": "5000000", "SPARKNET_ROCE_GID_INDEX": "3", "SPARKNET_ROCE_TOPOLOGY": "direct",
    "SPARKNET_ROCE_HCA": "rocep1s0f0,roceP2p1s0f0", "SPARKNET_ROCE_TRAFFIC_CLASS": "106",
}


def switched_env(count: int, host: str, ports: list[int] | None = None, **kwargs: Any) -> dict[str, str]:
    raw = [{"host": f"dgx{r + 1}", "spark_rank": r, "ansible_host": f"10.0.1.{r + 11}", "spark_topology": "switched"}
           | ({"spark_fabric_switch_ports": ports} if ports else {}) for r in range(count)]
    node = fabric.spark_plan_node(fabric.spark_plan(raw), host)
    return nccl.spark_nccl_env(node, "switched", count, **kwargs)


@pytest.mark.parametrize("count", [2, 8, 16])
def test_switched_profile_is_the_direct_column_with_the_switch_rails(count: int) -> None:
    host = f"dgx{count}"
    env = switched_env(count, host)
    direct = {k: v for k, v in TP3_DGX1.items() if k not in ("SPARKNET_ROCE_PEER_HCAS", "VLLM_HOST_IP")}
    assert env == dict(sorted((direct | SWITCHED_ONESHOT | {
        "NCCL_IB_TC": "106", "VLLM_HOST_IP": f"10.0.1.{count + 10}"}).items()))
    assert nccl.spark_nccl_profile("switched", count) == "switched"


def test_switched_nccl_only_control_has_no_one_shot_variables() -> None:
    env = switched_env(8, "dgx3", profile="switched-nccl-only")
    assert not [k for k in env if k.startswith("SPARKNET_")]
    assert env["NCCL_IB_TC"] == "106" and env["NCCL_IB_HCA"] == "=roceP2p1s0f0,roceP2p1s0f1,rocep1s0f0,rocep1s0f1"
    assert (env["NCCL_MAX_NCHANNELS"], env["NCCL_BUFFSIZE"], env["NCCL_CUMEM_ENABLE"]) == ("8", "1048576", "0")
    assert "NCCL_ALGO" not in env and "NCCL_MIN_NCHANNELS" not in env
    assert nccl.spark_nccl_profile("switched", 8, "switched-nccl-only") == "switched-nccl-only"


def test_one_port_on_the_switch_gives_two_rails_for_both_transports() -> None:
    env = switched_env(4, "dgx2", ports=[1], traffic_class=104, gid_index=5)
    assert env["NCCL_IB_HCA"] == "=roceP2p1s0f1,rocep1s0f1"
    assert env["SPARKNET_ROCE_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert env["NCCL_IB_TC"] == env["SPARKNET_ROCE_TRAFFIC_CLASS"] == "104"
    assert env["NCCL_IB_GID_INDEX"] == env["SPARKNET_ROCE_GID_INDEX"] == "5"


@pytest.mark.parametrize("kwargs,message", [
    ({"profile": "tp3-triangle"}, "spark_nccl_profile tp3-triangle is for a triangle of 3 nodes, not spark_topology "
                                  "switched with 8 nodes: use switched or switched-nccl-only"),
    ({"profile": "mesh4"}, "spark_nccl_profile must be one of"),
    ({"traffic_class": 300}, "host dgx1: spark_roce_traffic_class must be an integer 0-255, got 300"),
    ({"overrides": {"SPARKNET_ROCE_PEER_HCAS": "{}"}},
     "host dgx1: spark_nccl_overrides: SPARKNET_ROCE_PEER_HCAS must not be set on a switch"),
    ({"overrides": {"SPARKNET_ROCE_HCA": "rocep1s0f0,roceP2p1s0f0,rocep1s0f1"}},
     "SPARKNET_ROCE_HCA must be 1-2 of the NCCL_IB_HCA rails"),
    ({"overrides": {"SPARKNET_ROCE_HCA": "mlx5_9"}}, "SPARKNET_ROCE_HCA must be 1-2 of the NCCL_IB_HCA rails"),
    ({"overrides": {"NCCL_IB_HCA": "^rocep1s0f0"}}, "NCCL_IB_HCA must list 1-4 rails"),
    ({"profile": "switched-nccl-only", "overrides": {"SPARKNET_ROCE_TOPOLOGY": "direct"}},
     "SPARKNET_ROCE_TOPOLOGY must not be set with switched-nccl-only"),
])
def test_switched_refusals(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message.replace("^", "\\^")):
        switched_env(8, "dgx1", **kwargs)


def test_a_cabled_profile_refuses_a_switch_setting_or_profile() -> None:
    with pytest.raises(AnsibleFilterError, match="host dgx1: spark_roce_traffic_class is only for spark_topology switched"):
        env_of("triangle", 3, "dgx1", traffic_class=106)
    with pytest.raises(AnsibleFilterError, match="spark_nccl_profile switched is for a switched cluster of 2-16 nodes"):
        env_of("triangle", 3, "dgx1", profile="switched")
    assert env_of("triangle", 3, "dgx1", profile="tp3-triangle") == env_of("triangle", 3, "dgx1")
