#!/usr/bin/env python3
"""Benchmark (not a test): our bench client against llama-benchy, both against the stand-in server with a
known truth (TTFT = base + prompt/prefill rate, one token every ITL per stream). `make bench-client`.

Prints, per stream count: median TTFT error (ms), tok/s error (%) and client CPU seconds for both tools,
and the ratios; then 256 streams at 5 ms between tokens with our client alone. The last line printed is one
JSON object with every figure. Both clients run as their own processes; CPU is their whole process
(start-up included), taken from RUSAGE_CHILDREN around each run.

llama-benchy runs offline: a word-level tokenizer built locally with `tokenizers` (in its venv) is passed
with --tokenizer, and its book cache (~/.cache/llama-benchy/<md5(url)>.txt, HOME pointed into the work
directory) is pre-filled with local text, so neither the hub nor Gutenberg is contacted.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Run as a script: its own folder for conftest (the stand-in), tests/ for the shared testlib conftest imports.
sys.path[:0] = [str(HERE), str(HERE.parent)]

MODEL = "sparkfleet/standin-flash"
BOOK_URL = "http://127.0.0.1:9/sparkfleet-offline-book.txt"  # never fetched: the cache file is pre-filled
TTFT_BASE = 0.1
PREFILL_TPS = 1.0e7
PP, TG = 128, 256

TOKENIZER_SCRIPT = r"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
text = open(sys.argv[1], encoding="utf-8").read()
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
tok.train_from_iterator(text.splitlines(), trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
tok.save(sys.argv[2])
"""


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _book_text() -> str:
    """Local 'real text' for llama-benchy's corpus (the same source our prefill suite uses)."""
    import ansible.module_utils  # noqa: F401  (module_utils path set up below)
    from ansible.module_utils.spark_bench_prompts import source_text

    return source_text(400_000, 0)


