"""Serving profiles by name, per-site overrides, the kernel-backend switch and the pins (image-model-serve.md 5.3)."""
from __future__ import annotations

import re
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from testlib import COLLECTION, load_source

fabric = load_source("filter", "sparkfleet_fabric")
serve = load_source("filter", "sparkfleet_serve")
profiles_mod = load_source("module_utils", "spark_serve_profiles")
pins = load_source("module_utils", "spark_pins")

SHAPE = {"triangle": 3, "ring": 4, "pair": 2}


def hosts_of(topology: str, count: int | None = None) -> list[str]:
    return [f"dgx{i + 1}" for i in range(count or SHAPE[topology])]


def resolve(topology: str, count: int | None = None, **group: Any) -> dict[str, Any]:
    hosts = hosts_of(topology, count)
    hostvars = {h: {"spark_topology": topology, **group} for h in hosts}
    return serve.spark_serve_profiles(hostvars, hosts)


def plan(topology: str, count: int | None = None) -> dict[str, Any]:
    return fabric.spark_plan([{"host": h, "spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": topology}
                              for r, h in enumerate(hosts_of(topology, count))])


def refusals(topology: str, count: int | None = None, facts: Any = None, **group: Any) -> list[str]:
    return serve.spark_serve_refusals(resolve(topology, count, **group), plan(topology, count), facts)


def flag(profile: dict[str, Any], name: str) -> Any:
    args = profile["vllm_args"]
    return args[args.index(name) + 1]


# --- every profile, from the reference's table -------------------------------------------------------

@pytest.mark.parametrize("name,topology,expected", [
    ("tp3-r6-64k", "triangle", {"image": "vllm-ds41f-kkref:04c30fa98e79-r6", "--max-model-len": 524288,
                                "--max-num-seqs": 8, "--kv-cache-memory-bytes": 3758096384,
                                "--long-prefill-token-threshold": 4096, "requires": "64k"}),
    ("tp3-r6-4k", "triangle", {"image": "vllm-ds41f-kkref:04c30fa98e79-r6", "--max-model-len": 262144,
                               "--max-num-seqs": 8, "--kv-cache-memory-bytes": 2362232012,
                               "--long-prefill-token-threshold": 4096, "requires": "4k"}),
    ("tp4-r6", "ring", {"image": "vllm-ds41f-kkref:04c30fa98e79-r6", "--max-model-len": 1048576, "--max-num-seqs": 16,
                        "--kv-cache-memory-bytes": 11274289152, "--long-prefill-token-threshold": 8192, "requires": "64k"}),
    ("tp4-r6d-1m", "ring", {"image": "vllm-ds41f-kkref:19f2c20ed4d6-r6d", "--max-model-len": 1048576,
                            "--max-num-seqs": 16, "--kv-cache-memory-bytes": 11274289152,
                            "--long-prefill-token-threshold": 8096, "requires": "64k"}),
])
def test_every_profile_is_the_reference_column(name: str, topology: str, expected: dict[str, Any]) -> None:
    profile = resolve(topology, spark_serve_profile=name)["dgx1"]
    assert profile["profile"] == name and profile["image"] == expected["image"]
    assert profile["requires"]["kernel_flavour"] == expected["requires"]
    assert profile["requires"]["memory_saver"] is (expected["requires"] == "64k")
    for key in ("--max-model-len", "--max-num-seqs", "--kv-cache-memory-bytes", "--long-prefill-token-threshold"):
        assert flag(profile, key) == expected[key], key
    count = SHAPE[topology]
    assert flag(profile, "--tensor-parallel-size") == flag(profile, "--nnodes") == count
    assert flag(profile, "--speculative-config")["draft_tensor_parallel_size"] == count
    assert profile["kernel_backend"] == "tilelang"
    facts = {h: {"kernel_release": "k-64k" if expected["requires"] == "64k" else "k", "uvm_packing": "Y",
                 "page_size": 65536 if expected["requires"] == "64k" else 4096} for h in hosts_of(topology)}
    assert serve.spark_serve_refusals(resolve(topology, spark_serve_profile=name), plan(topology), facts) == []


