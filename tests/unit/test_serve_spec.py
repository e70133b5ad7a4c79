"""Serving profile -> per-rank serve spec and serve's refusals (image-model-serve.md sections 5 and 7)."""
from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from testlib import ROOT, load_source

fabric = load_source("filter", "sparkfleet_fabric")
nccl = load_source("filter", "sparkfleet_nccl")
serve = load_source("filter", "sparkfleet_serve")

# The reference's TP3 64 KiB r6 serve arguments, transcribed from image-model-serve.md section 5.3 in its order.
TP3_CAPTURE = [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 40, 48]
REFERENCE_TP3 = [
    "/models", "--served-model-name", "deepseek-v4.1-flash", "--host", "0.0.0.0", "--port", "8000",
    "--tokenizer-mode", "deepseek_v41", "--dtype", "bfloat16", "--tensor-parallel-size", "3",
    "--load-format", "b12x", "--block-size", "256", "--enable-prefix-caching", "--enable-chunked-prefill",
    "--max-model-len", "524288", "--max-num-seqs", "8", "--max-parallel-prefills", "1",
    "--gpu-memory-utilization", "0.82", "--max-num-batched-tokens", "4096",
    "--kv-cache-memory-bytes", "3758096384", "--max-cudagraph-capture-size", "48",
    "--generation-config", "vllm",
    "--engram-config", '{"table_memory":"disk","disk_resident_scales":false,"projection_tp":true}',
    "--attention-backend", "TILELANG", "--linear-backend", "tilelang", "--moe-backend", "tilelang",
    "--speculative-config",
    '{"method":"dspark","num_speculative_tokens":5,"draft_tensor_parallel_size":3,"attention_backend":"TILELANG",'
    '"draft_sample_method":"greedy","rejection_sample_method":"block","enable_adaptive_verification":true,'
    '"adaptive_verification_cost_scale":2.0}',
    "--jit-monitor-mode", "warn",
    "--compilation-config",
    '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"],"cudagraph_capture_sizes":'
    + json.dumps(TP3_CAPTURE, separators=(",", ":")) + "}",
    "--prefix-cache-retention-interval", "512", "--long-prefill-token-threshold", "4096", "--async-scheduling",
    "--reasoning-parser", "deepseek_v41", "--tool-call-parser", "deepseek_v41", "--enable-auto-tool-choice",
    "--distributed-executor-backend", "mp", "--nnodes", "3", "--no-scheduler-reserve-full-isl",
    "--no-enable-flashinfer-autotune", "--limit-mm-per-prompt", '{"image":4}', "--mm-processor-cache-gb", "0",
]

# The TP4 ring column of the reference's table, with the r6d delta, applied to the same argument list.
TP4_CHANGES = {
    "--tensor-parallel-size": "4", "--nnodes": "4", "--max-model-len": "1048576", "--max-num-seqs": "16",
    "--max-num-batched-tokens": "8192", "--kv-cache-memory-bytes": "11274289152",
    "--max-cudagraph-capture-size": "96", "--prefix-cache-retention-interval": "8192",
    "--long-prefill-token-threshold": "8096",
}


def reference_tp4() -> list[str]:
    args = list(REFERENCE_TP3)
    for i, arg in enumerate(args[:-1]):
        if arg in TP4_CHANGES:
            args[i + 1] = TP4_CHANGES[arg]
    spec = args.index("--speculative-config") + 1
    args[spec] = args[spec].replace('"draft_tensor_parallel_size":3', '"draft_tensor_parallel_size":4')
    comp = args.index("--compilation-config") + 1
    sizes = TP3_CAPTURE + [56, 64, 72, 80, 88, 96]
    args[comp] = args[comp].replace(json.dumps(TP3_CAPTURE, separators=(",", ":")), json.dumps(sizes, separators=(",", ":")))
    return args


SHAPES = {"tp3-triangle": ("triangle", 3), "tp4-ring": ("ring", 4), "tp2-pair": ("pair", 2)}


def site_vars(inventory: str) -> dict[str, Any]:
    """The shipped inventory's group variables (its site facts only)."""
    return yaml.safe_load((ROOT / "inventories" / inventory / "group_vars" / "spark" / "site.yml").read_text())


