"""The promoted serving profiles by name, the kernel-backend coupling, and per-site overrides (pure data/logic).

A profile is what the reference promotes as one unit (image-model-serve.md sections 5.2-5.4): the shape it
was measured on (topology, node count), the image, the engine arguments, the container environment, the
docker run options, the kernel it requires and its kernel backend. Sites select one with
spark_serve_profile and change single fields with spark_serve_overrides; the container name, ports, model,
directories and memory guards are site settings (spark_serve_* variables, SETTINGS below are their defaults).
"""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_pins as _PINS

# --- kernel backend coupling (section 5.3) -----------------------------------------------------------

# One switch sets the three engine backends, the drafter's attention backend and the kernel environment.
BACKENDS: Dict[str, Dict[str, str]] = {
    "tilelang": {"--attention-backend": "TILELANG", "--linear-backend": "tilelang", "--moe-backend": "tilelang",
                 "draft": "TILELANG", "env": "tilelang"},
    "b12x": {"--attention-backend": "B12X", "--linear-backend": "b12x", "--moe-backend": "b12x",
             "draft": "B12X", "env": "b12x"},
}
BACKEND_FLAGS = ("--attention-backend", "--linear-backend", "--moe-backend")
TILELANG_CACHE_DIR = "/cache/kkref/jit/tilelang"
CACHE_ROOT = "/cache/"


