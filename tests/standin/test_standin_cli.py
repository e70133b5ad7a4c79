"""Command line: vLLM's flags are accepted, anything else is an argparse error (exit 2)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from standin_client import LAUNCHER, STANDIN_DIR

from standin_vllm.config import parse_cli, serve_config, Behaviour

# The promoted TP3 64K profile's serve arguments (reference image-model-serve.md §5.3) plus the rank flags.
TP3_PROFILE = [
    "serve", "/models", "--served-model-name", "deepseek-v4.1-flash", "--host", "0.0.0.0", "--port", "8000",
    "--tokenizer-mode", "deepseek_v41", "--dtype", "bfloat16", "--tensor-parallel-size", "3",
    "--load-format", "b12x", "--block-size", "256", "--enable-prefix-caching", "--enable-chunked-prefill",
    "--max-model-len", "524288", "--max-num-seqs", "8", "--max-parallel-prefills", "1",
    "--gpu-memory-utilization", "0.82", "--max-num-batched-tokens", "4096", "--kv-cache-memory-bytes",
    "3758096384", "--max-cudagraph-capture-size", "48", "--generation-config", "vllm", "--engram-config",
    '{"table_memory":"disk","disk_resident_scales":false,"projection_tp":true}', "--attention-backend", "TILELANG",
    "--linear-backend", "tilelang", "--moe-backend", "tilelang", "--speculative-config",
    json.dumps({"method": "dspark", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 3,
                "attention_backend": "TILELANG", "draft_sample_method": "greedy",
                "rejection_sample_method": "block", "enable_adaptive_verification": True,
                "adaptive_verification_cost_scale": 2.0}),
    "--jit-monitor-mode", "warn", "--compilation-config",
    json.dumps({"cudagraph_mode": "FULL_AND_PIECEWISE", "custom_ops": ["all"],
                "cudagraph_capture_sizes": [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 40, 48]}),
    "--prefix-cache-retention-interval", "512", "--long-prefill-token-threshold", "4096", "--async-scheduling",
    "--reasoning-parser", "deepseek_v41", "--tool-call-parser", "deepseek_v41", "--enable-auto-tool-choice",
    "--distributed-executor-backend", "mp", "--nnodes", "3", "--no-scheduler-reserve-full-isl",
    "--no-enable-flashinfer-autotune", "--limit-mm-per-prompt", '{"image":4}', "--mm-processor-cache-gb", "0",
    "--disable-custom-all-reduce", "--node-rank", "2", "--master-addr", "10.0.1.71", "--master-port", "9999",
    "--headless",
]
COMMON = ["--trust-remote-code", "--enforce-eager", "--quantization", "fp8", "--swap-space", "4",
          "--disable-log-requests", "--uvicorn-log-level", "warning", "--seed", "7", "--kv-cache-dtype", "fp8",
          "--no-enable-prefix-caching", "--hf-overrides", "{}", "--pipeline-parallel-size", "1"]


def run_launcher(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LAUNCHER), *argv], capture_output=True, text=True, timeout=30)


def test_tp3_profile_arguments_are_all_accepted() -> None:
    args = parse_cli(list(TP3_PROFILE))
    cfg = serve_config(args, Behaviour.from_env({}))
    assert (args.tensor_parallel_size, args.nnodes, args.node_rank, args.headless) == (3, 3, 2, True)
    assert cfg.max_model_len == 524288 and cfg.block_size == 256 and cfg.max_num_seqs == 8
    assert cfg.spec_tokens == 5 and cfg.spec_accept == pytest.approx(3.0)
    assert args.engram_config == {"table_memory": "disk", "disk_resident_scales": False, "projection_tp": True}


def test_common_flags_and_underscore_spelling_are_accepted() -> None:
    args = parse_cli(["serve", "m", *COMMON, "--max_num_seqs=4"])
    assert args.enable_prefix_caching is False and args.max_num_seqs == 4 and args.seed == 7


@pytest.mark.parametrize("argv, message", [
    (["serve", "m", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["serve", "m", "--port", "eighty"], "invalid int value: 'eighty'"),
    (["serve", "m", "--max-model-len", "1.5"], "invalid int value: '1.5'"),
    (["serve", "m", "--speculative-config", "{bad"], "invalid JSON"),
    (["serve", "m", "--nnodes", "3", "--tensor-parallel-size", "3", "--node-rank", "3", "--headless"],
     "--node-rank 3 is out of range for --nnodes 3"),
    (["serve", "m", "--nnodes", "3", "--tensor-parallel-size", "4"], "not divisible by --nnodes 3"),
    (["serve", "m", "--nnodes", "2", "--tensor-parallel-size", "2", "--headless"],
     "--headless is only valid with --node-rank >= 1"),
    (["serve", "m", "--nnodes", "2", "--tensor-parallel-size", "2", "--node-rank", "1"],
     "--node-rank 1 requires --headless"),
    (["serve"], "the following arguments are required: model"),
])
def test_bad_command_lines_exit_2(argv: list, message: str) -> None:
    proc = run_launcher(*argv)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""


def test_vllm_shim_forwards_argv() -> None:
    proc = subprocess.run([str(STANDIN_DIR / "vllm"), "serve", "m", "--bogus"], capture_output=True, text=True,
                          timeout=30, env={"PATH": "/usr/bin:/bin", "STANDIN_PYTHON": sys.executable})
    assert proc.returncode == 2 and "unrecognized arguments: --bogus" in proc.stderr
    version = subprocess.run([str(STANDIN_DIR / "vllm"), "--version"], capture_output=True, text=True, timeout=30,
                             env={"PATH": "/usr/bin:/bin", "STANDIN_PYTHON": sys.executable})
    assert version.returncode == 0 and "standin" in version.stdout


def test_vllm_shim_works_through_a_symlink_on_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "vllm").symlink_to(STANDIN_DIR / "vllm")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "STANDIN_PYTHON": sys.executable}
    proc = subprocess.run(["vllm", "serve", "m", "--nnodes", "2", "--tensor-parallel-size", "2", "--headless"],
                          capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == 2 and "--headless is only valid with --node-rank >= 1" in proc.stderr