def prepare_benchy(work: Path, venv: Path) -> dict[str, str]:
    """Offline tokenizer + pre-filled book cache; returns the environment for llama-benchy."""
    home = work / "home"
    cache = home / ".cache" / "llama-benchy"
    cache.mkdir(parents=True, exist_ok=True)
    book = cache / f"{hashlib.md5(BOOK_URL.encode()).hexdigest()}.txt"
    if not book.is_file():
        book.write_text(_book_text(), encoding="utf-8")
    tok_dir = work / "tokenizer"
    tok_dir.mkdir(exist_ok=True)
    if not (tok_dir / "tokenizer.json").is_file():
        subprocess.run([str(venv / "bin" / "python"), "-c", TOKENIZER_SCRIPT, str(book), str(tok_dir / "tokenizer.json")],
                       check=True, timeout=300)
    return {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZER_DIR": str(tok_dir)}


# ------------------------------------------------------------------ our client, in its own process

async def _measure(url: str, streams: int, runs: int, coalesce: bool, tg: int) -> dict[str, Any]:
    import random

    from ansible.module_utils.spark_bench_client import BenchClient
    from ansible.module_utils.spark_bench_prompts import filler_text, nonce_prefix
    from ansible.module_utils.spark_bench_suites import decode_window_tps

    rng = random.Random(0)
    ttfts: list[float] = []
    per_stream: list[float] = []
    windows: list[float] = []
    prompt_tokens: list[int] = []
    completion: list[int] = []
    failed = 0

    def body() -> dict[str, Any]:
        return {"model": MODEL, "messages": [{"role": "user", "content": nonce_prefix(rng) + filler_text(PP - 12)}],
                "stream": True, "stream_options": {"include_usage": True}, "temperature": 0,
                "max_tokens": tg, "min_tokens": tg, "ignore_eos": True}

    async with BenchClient(url, timeout_s=600, max_connections=streams + 4) as client:
        for run in range(runs + 1):  # run 0 is the discarded warm-up, as llama-benchy's
            results = await asyncio.gather(*(client.stream("/v1/chat/completions", body(), coalesce=coalesce) for _ in range(streams)))
            failed += sum(not r.ok for r in results)
            completion += [r.completion_tokens for r in results]
            if run == 0 or any(not r.ok for r in results):
                continue
            ttfts += [r.ttft for r in results if r.ttft is not None]
            per_stream += [r.decode_tps for r in results if r.decode_tps]
            prompt_tokens += [r.prompt_tokens for r in results]
            window = decode_window_tps(results)
            if window:
                windows.append(window)
    return {"ttft_s": ttfts, "per_stream_tps": per_stream, "window_tps": windows, "prompt_tokens": prompt_tokens,
            "completion_tokens": completion, "failed": failed}


def run_ours_child(args: argparse.Namespace) -> None:
    import ansible.module_utils

    ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
    import ansible.module_utils.spark_bench_suites  # noqa: F401  (start-up cost measured apart)

    usage = resource.getrusage(resource.RUSAGE_SELF)
    start_cpu = usage.ru_utime + usage.ru_stime
    data = asyncio.run(_measure(args.url, args.streams, args.runs, args.streams >= args.coalesce_from, args.tg))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    data["cpu_self_s"] = usage.ru_utime + usage.ru_stime
    data["start_cpu_s"] = start_cpu
    Path(args.out).write_text(json.dumps(data))


# ------------------------------------------------------------------ the comparison

def _run_ours(url: str, streams: int, runs: int, work: Path, tg: int) -> tuple[dict[str, Any], float]:
    out = work / f"ours-c{streams}.json"
    cpu0 = _cpu_children()
    subprocess.run([sys.executable, __file__, "ours", "--url", url, "--streams", str(streams), "--runs", str(runs),
                    "--tg", str(tg), "--out", str(out)], check=True, timeout=1800)
    return json.loads(out.read_text()), _cpu_children() - cpu0


def _benchy(url: str, streams: int, runs: int, work: Path, venv: Path, env: dict[str, str]) -> tuple[dict[str, Any], float]:
    out = work / f"benchy-c{streams}.json"
    cmd = [str(venv / "bin" / "llama-benchy"), "--base-url", f"{url}/v1", "--model", MODEL,
           "--tokenizer", env["TOKENIZER_DIR"], "--book-url", BOOK_URL, "--pp", str(PP), "--tg", str(TG), "--exact-tg",
           "--runs", str(runs), "--concurrency", str(streams), "--latency-mode", "none", "--skip-coherence",
           "--no-cache", "--format", "json", "--save-result", str(out)]
    cpu0 = _cpu_children()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    cpu = _cpu_children() - cpu0
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"llama-benchy failed ({proc.returncode}): {proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    data = json.loads(out.read_text())
    run = [b for b in data["benchmarks"] if b["response_size"] == TG and b.get("e2e_ttft")][0]
    return run, cpu


def _server_ttft(url: str) -> tuple[float, float]:
    """(sum, count) of the server's own TTFT histogram (first token scheduled - request arrival)."""
    import urllib.request

    from ansible.module_utils.spark_bench_metrics import parse_prometheus

    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        snap = parse_prometheus(resp.read().decode())
    return snap.get("vllm:time_to_first_token_seconds_sum", 0.0), snap.get("vllm:time_to_first_token_seconds_count", 0.0)


def _server_mean_ms(before: tuple[float, float], after: tuple[float, float]) -> float | None:
    count = after[1] - before[1]
    return 1000 * (after[0] - before[0]) / count if count else None


def _pct(measured: float, truth: float) -> float:
    return 100.0 * (measured - truth) / truth


def compare_one(streams: int, runs: int, itl: float, work: Path, venv: Path | None,
                env: dict[str, str] | None, tg: int = TG) -> dict[str, Any]:
    from conftest import Standin

    server = Standin({"STANDIN_ITL_S": str(itl), "STANDIN_TTFT_BASE_S": str(TTFT_BASE),
                      "STANDIN_PREFILL_TPS": str(PREFILL_TPS)}, ("--max-num-seqs", "512"))
    try:
        s0 = _server_ttft(server.url)
        ours, ours_cpu = _run_ours(server.url, streams, runs, work, tg)
        s1 = _server_ttft(server.url)
        row: dict[str, Any] = {"streams": streams, "itl_ms": 1000 * itl, "tg": tg}
        truth_ttft = TTFT_BASE + statistics.mean(ours["prompt_tokens"]) / PREFILL_TPS
        truth_tps = streams / itl
        rates = ours["window_tps"] if streams > 1 else ours["per_stream_tps"]
        # No all-streams window means the server's first tokens spread past its earliest last token:
        # the server did not keep its schedule, so there is no truth to measure against.
        ours_tps = statistics.mean(rates) if rates else None
        row["ours"] = {"ttft_err_ms": 1000 * (statistics.median(ours["ttft_s"]) - truth_ttft),
                       "tps_err_pct": _pct(ours_tps, truth_tps) if ours_tps else None, "tps": ours_tps,
                       "cpu_s": ours_cpu, "tokens": sum(ours["completion_tokens"]),
                       "failed": ours["failed"], "start_cpu_s": ours["start_cpu_s"],
                       "server_ttft_mean_ms": _server_mean_ms(s0, s1)}
        if venv is not None and env is not None:
            benchy, benchy_cpu = _benchy(server.url, streams, runs, work, venv, env)
            s2 = _server_ttft(server.url)
            b_ttft = statistics.median(benchy["e2e_ttft"]["values"]) / 1000.0
            b_tps = benchy["tg_throughput"]["mean"]
            row["llama_benchy"] = {"ttft_err_ms": 1000 * (b_ttft - truth_ttft), "tps_err_pct": _pct(b_tps, truth_tps),
                                   "tps": b_tps, "cpu_s": benchy_cpu, "server_ttft_mean_ms": _server_mean_ms(s1, s2)}
            row["cpu_ratio_ours_over_benchy"] = ours_cpu / benchy_cpu if benchy_cpu else None
        row["truth"] = {"ttft_ms": 1000 * truth_ttft, "tps": truth_tps}
        return row
    finally:
        server.stop()


def _line(name: str, fig: dict[str, Any]) -> str:
    server = fig.get("server_ttft_mean_ms")
    rate = ("no all-streams decode window (server behind its schedule)" if fig["tps"] is None else
            f"tok/s {fig['tps']:9.1f} (err {fig['tps_err_pct']:+6.2f} %)")
    per_token = f", {1e6 * fig['cpu_s'] / fig['tokens']:.0f} us/token" if fig.get("tokens") else ""
    return (f"  {name:<13} TTFT err {fig['ttft_err_ms']:+8.2f} ms (server's own mean TTFT "
            f"{'n/a' if server is None else f'{server:.2f}'} ms)   {rate}   client CPU {fig['cpu_s']:6.2f} s{per_token}")


def main_compare(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    venv = Path(args.benchy_venv)
    env = prepare_benchy(work, venv)
    result: dict[str, Any] = {"truth": {"ttft_base_s": TTFT_BASE, "itl_s": args.itl, "pp": PP, "tg": TG},
                              "runs": args.runs, "rows": []}
    result["load_average_at_start"] = os.getloadavg()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (timing figures degrade with load)")
    for streams in [int(s) for s in args.streams.split(",")]:
        t0 = time.perf_counter()
        row = compare_one(streams, args.runs, args.itl, work, venv, env)
        result["rows"].append(row)
        print(f"streams {streams} (truth TTFT {row['truth']['ttft_ms']:.2f} ms, {row['truth']['tps']:.0f} tok/s; "
              f"{time.perf_counter() - t0:.0f} s)")
        print(_line("ours", row["ours"]))
        print(_line("llama-benchy", row["llama_benchy"]))
        print(f"  ratios        CPU ours/llama-benchy {row['cpu_ratio_ours_over_benchy']:.3f}   |TTFT err| "
              f"{abs(row['ours']['ttft_err_ms']):.2f} vs {abs(row['llama_benchy']['ttft_err_ms']):.2f} ms", flush=True)
    if args.stress_streams:
        row = compare_one(args.stress_streams, args.runs, args.stress_itl, work, None, None, args.stress_tokens)
        result["stress"] = row
        print(f"stress: ours, {args.stress_streams} streams x {args.stress_tokens} tokens at {1000 * args.stress_itl:g} ms "
              f"(truth {row['truth']['tps']:.0f} tok/s)")
        print(_line("ours", row["ours"]))
    rows = result["rows"]
    result["load_average_at_end"] = os.getloadavg()
    result["summary"] = {
        "ours_median_ttft_err_ms": statistics.median(abs(r["ours"]["ttft_err_ms"]) for r in rows),
        "ours_max_tps_err_pct": max(abs(r["ours"]["tps_err_pct"]) for r in rows),
        "benchy_median_ttft_err_ms": statistics.median(abs(r["llama_benchy"]["ttft_err_ms"]) for r in rows),
        "benchy_max_tps_err_pct": max(abs(r["llama_benchy"]["tps_err_pct"]) for r in rows),
        "cpu_ratio_ours_over_benchy": {r["streams"]: r["cpu_ratio_ours_over_benchy"] for r in rows},
        "stress_tps_err_pct": result.get("stress", {}).get("ours", {}).get("tps_err_pct"),
    }
    print(json.dumps(result, separators=(",", ":")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("--benchy-venv", required=True)
    cmp_.add_argument("--work", required=True)
    cmp_.add_argument("--streams", default="1,8,64")
    cmp_.add_argument("--runs", type=int, default=3)
    cmp_.add_argument("--itl", type=float, default=0.02)
    cmp_.add_argument("--stress-streams", type=int, default=256)
    cmp_.add_argument("--stress-itl", type=float, default=0.005)
    cmp_.add_argument("--stress-tokens", type=int, default=1024,
                      help="output tokens per stream in the stress run (256 prefills must end inside the decode)")
    ours = sub.add_parser("ours")
    ours.add_argument("--url", required=True)
    ours.add_argument("--streams", type=int, required=True)
    ours.add_argument("--runs", type=int, required=True)
    ours.add_argument("--out", required=True)
    ours.add_argument("--tg", type=int, default=TG)
    ours.add_argument("--coalesce-from", type=int, default=32, help="streams from which the decode phase is drained")
    args = parser.parse_args()
    if args.cmd == "ours":
        run_ours_child(args)
    else:
        import ansible.module_utils

        ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
        main_compare(args)


if __name__ == "__main__":
    main()
