"""Command line (vLLM's `serve` flags) and the STANDIN_* behaviour model read from the environment.

Flags accepted, with where sparkfleet's reference says they are passed (image-model-serve.md):
  §5.3 TP3/TP4 serve args: MODEL (positional), --served-model-name, --host, --port, --tokenizer-mode, --dtype,
    --tensor-parallel-size, --load-format, --block-size, --enable-prefix-caching, --enable-chunked-prefill,
    --max-model-len, --max-num-seqs, --max-parallel-prefills, --gpu-memory-utilization,
    --max-num-batched-tokens, --kv-cache-memory-bytes, --max-cudagraph-capture-size, --generation-config,
    --engram-config, --attention-backend, --linear-backend, --moe-backend, --speculative-config,
    --jit-monitor-mode, --compilation-config, --prefix-cache-retention-interval,
    --long-prefill-token-threshold, --async-scheduling, --reasoning-parser, --tool-call-parser,
    --enable-auto-tool-choice, --distributed-executor-backend, --nnodes, --no-scheduler-reserve-full-isl,
    --no-enable-flashinfer-autotune, --limit-mm-per-prompt, --mm-processor-cache-gb
  §5.1 multi-node launch: --node-rank, --master-addr, --master-port, --headless
  §9.1 / hardware-and-fabric.md §8 ring transports: --disable-custom-all-reduce
  bench-method.md §3: --enable-prompt-tokens-details
  common vLLM flags from the stand-in contract: --pipeline-parallel-size, --data-parallel-size,
    --enable-expert-parallel, --kv-cache-dtype, --no-enable-prefix-caching, --trust-remote-code,
    --enforce-eager, --quantization, --swap-space, --disable-log-requests, --uvicorn-log-level, --seed,
    --hf-overrides
Anything else is rejected with exit status 2, as vLLM's argparse does.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import VERSION


def json_arg(text: str) -> Any:
    """argparse type for JSON-valued flags."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON {text!r}: {exc}") from exc


def bool_flag(parser: argparse.ArgumentParser, name: str, default: Optional[bool] = None) -> None:
    """A `--x/--no-x` pair like vLLM's BooleanOptionalAction flags."""
    parser.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=default)


INT_FLAGS = (
    ("port", 8000), ("tensor-parallel-size", 1), ("pipeline-parallel-size", 1), ("data-parallel-size", 1),
    ("nnodes", 1), ("node-rank", 0), ("master-port", 29501), ("max-model-len", None), ("max-num-seqs", 256),
    ("max-num-batched-tokens", None), ("block-size", 16), ("seed", 0), ("max-parallel-prefills", None),
    ("kv-cache-memory-bytes", None), ("max-cudagraph-capture-size", None),
    ("prefix-cache-retention-interval", None), ("long-prefill-token-threshold", None),
)
FLOAT_FLAGS = (("gpu-memory-utilization", 0.9), ("swap-space", 4.0), ("mm-processor-cache-gb", 4.0))
STR_FLAGS = (
    ("host", "0.0.0.0"), ("master-addr", "127.0.0.1"), ("distributed-executor-backend", None),
    ("kv-cache-dtype", "auto"), ("reasoning-parser", None), ("tool-call-parser", None), ("load-format", "auto"),
    ("dtype", "auto"), ("quantization", None), ("uvicorn-log-level", "info"), ("tokenizer-mode", "auto"),
    ("generation-config", "auto"), ("attention-backend", None), ("linear-backend", None), ("moe-backend", None),
    ("jit-monitor-mode", None), ("api-key", None),
)
JSON_FLAGS = (
    "speculative-config", "compilation-config", "hf-overrides", "engram-config", "limit-mm-per-prompt",
)
STORE_TRUE_FLAGS = (
    "headless", "trust-remote-code", "disable-custom-all-reduce", "enforce-eager", "disable-log-requests",
    "enable-auto-tool-choice", "enable-expert-parallel", "enable-prompt-tokens-details",
)
BOOL_FLAGS = (
    ("enable-prefix-caching", True), ("enable-chunked-prefill", None), ("async-scheduling", None),
    ("scheduler-reserve-full-isl", None), ("enable-flashinfer-autotune", None),
)