@pytest.mark.parametrize("topology,count,name", [("triangle", 3, "tp3-r6-64k"), ("ring", 4, "tp4-r6d-1m"),
                                                 ("pair", 2, None), ("ring", 5, None)])
def test_the_default_profile_follows_the_topology(topology: str, count: int, name: Any) -> None:
    profile = resolve(topology, count)["dgx1"]
    assert profile["profile"] == name
    if name is None:
        assert profile["no_profile_reason"]


def test_the_4k_fallback_serves_hosts_without_the_memory_saver() -> None:
    assert refusals("triangle", spark_serve_profile="tp3-r6-4k", spark_memory_saver_enabled=False,
                    spark_kernel_candidate_release="7.0.0-1019-nvidia") == []


# --- refusals: one row per requirement ---------------------------------------------------------------

@pytest.mark.parametrize("group,facts,expected", [
    ({"spark_kernel_candidate_release": "7.0.0-1019-nvidia"}, None,
     "host dgx1: profile tp3-r6-64k requires the 64k kernel, the planned kernel (spark_kernel_candidate_release "
     "7.0.0-1019-nvidia) is the 4k flavour"),
    ({"spark_memory_saver_enabled": False}, None,
     "host dgx2: profile tp3-r6-64k requires the Memory Saver, the host plan disables it (spark_memory_saver_enabled: false)"),
    ({"spark_memory_saver_enabled": "false"}, None,
     "host dgx3: profile tp3-r6-64k requires the Memory Saver, the host plan disables it (spark_memory_saver_enabled: false)"),
    ({"spark_serve_profile": "tp4-r6"}, None, "profile tp4-r6 is for a ring of 4 nodes, the plan is a triangle of 3 nodes"),
    ({"spark_serve_profile": "tp4-r6"}, None,
     "profile tp4-r6: --tensor-parallel-size must appear once with the node count 3, found ['4']"),
    ({"spark_serve_profile": "tp4-r6"}, None, "profile tp4-r6: --speculative-config draft_tensor_parallel_size must be 3, got 4"),
    ({"spark_serve_profile": "tp3-r6-4k"}, {"kernel_release": "7.0.0-1019-nvidia-64k", "page_size": 65536},
     "host dgx1: kernel 7.0.0-1019-nvidia-64k is not the 4k flavour required by profile tp3-r6-4k"),
    ({"spark_serve_overrides": {"args": {"--moe-backend": "b12x"}}}, None,
     "profile tp3-r6-64k: --moe-backend must be tilelang for kernel_backend tilelang, found ['b12x']"),
    ({"spark_serve_overrides": {"args": {"--attention-backend": False}}}, None,
     "profile tp3-r6-64k: --attention-backend must be TILELANG for kernel_backend tilelang, found []"),
    ({"spark_serve_overrides": {"kernel_backend": "b12x", "args": {"--linear-backend": "tilelang"}}}, None,
     "profile tp3-r6-64k: --linear-backend must be b12x for kernel_backend b12x, found ['tilelang']"),
    ({"spark_serve_overrides": {"env": {"VLLM_DS41_KERNEL_BACKEND": "b12x"}}}, None,
     "profile tp3-r6-64k: VLLM_DS41_KERNEL_BACKEND must be tilelang for kernel_backend tilelang, found 'b12x'"),
    ({"spark_serve_overrides": {"env": {"TILELANG_CACHE_DIR": "/tmp/tilelang"}}}, None,
     "profile tp3-r6-64k: TILELANG_CACHE_DIR must be an absolute directory under /cache/ for kernel_backend tilelang"),
    ({"spark_serve_overrides": {"env": {"TILELANG_CACHE_DIR": None}}}, None,
     "profile tp3-r6-64k: TILELANG_CACHE_DIR must be an absolute directory under /cache/"),
    ({"spark_serve_overrides": {"args": {"--speculative-config": {"method": "dspark", "attention_backend": "B12X"}}}},
     None, "profile tp3-r6-64k: --speculative-config attention_backend must be TILELANG for kernel_backend tilelang"),
])
def test_each_unmet_requirement_is_refused(group: dict[str, Any], facts: Any, expected: str) -> None:
    facts_by_host = None if facts is None else {h: dict(facts, uvm_packing="N") for h in hosts_of("triangle")}
    found = refusals("triangle", None, facts_by_host, **group)
    assert any(r.startswith(expected) for r in found), found