def _argv_value(argv: List[str], flag: str) -> List[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def _draft_backend(argv: List[str]) -> Any:
    values = _argv_value(argv, "--speculative-config")
    if not values:
        return None
    try:
        spec = json.loads(values[0])
    except ValueError:
        return "unreadable --speculative-config"
    return spec.get("attention_backend") if isinstance(spec, dict) else "unreadable --speculative-config"


def backend_errors(backend: Any, argv: List[str], env: Mapping[str, Any]) -> List[str]:
    """Every way the engine argv and environment contradict kernel_backend (section 5.3's coupling).

    argv is the rendered argument list (strings, mappings as JSON); the same check serves a profile before it
    launches and the Cmd/Env of a running container.
    """
    if backend not in BACKENDS:
        return [f"kernel_backend must be one of {', '.join(BACKENDS)}, got {backend!r}"]
    want = BACKENDS[backend]
    problems = []
    for flag in BACKEND_FLAGS:
        found = _argv_value(argv, flag)
        if found != [want[flag]]:
            problems.append(f"{flag} must be {want[flag]} for kernel_backend {backend}, found {found}")
    draft = _draft_backend(argv)
    if draft is not None and draft != want["draft"]:
        problems.append(f"--speculative-config attention_backend must be {want['draft']} for kernel_backend "
                        f"{backend}, found {draft!r}")
    if str(env.get("VLLM_DS41_KERNEL_BACKEND")) != want["env"]:
        problems.append(f"VLLM_DS41_KERNEL_BACKEND must be {want['env']} for kernel_backend {backend}, "
                        f"found {env.get('VLLM_DS41_KERNEL_BACKEND')!r}")
    cache = env.get("TILELANG_CACHE_DIR")
    if backend == "tilelang" and not (isinstance(cache, str) and cache.startswith(CACHE_ROOT) and ".." not in cache):
        problems.append(f"TILELANG_CACHE_DIR must be an absolute directory under {CACHE_ROOT} for kernel_backend "
                        f"tilelang (the JIT cache survives container replacement there), found {cache!r}")
    return problems


def apply_backend(profile: Dict[str, Any], backend: str) -> None:
    """Set every coupled field of a profile (engine args, drafter, environment) to one backend, in place."""
    want = BACKENDS[backend]
    profile["kernel_backend"] = backend
    for flag in BACKEND_FLAGS:
        profile["args"][flag] = want[flag]
    draft = profile["args"].get("--speculative-config")
    if isinstance(draft, dict):
        draft["attention_backend"] = want["draft"]
    profile["env"]["VLLM_DS41_KERNEL_BACKEND"] = want["env"]
    profile["env"].setdefault("TILELANG_CACHE_DIR", TILELANG_CACHE_DIR)


# --- the promoted r6 profiles ------------------------------------------------------------------------

# Engine arguments after the model directory, in the reference's order (section 5.3, TP3 64K r6). A value of
# None is a bare flag; a mapping or list is passed as compact JSON. --served-model-name and --port come from
# the site settings; the coupled backends from kernel_backend.
_R6_ARGS: Dict[str, Any] = {
    "--served-model-name": None, "--host": "0.0.0.0", "--port": None,
    "--tokenizer-mode": "deepseek_v41", "--dtype": "bfloat16",
    "--tensor-parallel-size": 3,
    "--load-format": "b12x",
    "--block-size": 256,                                  # KV block size of the b12x fork
    "--enable-prefix-caching": None, "--enable-chunked-prefill": None,
    "--max-model-len": 524288,
    "--max-num-seqs": 8,
    "--max-parallel-prefills": 1,                         # more parallel prefills raised long-context TTFT
    "--gpu-memory-utilization": 0.82,
    "--max-num-batched-tokens": 4096,                     # 8192 crossed the startup guard at TP3
    "--kv-cache-memory-bytes": 3758096384,                # 3.5 GiB KV cache per rank
    "--max-cudagraph-capture-size": 48,
    "--generation-config": "vllm",
    "--engram-config": {"table_memory": "disk", "disk_resident_scales": False, "projection_tp": True},
    "--attention-backend": "TILELANG", "--linear-backend": "tilelang", "--moe-backend": "tilelang",
    "--speculative-config": {                             # dspark drafter sharded over the same ranks
        "method": "dspark", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 3,
        "attention_backend": "TILELANG", "draft_sample_method": "greedy", "rejection_sample_method": "block",
        "enable_adaptive_verification": True, "adaptive_verification_cost_scale": 2.0},
    "--jit-monitor-mode": "warn",
    "--compilation-config": {"cudagraph_mode": "FULL_AND_PIECEWISE", "custom_ops": ["all"],
                             "cudagraph_capture_sizes": [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 40, 48]},
    "--prefix-cache-retention-interval": 512,
    "--long-prefill-token-threshold": 4096,
    "--async-scheduling": None,
    "--reasoning-parser": "deepseek_v41", "--tool-call-parser": "deepseek_v41", "--enable-auto-tool-choice": None,
    "--distributed-executor-backend": "mp",               # vLLM's multiprocessing executor, one container per node
    "--nnodes": 3,
    "--no-scheduler-reserve-full-isl": None,
    "--no-enable-flashinfer-autotune": None,              # in-engine autotune crossed the startup guard
    "--limit-mm-per-prompt": {"image": 4},
    "--mm-processor-cache-gb": 0,
}
# Bound per site: --served-model-name <model_name>, --port <api_port>.
SITE_ARGS = {"--served-model-name": "model_name", "--port": "api_port"}

# Container environment on top of the node's collective environment (section 5.4); all strings.
_R6_ENV: Dict[str, str] = {
    # JIT and download caches under the /cache bind, so they survive container replacement.
    "B12X_COMPILE_CACHE_DIR": "/cache/kkref/jit/b12x/compile", "B12X_CUTE_COMPILE_CACHE_DIR": "/cache/kkref/jit/b12x/cute",
    "CUTE_DSL_CACHE_DIR": "/cache/kkref/jit/cute-dsl", "CUDA_CACHE_PATH": "/cache/kkref/jit/nv-compute",
    "CUDA_CACHE_MAXSIZE": "4294967296", "FLASHINFER_WORKSPACE_BASE": "/cache/kkref/flashinfer",
    "TILELANG_CACHE_DIR": TILELANG_CACHE_DIR, "TORCHINDUCTOR_CACHE_DIR": "/cache/kkref/jit/torchinductor",
    "TRITON_CACHE_DIR": "/cache/kkref/jit/triton", "VLLM_CACHE_DIR": "/cache/kkref/jit/vllm-r5o",
    "VLLM_CACHE_ROOT": "/cache/kkref/jit/vllm-r5o", "XDG_CACHE_HOME": "/cache/kkref/jit", "HF_HOME": "/cache/huggingface",
    # The weights are local: never reach for the hub.
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    # B12X kernels: no autotune, bounded compile workers; W4A8 tiny decode off (it skipped the SwiGLU clamp).
    "B12X_AUTOTUNE": "0", "B12X_BIND_COMPILE_WORKERS": "2", "B12X_STATE_COMPILE_WORKERS": "2",
    "B12X_WEIGHTS_COMPILE_WORKERS": "4", "B12X_DENSE_SPLITK_TURBO": "1", "B12X_W4A8_TINY_DECODE": "0",
    # CUDA / torch; MAX_JOBS=2 keeps runtime JIT from exhausting host memory.
    "CUDA_DEVICE_MAX_CONNECTIONS": "32", "CUTE_DSL_ARCH": "sm_121a", "MAX_JOBS": "2", "OMP_NUM_THREADS": "8",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,garbage_collection_threshold:0.6",
    "SAFETENSORS_FAST_GPU": "1", "PYTHONPATH": "/opt/spark3/candidate/vllm:/opt/spark3/candidate/b12x",
    # Model and engine switches of the promoted profile; the drafter cost table is per topology.
    "SPARK3_DISPLAY_CARVEOUT_WEIGHTS": "1", "SPARK3_DSPARK_COST_DIR": "/cache/kkref/dspark-costs/tp3-r6-20261005",
    "SPARK3_DSPARK_DEAD_ROWS_TAU": "0.2", "SPARK3_DSPARK_MAIN_PROJ_TP": "1", "SPARK3_DSPARK_VOCAB_PARALLEL": "1",
    "SPARK3_ENGRAM_ASYNC": "1", "VLLM_DS41_ATTENTION_COMPUTE": "auto", "VLLM_DS41_DRAFT_NVFP4_HEAD": "0",
    "VLLM_DS41_MARKOV_NVFP4": "0", "VLLM_DS41_ENGRAM_OVERLAP": "0", "VLLM_DS41_KERNEL_BACKEND": "tilelang",
    "VLLM_DS41_PACKED_BF16_LM_HEAD": "1",
    # vLLM runtime; the engine may take up to an hour on a cold JIT cache.
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1", "VLLM_DISABLE_PYNCCL": "0", "VLLM_ENABLE_PCIE_ALLREDUCE": "0",
    "VLLM_ENGINE_READY_TIMEOUT_S": "3600", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "900",
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1", "VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD": "1024",
    "VLLM_PLUGINS": "b12x_loader", "VLLM_USE_AOT_COMPILE": "1", "VLLM_USE_BREAKABLE_CUDAGRAPH": "0",
    "VLLM_USE_FLASHINFER_SAMPLER": "1", "VLLM_USE_MEGA_AOT_ARTIFACT": "1", "VLLM_USE_STANDALONE_COMPILE": "1",
    "VLLM_USE_V2_MODEL_RUNNER": "1",
}

# docker run options of every r6 profile (section 5.2; community.docker.docker_container names). No restart
# policy: after a guard kill the container stays stopped until an operator restarts the cluster.
_R6_RUN: Dict[str, Any] = {
    "network_mode": "host", "ipc_mode": "host",
    "device_requests": [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}],
    "devices": ["/dev/infiniband:/dev/infiniband:rwm"], "capabilities": ["IPC_LOCK"],
    "ulimits": ["memlock:-1:-1", "stack:67108864:67108864"], "security_opts": ["seccomp=unconfined", "label=disable"],
    "shm_size": "16g", "memory": "112g", "memory_swap": "112g",
    # The GPU's DRM card, needed by the display carve-out.
    "mounts": [{"type": "bind", "source": "/dev/dri/by-path/pci-000f:01:00.0-card", "target": "/dev/dri/card0"}],
    "device_cgroup_rules": ["c 226:* rw"], "restart_policy": "no",
}