def serve_parser() -> argparse.ArgumentParser:
    """The `serve` sub-command's flags; anything else is an argparse error (exit 2)."""
    parser = argparse.ArgumentParser(prog="vllm serve", usage="vllm serve MODEL [options]", allow_abbrev=False,
                                     description="stand-in vLLM server (test double)")
    parser.add_argument("model", help="model path or name (only echoed back)")
    parser.add_argument("--served-model-name", nargs="+", default=None)
    for name, default in INT_FLAGS:
        parser.add_argument(f"--{name}", type=int, default=default)
    for name, fdefault in FLOAT_FLAGS:
        parser.add_argument(f"--{name}", type=float, default=fdefault)
    for name, sdefault in STR_FLAGS:
        parser.add_argument(f"--{name}", default=sdefault)
    for name in JSON_FLAGS:
        parser.add_argument(f"--{name}", type=json_arg, default=None)
    for name in STORE_TRUE_FLAGS:
        parser.add_argument(f"--{name}", action="store_true")
    for name, bdefault in BOOL_FLAGS:
        bool_flag(parser, name, bdefault)
    return parser


def normalise_argv(argv: List[str]) -> List[str]:
    """vLLM accepts `--flag_name` for `--flag-name`; do the same before argparse sees it."""
    out: List[str] = []
    for arg in argv:
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            arg = "--" + name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def top_parser() -> argparse.ArgumentParser:
    """`vllm [--version] serve ...`."""
    parser = argparse.ArgumentParser(prog="vllm", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=VERSION)
    parser.add_argument("command", choices=["serve"])
    return parser


def parse_cli(argv: List[str]) -> argparse.Namespace:
    """Parse `serve MODEL [flags]`; exits 2 on unknown flags or bad values like vLLM."""
    argv = normalise_argv(argv)
    if not argv or argv[0] != "serve":
        top_parser().parse_args(argv[:1] or ["--help"])
    args = serve_parser().parse_args(argv[1:])
    validate_topology(args)
    return args


def validate_topology(args: argparse.Namespace) -> None:
    """Reject the rank layouts vLLM rejects, with argparse's exit status 2."""
    error = topology_error(args)
    if error:
        serve_parser().error(error)


def topology_error(args: argparse.Namespace) -> Optional[str]:
    """The first problem with the multi-node arguments, or None."""
    world = args.tensor_parallel_size * args.pipeline_parallel_size
    checks: List[Tuple[Callable[[], bool], str]] = [
        (lambda: args.nnodes < 1, f"--nnodes must be >= 1, got {args.nnodes}"),
        (lambda: args.tensor_parallel_size < 1, "--tensor-parallel-size must be >= 1"),
        (lambda: args.pipeline_parallel_size < 1, "--pipeline-parallel-size must be >= 1"),
        (lambda: not 0 <= args.node_rank < args.nnodes,
         f"--node-rank {args.node_rank} is out of range for --nnodes {args.nnodes}"),
        (lambda: world % args.nnodes != 0,
         f"world size {world} (tensor x pipeline parallel) is not divisible by --nnodes {args.nnodes}"),
        (lambda: args.headless and args.node_rank == 0, "--headless is only valid with --node-rank >= 1"),
        (lambda: args.node_rank > 0 and not args.headless, f"--node-rank {args.node_rank} requires --headless"),
        (lambda: args.nnodes > 1 and args.distributed_executor_backend not in (None, "mp"),
         "multi-node without Ray needs --distributed-executor-backend mp"),
        (lambda: not 0 < args.master_port < 65536, f"--master-port {args.master_port} is not a TCP port"),
        (lambda: not 0 <= args.port < 65536, f"--port {args.port} is not a TCP port"),
        (lambda: args.speculative_config is not None and not isinstance(args.speculative_config, dict),
         "--speculative-config must be a JSON object"),
    ]
    for failed, message in checks:
        if failed():
            return message
    return None


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    """A float STANDIN_* variable; a bad value is a startup error naming the variable."""
    raw = env.get(name, "")
    if raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise SystemExit(f"standin: {name}={raw!r} is not a number") from exc


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    """An integer STANDIN_* variable."""
    return int(env_float(env, name, float(default)))