def test_the_b12x_switch_sets_every_coupled_field() -> None:
    profile = resolve("ring", spark_serve_overrides={"kernel_backend": "b12x"})["dgx1"]
    assert profile["kernel_backend"] == "b12x"
    assert [flag(profile, f) for f in ("--attention-backend", "--linear-backend", "--moe-backend")] == ["B12X", "b12x", "b12x"]
    assert flag(profile, "--speculative-config")["attention_backend"] == "B12X"
    assert profile["env"]["VLLM_DS41_KERNEL_BACKEND"] == "b12x"
    assert profile["env"]["TILELANG_CACHE_DIR"] == "/cache/kkref/jit/tilelang"
    assert serve.spark_serve_refusals(resolve("ring", spark_serve_overrides={"kernel_backend": "b12x"}), plan("ring")) == []


# --- overrides -----------------------------------------------------------------------------------------

def test_overrides_merge_over_the_profile() -> None:
    profile = resolve("triangle", spark_serve_overrides={
        "image": "site/vllm:1", "env": {"MAX_JOBS": "4", "SAFETENSORS_FAST_GPU": None, "SITE_X": "1"},
        "args": {"--max-num-seqs": 4, "--async-scheduling": False}, "run": {"shm_size": "32g"},
        "requires": {"kernel_flavour": "4k", "page_size": 4096, "memory_saver": False}},
        spark_image_tag="built/by:stage")["dgx1"]
    assert profile["image"] == "site/vllm:1"
    assert profile["env"]["MAX_JOBS"] == "4" and profile["env"]["SITE_X"] == "1"
    assert "SAFETENSORS_FAST_GPU" not in profile["env"]
    assert flag(profile, "--max-num-seqs") == 4 and "--async-scheduling" not in profile["vllm_args"]
    assert profile["run"]["shm_size"] == "32g" and profile["run"]["memory"] == "112g"
    assert profile["requires"]["kernel_flavour"] == "4k"
    assert profiles_mod.PROFILES["tp3-r6-64k"]["env"]["MAX_JOBS"] == "2", "overrides must not change the table"


def test_a_shape_override_serves_a_profile_on_a_shape_it_was_not_measured_on() -> None:
    profiles = resolve("switched", 2, spark_serve_profile="tp3-r6-4k",
                       spark_serve_overrides={"shape": {"topology": "switched", "nodes": 2}})
    profile = profiles["dgx1"]
    assert (profile["topology"], profile["nodes"]) == ("switched", 2)
    assert flag(profile, "--tensor-parallel-size") == 2 and flag(profile, "--nnodes") == 2
    assert flag(profile, "--speculative-config")["draft_tensor_parallel_size"] == 2
    assert flag(profile, "--max-model-len") == 262144, "the rest of the profile is kept"
    assert serve.spark_serve_refusals(profiles, plan("switched", 2)) == []
    assert profiles_mod.PROFILES["tp3-r6-4k"]["nodes"] == 3, "overrides must not change the table"


def test_an_args_override_that_contradicts_the_shape_is_refused() -> None:
    profiles = resolve("switched", 2, spark_serve_profile="tp3-r6-4k",
                       spark_serve_overrides={"shape": {"topology": "switched", "nodes": 2},
                                              "args": {"--tensor-parallel-size": 3}})
    assert serve.spark_serve_refusals(profiles, plan("switched", 2)) == [
        "profile tp3-r6-4k: --tensor-parallel-size must appear once with the node count 2, found ['3']"]