def inventory_profile(inventory: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The serving profile one host of a shipped inventory resolves to (named by its topology)."""
    count = SHAPES[inventory][1]
    hosts = [f"dgx{i + 1}" for i in range(count)]
    return serve.spark_serve_profiles(resolved_hostvars(site_vars(inventory) | (extra or {}), hosts), hosts)["dgx1"]


def resolved_hostvars(values: dict[str, Any], hosts: list[str]) -> dict[str, dict[str, Any]]:
    return {h: copy.deepcopy(values) for h in hosts}


def plan(topology: str, count: int) -> dict[str, Any]:
    return fabric.spark_plan([
        {"host": f"dgx{r + 1}", "spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": topology}
        for r in range(count)])


def specs(topology: str, count: int, profile: dict[str, Any]) -> dict[str, dict[str, Any]]:
    p = plan(topology, count)
    return {n["host"]: serve.spark_serve_spec(n, p, profile, nccl.spark_nccl_env(n, topology, count))
            for n in p["nodes"]}


@pytest.fixture(scope="module")
def tp3() -> dict[str, Any]:
    return inventory_profile("tp3-triangle")


@pytest.fixture(scope="module")
def tp4() -> dict[str, Any]:
    return inventory_profile("tp4-ring")


def rank_tail(rank: int, head: str = "10.0.1.71") -> list[str]:
    return ["--node-rank", str(rank), "--master-addr", head, "--master-port", "9999"] + (["--headless"] if rank else [])


def test_tp3_commands_are_the_reference_launch(tp3: dict[str, Any]) -> None:
    result = specs("triangle", 3, tp3)
    for rank, host in enumerate(["dgx1", "dgx2", "dgx3"]):
        assert result[host]["command"] == REFERENCE_TP3 + rank_tail(rank)
        assert result[host]["name"] == "dsv41-karmic-kraken"
        assert result[host]["image"] == "vllm-ds41f-kkref:04c30fa98e79-r6"


def test_tp4_commands_are_the_reference_launch(tp4: dict[str, Any]) -> None:
    result = specs("ring", 4, tp4)
    for rank in range(4):
        assert result[f"dgx{rank + 1}"]["command"] == reference_tp4() + rank_tail(rank)
    assert result["dgx1"]["image"] == "vllm-ds41f-kkref:19f2c20ed4d6-r6d"
    assert result["dgx3"]["env"]["SPARK3_DSPARK_COST_DIR"] == "/cache/kkref/dspark-costs/ring4-r6-20261005"


def test_image_follows_the_image_stage() -> None:
    profile = inventory_profile("tp3-triangle", {"spark_image_tag": "vllm-ds41f-kkref:abcdef012345-site"})
    assert profile["image"] == "vllm-ds41f-kkref:abcdef012345-site"


def test_env_is_the_collective_env_plus_the_profile(tp3: dict[str, Any]) -> None:
    p = plan("triangle", 3)
    node = fabric.spark_plan_node(p, "dgx2")
    collective = nccl.spark_nccl_env(node, "triangle", 3)
    env = serve.spark_serve_spec(node, p, tp3, collective)["env"]
    assert env == dict(sorted((collective | {k: str(v) for k, v in tp3["env"].items()}).items()))
    assert env["VLLM_HOST_IP"] == "10.0.1.72"
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "enP7s7"
    assert env["HF_HUB_OFFLINE"] == "1" and env["B12X_W4A8_TINY_DECODE"] == "0"
    assert env["SPARKNET_ROCE_TOPOLOGY"] == "direct"
    assert all(isinstance(v, str) for v in env.values())
    assert list(env) == sorted(env)


def test_run_options_are_the_reference_container(tp3: dict[str, Any]) -> None:
    run = specs("triangle", 3, tp3)["dgx3"]["run"]
    assert run["network_mode"] == "host" and run["ipc_mode"] == "host"
    assert run["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert run["devices"] == ["/dev/infiniband:/dev/infiniband:rwm"]
    assert run["capabilities"] == ["IPC_LOCK"]
    assert run["ulimits"] == ["memlock:-1:-1", "stack:67108864:67108864"]
    assert run["security_opts"] == ["seccomp=unconfined", "label=disable"]
    assert (run["shm_size"], run["memory"], run["memory_swap"]) == ("16g", "112g", "112g")
    assert run["device_cgroup_rules"] == ["c 226:* rw"]
    assert run["restart_policy"] == "no"
    assert run["mounts"] == [{"type": "bind", "source": "/dev/dri/by-path/pci-000f:01:00.0-card", "target": "/dev/dri/card0"}]
    assert run["volumes"] == ["/var/lib/sparkfleet/models/deepseek-v4.1-flash:/models:ro",
                              "/var/lib/sparkfleet/serve-cache:/cache:rw"]


def test_ranks_differ_only_in_their_rank_flags(tp4: dict[str, Any]) -> None:
    result = specs("ring", 4, tp4)
    engine = {json.dumps(s["command"][:-7 if s["command"][-1] == "--headless" else -6]) for s in result.values()}
    assert len(engine) == 1
    assert len({json.dumps(s["run"], sort_keys=True) for s in result.values()}) == 1


def test_head_address_comes_from_the_plan(tp3: dict[str, Any]) -> None:
    raw = [{"host": h, "spark_rank": r, "ansible_host": f"192.168.5.{r + 10}", "spark_mgmt_address": f"172.16.0.{r + 1}",
            "spark_topology": "triangle"} for r, h in enumerate(["b", "a", "c"])]
    p = fabric.spark_plan(raw)
    node = fabric.spark_plan_node(p, "c")
    command = serve.spark_serve_spec(node, p, tp3, nccl.spark_nccl_env(node, "triangle", 3))["command"]
    assert command[-7:] == ["--node-rank", "2", "--master-addr", "172.16.0.1", "--master-port", "9999", "--headless"]


# --- refusals -------------------------------------------------------------------------------------

FACTS_OK = {"kernel_release": "7.0.0-1019-nvidia-64k", "page_size": 65536, "page_size_flavour": "64k",
            "uvm_packing": "Y", "unavailable": {}}


def test_shipped_profiles_have_no_refusals(tp3: dict[str, Any], tp4: dict[str, Any]) -> None:
    assert serve.spark_serve_refusals({f"dgx{i}": tp3 for i in (1, 2, 3)}, plan("triangle", 3)) == []
    facts = {f"dgx{i}": FACTS_OK for i in (1, 2, 3, 4)}
    assert serve.spark_serve_refusals({f"dgx{i}": tp4 for i in (1, 2, 3, 4)}, plan("ring", 4), facts) == []


def test_the_pair_refuses_to_serve() -> None:
    profiles = serve.spark_serve_profiles(resolved_hostvars(site_vars("tp2-pair"), ["dgx1", "dgx2"]), ["dgx1", "dgx2"])
    refusals = serve.spark_serve_refusals(profiles, plan("pair", 2))
    assert len(refusals) == 1
    assert refusals[0].startswith("topology pair has no serving profile: DeepSeek V4.1 Flash does not fit in two")


def test_a_profile_without_reason_still_refuses_clearly() -> None:
    refusals = serve.spark_serve_refusals({"dgx1": {"profile": None}, "dgx2": {"profile": None}}, plan("pair", 2))
    assert refusals == ["topology pair has no serving profile (spark_serve_profile is null or not set)"]


def test_a_triangle_profile_on_a_ring_is_refused(tp3: dict[str, Any]) -> None:
    refusals = serve.spark_serve_refusals({f"dgx{i}": tp3 for i in (1, 2, 3, 4)}, plan("ring", 4))
    assert refusals == [
        "profile tp3-r6-64k is for a triangle of 3 nodes, the plan is a ring of 4 nodes",
        "profile tp3-r6-64k: --tensor-parallel-size must appear once with the node count 4, found ['3']",
        "profile tp3-r6-64k: --nnodes must appear once with the node count 4, found ['3']",
        "profile tp3-r6-64k: --speculative-config draft_tensor_parallel_size must be 4, got 3",
    ]


def with_changes(profile: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    changed = copy.deepcopy(profile)
    change(changed)
    return changed


def test_launch_disabled_and_missing_nnodes_are_refused(tp3: dict[str, Any]) -> None:
    def change(p: dict[str, Any]) -> None:
        p["launch_enabled"] = False
        i = p["vllm_args"].index("--nnodes")
        del p["vllm_args"][i:i + 2]
    profile = with_changes(tp3, change)
    refusals = serve.spark_serve_refusals({f"dgx{i}": profile for i in (1, 2, 3)}, plan("triangle", 3))
    assert refusals == ["profile tp3-r6-64k: --nnodes must appear once with the node count 3, found []",
                        "profile tp3-r6-64k has spark_serve_launch_enabled: false"]


def test_ranks_with_different_profiles_are_refused(tp3: dict[str, Any]) -> None:
    other = with_changes(tp3, lambda p: p["env"].update(MAX_JOBS="4"))
    refusals = serve.spark_serve_refusals({"dgx1": tp3, "dgx2": tp3, "dgx3": other}, plan("triangle", 3))
    assert refusals == ["host dgx3: spark_serve_env differ from dgx1's (every rank must launch the same profile)"]


@pytest.mark.parametrize("host_facts,expected", [
    ({"kernel_release": "6.17.0-1008-nvidia", "page_size": 4096, "page_size_flavour": "4k", "uvm_packing": None,
      "unavailable": {"uvm_packing": "nvidia_uvm is not loaded"}},
     ["host dgx2: kernel 6.17.0-1008-nvidia is not the 64k flavour required by profile tp4-r6d-1m",
      "host dgx2: page size 4096, profile tp4-r6d-1m requires 65536",
      "host dgx2: memory saver is not active (nvidia_uvm is not loaded), profile tp4-r6d-1m requires it"]),
    (dict(FACTS_OK, uvm_packing="N"),
     ["host dgx2: memory saver is not active (uvm_pack_sysmem_leaf_tables=N), profile tp4-r6d-1m requires it"]),
    (None, ["host dgx2: no host facts to check profile tp4-r6d-1m's requirements (gather spark_host_facts first)"]),
])
def test_host_requirements(tp4: dict[str, Any], host_facts: Any, expected: list[str]) -> None:
    facts = {f"dgx{i}": FACTS_OK for i in (1, 3, 4)}
    if host_facts is not None:
        facts["dgx2"] = host_facts
    refusals = serve.spark_serve_refusals({f"dgx{i}": tp4 for i in (1, 2, 3, 4)}, plan("ring", 4), facts)
    assert refusals == expected


def test_a_4k_profile_accepts_4k_hosts_without_the_saver(tp3: dict[str, Any]) -> None:
    profile = with_changes(tp3, lambda p: p.update(requires={"kernel_flavour": "4k", "page_size": 4096, "memory_saver": False}))
    facts = {f"dgx{i}": {"kernel_release": "6.17.0-1008-nvidia", "page_size": 4096, "uvm_packing": None} for i in (1, 2, 3)}
    assert serve.spark_serve_refusals({f"dgx{i}": profile for i in (1, 2, 3)}, plan("triangle", 3), facts) == []


# --- malformed profiles ---------------------------------------------------------------------------

@pytest.mark.parametrize("change,message", [
    (lambda p: p.pop("container"), "host dgx1: serving profile 'tp3-r6-64k' is missing spark_serve_container"),
    (lambda p: p.update(container="bad name"), "host dgx1: spark_serve_container must be a container name"),
    (lambda p: p.update(api_port=70000), "host dgx1: spark_serve_api_port must be a port number 1-65535, got 70000"),
    (lambda p: p.update(master_port=8000), "host dgx1: spark_serve_master_port must differ from spark_serve_api_port"),
    (lambda p: p["vllm_args"].append("--headless"), "host dgx1: spark_serve_vllm_args[69] must not contain --headless"),
    (lambda p: p["vllm_args"].append(None), "host dgx1: spark_serve_vllm_args[69] must be a string, a number"),
    (lambda p: p["env"].update(MAX_JOBS=["2"]), "host dgx1: spark_serve_env.MAX_JOBS must be a string or a number"),
    (lambda p: p["env"].update({"BAD-NAME": "1"}), "host dgx1: spark_serve_env has an invalid variable name 'BAD-NAME'"),
    (lambda p: p["run"].update(network_mode="bridge"), "host dgx1: spark_serve_run.network_mode must be host"),
    (lambda p: p["run"].update(volumes=[]), "host dgx1: spark_serve_run must not carry env or volumes"),
    (lambda p: p["binds"][0].update(mode="rx"), "host dgx1: spark_serve_binds[0].mode must be ro or rw, got 'rx'"),
    (lambda p: p["binds"][1].update(source="relative"), "host dgx1: spark_serve_binds[1].source must be an absolute path"),
    (lambda p: p["binds"][1].update(target="/models"), "host dgx1: spark_serve_binds mounts /models twice"),
    (lambda p: p["requires"].update(page_size=4096), "host dgx1: spark_serve_requires.page_size must be 65536 for the 64k flavour"),
    (lambda p: p["requires"].update(kernel_flavour="16k"), "host dgx1: spark_serve_requires.kernel_flavour must be one of 4k, 64k"),
    (lambda p: p.update(guard_startup_threshold="5GB"), "host dgx1: spark_serve_guard_startup_threshold must be a size such as 5GiB"),
    (lambda p: p.update(guard_steady_threshold="6GiB"),
     "host dgx1: spark_serve_guard_startup_threshold (5GiB) must be above spark_serve_guard_steady_threshold (6GiB)"),
    (lambda p: p.update(guard_steady_interval=0), "host dgx1: spark_serve_guard_steady_interval must be a positive number"),
    (lambda p: p.update(guard_steady_threshold="256MiB"), "host dgx1: spark_serve_guard_steady_threshold must be at least 1 GiB"),
    (lambda p: p.update(guard_startup_interval=60), "host dgx1: spark_serve_guard_startup_interval must be at most 5 seconds"),
    (lambda p: p.update(guard_startup_wait=86400), "host dgx1: spark_serve_guard_startup_wait must be at most 3600 seconds"),
    (lambda p: p.update(nodes="3"), "host dgx1: spark_serve_nodes must be an integer >= 2, got '3'"),
    (lambda p: p.update(launch_enabled="yes"), "host dgx1: spark_serve_launch_enabled must be true or false"),
])
def test_malformed_profiles_name_host_and_field(tp3: dict[str, Any], change: Callable[[dict[str, Any]], Any],
                                                message: str) -> None:
    assert len(tp3["vllm_args"]) == 69
    profile = with_changes(tp3, change)
    p = plan("triangle", 3)
    node = fabric.spark_plan_node(p, "dgx1")
    with pytest.raises(AnsibleFilterError) as err:
        serve.spark_serve_spec(node, p, profile, nccl.spark_nccl_env(node, "triangle", 3))
    assert message in str(err.value)
    with pytest.raises(AnsibleFilterError):
        serve.spark_serve_profiles({"dgx1": {"spark_serve_" + k: v for k, v in profile.items()}}, ["dgx1"])


def test_profile_env_may_not_contradict_the_collective_env(tp3: dict[str, Any]) -> None:
    profile = with_changes(tp3, lambda p: p["env"].update(NCCL_DEBUG="INFO"))
    p = plan("triangle", 3)
    node = fabric.spark_plan_node(p, "dgx3")
    with pytest.raises(AnsibleFilterError, match=r"host dgx3: spark_serve_env.NCCL_DEBUG \(INFO\) conflicts with the "
                                                 r"collective environment \(WARN\); NCCL and socket variables belong in"):
        serve.spark_serve_spec(node, p, profile, nccl.spark_nccl_env(node, "triangle", 3))


def test_profiles_ignore_other_serve_variables(tp3: dict[str, Any]) -> None:
    hostvars = resolved_hostvars(site_vars("tp3-triangle") | {"spark_serve_replace": True, "spark_rank": 0},
                                 ["dgx1", "dgx2", "dgx3"])
    assert serve.spark_serve_profiles(hostvars, ["dgx1", "dgx2", "dgx3"])["dgx1"] == tp3
    with pytest.raises(AnsibleFilterError, match="host dgx9 has no variables"):
        serve.spark_serve_profiles(hostvars, ["dgx9"])


def test_filters_are_registered() -> None:
    assert set(serve.FilterModule().filters()) == {"spark_serve_profiles", "spark_serve_spec", "spark_serve_args",
                                                  "spark_serve_refusals", "spark_serve_fabric_refusals"}