# The kernel page flavours a profile can require and the page size each one boots with; the serve filters
# and the doctor both check a host against this one table.
FLAVOURS = {"4k": 4096, "64k": 65536}
REQUIRES_64K = {"kernel_flavour": "64k", "page_size": FLAVOURS["64k"], "memory_saver": True}
REQUIRES_4K = {"kernel_flavour": "4k", "page_size": FLAVOURS["4k"], "memory_saver": False}
IMAGE_R6 = "vllm-ds41f-kkref:04c30fa98e79-r6"
IMAGE_R6D = "vllm-ds41f-kkref:19f2c20ed4d6-r6d"
_TP4_CAPTURE = [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72, 80, 88, 96]


def _size_engine(args: Dict[str, Any], nodes: int) -> None:
    """The engine sizes every promoted profile couples to its node count: one tensor-parallel rank per node, and
    the drafter split the same way."""
    args["--tensor-parallel-size"] = args["--nnodes"] = nodes
    draft = args.get("--speculative-config")
    if isinstance(draft, dict) and "draft_tensor_parallel_size" in draft:
        draft["draft_tensor_parallel_size"] = nodes


def _profile(topology: str, nodes: int, image: str, requires: Mapping[str, Any], args: Mapping[str, Any],
             env: Mapping[str, str], summary: str) -> Dict[str, Any]:
    merged_args = copy.deepcopy(_R6_ARGS)
    for flag, value in args.items():
        if isinstance(value, dict) and isinstance(merged_args.get(flag), dict):
            merged_args[flag].update(copy.deepcopy(value))
        else:
            merged_args[flag] = copy.deepcopy(value)
    _size_engine(merged_args, nodes)
    return {"summary": summary, "topology": topology, "nodes": nodes, "image": image, "kernel_backend": "tilelang",
            "requires": dict(requires), "args": merged_args, "env": dict(_R6_ENV, **env), "run": copy.deepcopy(_R6_RUN)}