@dataclass(frozen=True)
class Behaviour:
    """The timing and behaviour model; every field comes from a STANDIN_* variable."""

    startup_s: float
    prefill_tps: float
    ttft_base_s: float
    itl_s: float
    itl_per_stream_s: float
    decode_tick_s: float
    trace_writes: bool
    spec_accept: Optional[float]
    reasoning_field: str
    reasoning_tokens: int
    memory_mb: int
    join_timeout_s: float
    quality_broken: bool
    kv_tokens: Optional[int]
    heartbeat_s: float
    heartbeat_timeout_s: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Behaviour":
        field = env.get("STANDIN_REASONING_FIELD", "reasoning_content") or "reasoning_content"
        if field not in ("reasoning_content", "reasoning"):
            raise SystemExit(f"standin: STANDIN_REASONING_FIELD={field!r} must be reasoning_content or reasoning")
        accept_raw = env.get("STANDIN_SPEC_ACCEPT", "")
        kv_raw = env.get("STANDIN_KV_TOKENS", "")
        return cls(
            startup_s=env_float(env, "STANDIN_STARTUP_S", 2.0),
            prefill_tps=max(env_float(env, "STANDIN_PREFILL_TPS", 4000.0), 1e-9),
            ttft_base_s=env_float(env, "STANDIN_TTFT_BASE_S", 0.005),
            itl_s=env_float(env, "STANDIN_ITL_S", 0.02),
            itl_per_stream_s=env_float(env, "STANDIN_ITL_PER_STREAM_S", 0.0),
            decode_tick_s=max(env_float(env, "STANDIN_DECODE_TICK_S", 0.0), 0.0),
            trace_writes=env.get("STANDIN_TRACE_WRITES", "0").strip() in ("1", "true", "yes"),
            spec_accept=None if accept_raw.strip() == "" else env_float(env, "STANDIN_SPEC_ACCEPT", 0.0),
            reasoning_field=field,
            reasoning_tokens=env_int(env, "STANDIN_REASONING_TOKENS", 32),
            memory_mb=env_int(env, "STANDIN_MEMORY_MB", 0),
            join_timeout_s=env_float(env, "STANDIN_JOIN_TIMEOUT_S", 120.0),
            quality_broken=env.get("STANDIN_QUALITY_BROKEN", "0").strip() in ("1", "true", "yes"),
            kv_tokens=None if kv_raw.strip() == "" else env_int(env, "STANDIN_KV_TOKENS", 0),
            heartbeat_s=env_float(env, "STANDIN_HEARTBEAT_S", 0.5),
            heartbeat_timeout_s=env_float(env, "STANDIN_HEARTBEAT_TIMEOUT_S", 2.0),
        )


DEFAULT_MAX_MODEL_LEN = 65536


@dataclass(frozen=True)
class ServeConfig:
    """What the engine needs from the command line, resolved once."""

    model: str
    served_names: List[str]
    max_model_len: int
    max_num_seqs: int
    block_size: int
    prefix_caching: bool
    spec_tokens: int
    spec_accept: float
    kv_tokens: int


def spec_settings(spec: Optional[Dict[str, Any]], override: Optional[float]) -> Tuple[int, float]:
    """(k, mean accepted per step): 0.6·k unless STANDIN_SPEC_ACCEPT says otherwise, clamped to [0, k]."""
    k = int((spec or {}).get("num_speculative_tokens", 0) or 0)
    if k <= 0:
        return 0, 0.0
    accept = 0.6 * k if override is None else override
    return k, min(max(accept, 0.0), float(k))


def serve_config(args: argparse.Namespace, beh: Behaviour) -> ServeConfig:
    """Resolve flags plus behaviour into the engine's configuration."""
    max_len = args.max_model_len or DEFAULT_MAX_MODEL_LEN
    k, accept = spec_settings(args.speculative_config, beh.spec_accept)
    return ServeConfig(
        model=args.model,
        served_names=list(args.served_model_name or [args.model]),
        max_model_len=max_len,
        max_num_seqs=args.max_num_seqs,
        block_size=args.block_size,
        prefix_caching=bool(args.enable_prefix_caching),
        spec_tokens=k,
        spec_accept=accept,
        kv_tokens=max(beh.kv_tokens or 4 * max_len, max_len),
    )