def test_site_settings_and_the_image_stage_tag() -> None:
    profile = resolve("triangle", spark_image_tag="built/by:stage", spark_serve_api_port=8100,
                      spark_serve_container="site-serve", spark_model_dir="/srv/models/ds")["dgx1"]
    assert profile["image"] == "built/by:stage"
    assert (profile["api_port"], profile["container"]) == (8100, "site-serve")
    assert flag(profile, "--port") == 8100
    assert profile["binds"][0] == {"source": "/srv/models/ds", "target": "/models", "mode": "ro"}


@pytest.mark.parametrize("group,message", [
    ({"spark_serve_profile": "tp5-r9"}, "host dgx1: spark_serve_profile 'tp5-r9' is not a serving profile (one of tp3-r6-64k"),
    ({"spark_serve_overrides": {"max_model_len": 1}},
     "host dgx1: spark_serve_overrides.max_model_len is not a profile field that can be overridden"),
    ({"spark_serve_overrides": {"topology": "ring"}}, "host dgx1: spark_serve_overrides.topology is not a profile field"),
    ({"spark_serve_overrides": {"shape": {"topology": "mesh", "nodes": 2}}},
     "host dgx1: spark_serve_overrides.shape must be {topology: pair|triangle|ring|switched, nodes: <count>}"),
    ({"spark_serve_overrides": {"shape": {"topology": "ring", "nodes": "4"}}}, "spark_serve_overrides.shape must be"),
    ({"spark_serve_overrides": {"shape": {"topology": "ring"}}}, "spark_serve_overrides.shape must be"),
    ({"spark_serve_overrides": ["env"]}, "host dgx1: spark_serve_overrides must be a mapping of profile field to value"),
    ({"spark_serve_overrides": {"env": "MAX_JOBS=4"}}, "host dgx1: spark_serve_overrides.env must be a mapping merged over"),
    ({"spark_serve_overrides": {"kernel_backend": "cuda"}}, "host dgx1: spark_serve_overrides.kernel_backend must be one of tilelang, b12x"),
    ({"spark_serve_vllm_args": ["/models"]},
     "host dgx1: spark_serve_vllm_args is a field of the named serving profile: choose the profile with "
     "spark_serve_profile and change it with spark_serve_overrides.args"),
    ({"spark_serve_env": {}}, "host dgx1: spark_serve_env is a field of the named serving profile"),
    ({"spark_serve_nodes": 3}, "change it with another spark_serve_profile"),
    ({"spark_serve_overrides": {"env": {"MAX_JOBS": ["2"]}}}, "host dgx1: spark_serve_env.MAX_JOBS must be a string or a number"),
])
def test_bad_selections_and_overrides_name_host_and_field(group: dict[str, Any], message: str) -> None:
    with pytest.raises(AnsibleFilterError) as err:
        resolve("triangle", **group)
    assert message in str(err.value)


# --- pins ----------------------------------------------------------------------------------------------

def test_every_pin_lookup_in_role_defaults_names_a_pin() -> None:
    used = set()
    for path in COLLECTION.glob("roles/*/defaults/main.yml"):
        used |= set(re.findall(r"spark_pin', '([a-z0-9_]+)'", path.read_text()))
    assert used == set(pins.PINS), "every pin is some role's default, and every lookup names a pin"


def test_pins_are_the_reference_and_copies() -> None:
    assert pins.pin("spark_nvidia_driver_version") == pins.pin("spark_memory_saver_driver_version") == "580.178.04"
    assert pins.pin("spark_kernel_packages")["linux-modules-nvidia-580-open-7.0.0-1019-nvidia-64k"] == "7.0.0-1019.19~24.04.2+1"
    upstreams = pins.pin("spark_image_upstreams")
    upstreams[0]["patches"].append("x")
    assert pins.pin("spark_image_upstreams")[0]["patches"] == []
    assert profiles_mod.SETTINGS["model_revision"] == pins.pin("spark_model_revision")
    with pytest.raises(KeyError, match="no pin named 'spark_nope'"):
        pins.pin("spark_nope")