_TP4 = {"--max-model-len": 1048576, "--max-num-seqs": 16, "--max-num-batched-tokens": 8192,
        "--kv-cache-memory-bytes": 11274289152,                        # 10.5 GiB KV cache per rank
        "--max-cudagraph-capture-size": 96, "--compilation-config": {"cudagraph_capture_sizes": _TP4_CAPTURE},
        "--prefix-cache-retention-interval": 8192, "--long-prefill-token-threshold": 8192}
_TP4_ENV = {"SPARK3_DSPARK_COST_DIR": "/cache/kkref/dspark-costs/ring4-r6-20261005"}

PROFILES: Dict[str, Dict[str, Any]] = {
    "tp3-r6-64k": _profile("triangle", 3, IMAGE_R6, REQUIRES_64K, {}, {},
                           "TP3 triangle, r6, 64 KiB kernel with the Memory Saver: 512 Ki context"),
    # What an owner serves with when the 64 KiB trial fails: the stock kernel, a smaller KV cache and context.
    "tp3-r6-4k": _profile("triangle", 3, IMAGE_R6, REQUIRES_4K,
                          {"--max-model-len": 262144, "--kv-cache-memory-bytes": 2362232012}, {},
                          "TP3 triangle, r6, 4 KiB fallback kernel without the Memory Saver: 256 Ki context, 2.2 GiB KV"),
    "tp4-r6": _profile("ring", 4, IMAGE_R6, REQUIRES_64K, _TP4, _TP4_ENV,
                       "TP4 ring, r6, 64 KiB kernel with the Memory Saver: 1 Mi context, 16 sequences"),
    "tp4-r6d-1m": _profile("ring", 4, IMAGE_R6D, REQUIRES_64K, dict(_TP4, **{"--long-prefill-token-threshold": 8096}),
                           _TP4_ENV, "TP4 ring, the r6d delta (image, long-prefill threshold 8096): 1 Mi context, 16 sequences"),
}

# The profile a shape serves when the inventory names none: what the reference promoted for it.
DEFAULTS: Dict[Tuple[str, int], str] = {("triangle", 3): "tp3-r6-64k", ("ring", 4): "tp4-r6d-1m"}
NO_PROFILE: Dict[str, str] = {
    "pair": ("DeepSeek V4.1 Flash does not fit in two DGX Sparks (TP2 runs out of memory; a V4 TP2 recipe rebooted "
             "a host): serve needs a triangle (3 nodes) or a ring of 4"),
    "ring": "no promoted serving profile for a ring of more than 4 nodes (one TP group is qualified up to TP4)",
    "switched": "no serving profile is measured on a switch yet (the reference's switched fabric is unmeasured)",
}

# Site settings (spark_serve_<name>): the same for every profile; an inventory sets them as site overrides.
SETTINGS: Dict[str, Any] = {
    "launch_enabled": True,
    "container": "dsv41-karmic-kraken",
    "api_port": 8000, "master_port": 9999,
    "model_repo": _PINS.pin("spark_model_repo"), "model_revision": _PINS.pin("spark_model_revision"),
    "model_name": _PINS.pin("spark_model_name"),
    "cache_dir": "/var/lib/sparkfleet/serve-cache",
    # Memory guards (fail-closed, section 7). Never lower these: the TP3 head runs within a few GiB of them.
    "guard_startup_threshold": "5GiB", "guard_startup_interval": 0.25, "guard_startup_wait": 120,
    "guard_steady_threshold": "3GiB", "guard_steady_interval": 2,
}

# What spark_serve_overrides may change, and how: merged mappings, replaced values, or the shape (a topology
# and node count no profile was measured on, which the site then owns: the engine's sizes follow the count).
OVERRIDE_MERGE = ("args", "env", "run")
OVERRIDE_REPLACE = ("image", "kernel_backend", "requires")
OVERRIDE_SHAPE = "shape"
OVERRIDE_KEYS = OVERRIDE_MERGE + OVERRIDE_REPLACE + (OVERRIDE_SHAPE,)
SHAPE_TOPOLOGIES = ("pair", "triangle", "ring", "switched")


def default_name(topology: Any, nodes: int) -> Optional[str]:
    """The promoted profile of a shape, or None where nothing is promoted."""
    return DEFAULTS.get((str(topology), nodes))


def no_profile_reason(topology: Any, nodes: int) -> str:
    return NO_PROFILE.get(str(topology), f"no promoted serving profile for a {topology} of {nodes} nodes")


def override_errors(overrides: Any) -> List[Tuple[str, str]]:
    """(field, problem) for each key or value of spark_serve_overrides that cannot be applied."""
    if not isinstance(overrides, Mapping):
        return [("overrides", f"must be a mapping of profile field to value, got {type(overrides).__name__}")]
    errors = []
    for key, value in overrides.items():
        if key not in OVERRIDE_KEYS:
            errors.append((f"overrides.{key}", f"is not a profile field that can be overridden "
                                               f"(one of {', '.join(OVERRIDE_KEYS)})"))
        elif key in OVERRIDE_MERGE and not isinstance(value, Mapping):
            errors.append((f"overrides.{key}", f"must be a mapping merged over the profile's {key}, got {value!r}"))
        elif key == OVERRIDE_SHAPE:
            errors += _shape_errors(value)
    return errors


def _shape_errors(value: Any) -> List[Tuple[str, str]]:
    if (not isinstance(value, Mapping) or set(value) != {"topology", "nodes"}
            or value["topology"] not in SHAPE_TOPOLOGIES or isinstance(value["nodes"], bool)
            or not isinstance(value["nodes"], int) or value["nodes"] < 1):
        return [(f"overrides.{OVERRIDE_SHAPE}", f"must be {{topology: {'|'.join(SHAPE_TOPOLOGIES)}, nodes: <count>}}, "
                                                f"got {value!r}")]
    return []


def _reshape(profile: Dict[str, Any], shape: Mapping[str, Any]) -> None:
    """The topology and node count a site serves the profile on, with the engine sizes that follow the count
    (as every promoted profile couples them); an args override after this still wins, and is refused if it
    contradicts the count."""
    nodes = int(shape["nodes"])
    profile["topology"], profile["nodes"] = str(shape["topology"]), nodes
    _size_engine(profile["args"], nodes)


def _merge(base: Dict[str, Any], changes: Mapping[str, Any]) -> None:
    """Mappings merge one level (a null value removes the key), anything else replaces."""
    for key, value in changes.items():
        if value is None and key in base and not key.startswith("--"):
            del base[key]
        elif key.startswith("--") and value is False:
            base.pop(key, None)
        else:
            base[key] = copy.deepcopy(value)


def resolve(name: str, overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """The named profile with the site's overrides applied (KeyError for an unknown name).

    kernel_backend is applied before the argument and environment overrides, so an override that contradicts
    it stays visible to backend_errors instead of being silently rewritten.
    """
    profile = copy.deepcopy(PROFILES[name])
    profile["name"] = name
    backend = overrides.get("kernel_backend", profile["kernel_backend"])
    if backend in BACKENDS and backend != profile["kernel_backend"]:
        apply_backend(profile, backend)
    else:
        profile["kernel_backend"] = backend
    if OVERRIDE_SHAPE in overrides:
        _reshape(profile, overrides[OVERRIDE_SHAPE])
    for key in OVERRIDE_MERGE:
        _merge(profile[key], overrides.get(key) or {})
    for key in ("image", "requires"):
        if key in overrides:
            profile[key] = copy.deepcopy(overrides[key])
    return profile


def argv(args: Mapping[str, Any], site: Mapping[str, Any]) -> List[Any]:
    """The engine argument list (model directory first): a None value is a bare flag."""
    items: List[Any] = ["/models"]
    for flag, value in args.items():
        items.append(flag)
        if flag in SITE_ARGS:
            items.append(site[SITE_ARGS[flag]])
        elif value is not None:
            items.append(value)
    return items
