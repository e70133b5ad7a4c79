#!/usr/bin/env python3
"""Benchmark (not a test): our bench client against llama-benchy, both against the stand-in server with a
known truth (TTFT = base + prompt/prefill rate, one token every ITL per stream). `make bench-client`.

TTFT error is measured against what the server really did: the stand-in's /standin/trace gives, per
request, when its handler started and when it began writing the first token, on the CLOCK_MONOTONIC both
processes read. Error = client TTFT - server TTFT (first write - handler start), the part a client adds;
the error against the nominal truth (which also holds the server's own lateness on a loaded box) is printed
beside it. Our requests are matched to the trace by response id; llama-benchy's by time window (only its
full-length requests). Rates: our decode window is compared with the same window computed from the
server's write times of the same requests, and with the nominal rate (streams / ITL).

Prints, per stream count, both tools' errors and client CPU seconds and the ratios; then 256 streams at
5 ms between tokens with our client alone (the stand-in groups decode writes per STANDIN_DECODE_TICK_S, 50 ms, so
one Python process can emit 51,200 tokens/s; first token alone, last on its due time). The last line
printed is one JSON object with every figure. Both clients run as their own processes; CPU is their whole
process (start-up included), taken from RUSAGE_CHILDREN around each run.

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
# Run as a script (make bench-client): its own folder comes first on the path for conftest (the stand-in), and the
# target puts tests/ (testlib) and the checkout's sparkfleet_bench package on PYTHONPATH, which its child runs inherit.

MODEL = "sparkfleet/standin-flash"
BOOK_URL = "http://127.0.0.1:9/sparkfleet-offline-book.txt"  # never fetched: the cache file is pre-filled
TTFT_BASE = 0.1
PREFILL_TPS = 1.0e7
PP, TG = 128, 256
DEFAULT_POINTS = "1,8,16x5,64"  # 16 x 5 ms is the issue's point; 1, 8, 64 at 20 ms as before

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
    from sparkfleet_bench.prompts import source_text

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

def cli_argv(url: str, streams: int, runs: int, tg: int, out_dir: str) -> list[str]:
    """The bench CLI's options for one point the way llama-benchy measures it: one case, one stream count,
    one discarded warm-up and then exactly `runs` measured samples of `tg` forced tokens."""
    return ["--url", url, "--model", MODEL, "--suites", "decode", "--cases", "prose", "--concurrency", str(streams),
            "--min-samples", str(runs), "--max-samples", str(runs), "--max-tokens", str(tg), "--output-dir", out_dir]


def run_ours_child(args: argparse.Namespace) -> None:
    """The whole CLI run (start-up, suites, reports and plots) in this process; the only addition is a list of
    the requests it streamed, kept so they can be matched to the server's trace by response id."""
    from sparkfleet_bench.cli import main as cli_main
    from sparkfleet_bench.client import BenchClient

    streamed: list[Any] = []
    original = BenchClient.stream

    async def recording(self: BenchClient, path: str, body: dict[str, Any], *rest: Any, **kw: Any) -> Any:
        result = await original(self, path, body, *rest, **kw)
        streamed.append(result)
        return result

    BenchClient.stream = recording  # type: ignore[method-assign]
    status = cli_main(cli_argv(args.url, args.streams, args.runs, args.tg, args.report_dir))
    Path(args.out).write_text(json.dumps({"status": status, "requests": [
        {"id": r.request_id, "t_send": r.t_send, "t_first": r.t_first_token, "t_last": r.t_last_token,
         "tokens": r.completion_tokens, "prompt_tokens": r.prompt_tokens, "ok": r.ok} for r in streamed]}))


def sample_groups(requests: list[dict[str, Any]], streams: int, runs: int) -> list[list[dict[str, Any]]]:
    """The CLI's measured samples, in the order it streamed them: the first `streams` requests are the
    warm-up, then one group per sample. A sample the CLI discarded and repeated would shift the groups,
    so anything but exactly runs + 1 samples is refused rather than guessed at."""
    if len(requests) != (runs + 1) * streams:
        raise RuntimeError(f"the CLI streamed {len(requests)} requests, expected {(runs + 1) * streams} "
                           f"({runs} samples + warm-up of {streams}); a discarded sample? see its bench.json")
    return [requests[i:i + streams] for i in range(streams, len(requests), streams)]


def _cli_rates(report: dict[str, Any], streams: int) -> list[float]:
    """Per sample, the rate the CLI reported: per-stream decode rate at one stream, else the decode window."""
    point = report["suites"]["decode"]["points"][0]
    return point["metrics"]["per_stream_tps" if streams == 1 else "decode_window_tps"]["values"]


# ------------------------------------------------------------------ the comparison

def _run_ours(url: str, streams: int, runs: int, work: Path, tg: int) -> tuple[dict[str, Any], float]:
    out, report_dir = work / f"ours-c{streams}.json", work / f"ours-c{streams}"
    cpu0 = _cpu_children()
    with open(work / f"ours-c{streams}.log", "w", encoding="utf-8") as log:
        subprocess.run([sys.executable, __file__, "ours", "--url", url, "--streams", str(streams), "--runs", str(runs),
                        "--tg", str(tg), "--out", str(out), "--report-dir", str(report_dir)],
                       check=True, timeout=1800, stdout=log, stderr=subprocess.STDOUT)
    cpu = _cpu_children() - cpu0
    data = json.loads(out.read_text())
    report = json.loads((report_dir / "bench.json").read_text())
    if data["status"] != 0:
        raise RuntimeError(f"the bench CLI ended {data['status']} ({report.get('verdict')}: {report.get('aborted')})")
    data["groups"] = sample_groups(data["requests"], streams, runs)
    data["rates"] = _cli_rates(report, streams)
    data["cli_cpu_s"] = report["client"]["cpu_s"]
    data["plots"] = len(report.get("plots") or [])
    return data, cpu


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


def _trace(url: str) -> dict[str, dict[str, Any]]:
    """The stand-in's per-request record (handler start, first/last token due and write times) by id."""
    import urllib.request

    with urllib.request.urlopen(url + "/standin/trace", timeout=30) as resp:
        return {r["id"]: r for r in json.loads(resp.read())["requests"]}


def _ideal(record: dict[str, Any]) -> Any:
    """What a client with no delay at all would have recorded: every token stamped with the start of the
    server write that carried it (the stand-in's write_log)."""
    from sparkfleet_bench.client import RequestResult

    times: list[float] = []
    done = 0
    for sent, total in record["write_log"]:
        times += [sent] * (total - done)
        done = total
    return RequestResult(t_first_token=times[0], t_last_token=times[-1], token_times=times,
                         completion_tokens=record["tokens"])


def _server_rate(records: list[dict[str, Any]]) -> float | None:
    """The rate our metric gives on the ideal client's stamps: per-stream decode rate for one stream,
    else the all-streams decode window (same function as the bench)."""
    from sparkfleet_bench.suites import decode_window_tps

    ideal = [_ideal(r) for r in records]
    return ideal[0].decode_tps if len(ideal) == 1 else decode_window_tps(ideal)


def _median_ms(values: list[float]) -> float:
    return 1000 * statistics.median(values)


def _pct(measured: float, truth: float) -> float:
    return 100.0 * (measured - truth) / truth


def _rate_errors(measured: float | None, server: float | None, nominal: float) -> dict[str, Any]:
    return {"tps": measured, "server_tps": server,
            "tps_err_pct": _pct(measured, server) if measured and server else None,
            "tps_err_nominal_pct": _pct(measured, nominal) if measured else None,
            "server_vs_nominal_pct": _pct(server, nominal) if server else None}


def _ours_figures(ours: dict[str, Any], trace: dict[str, dict[str, Any]], streams: int, itl: float,
                  cpu: float, ttft_base: float) -> dict[str, Any]:
    reqs = [q for group in ours["groups"] for q in group]
    missing = [q["id"] for q in reqs if q["id"] not in trace]
    if missing:
        raise RuntimeError(f"{len(missing)} of our requests are not in the stand-in's trace (first {missing[0]!r})")
    recs = [trace[q["id"]] for q in reqs]
    nominal_ttft = ttft_base + statistics.mean(q["prompt_tokens"] for q in reqs) / PREFILL_TPS
    measured = statistics.mean(ours["rates"]) if ours["rates"] else None
    server_rates = [_server_rate([trace[q["id"]] for q in group]) for group in ours["groups"]]
    server = statistics.mean(w for w in server_rates if w) if any(server_rates) else None
    # t_send is stamped as the request is written, so the client's whole addition to a TTFT is how long
    # after the server began writing the first token the client stamped it.
    return {"ttft_err_ms": _median_ms([q["t_first"] - r["first_sent"] for q, r in zip(reqs, recs)]),
            "ttft_err_vs_server_ttft_ms": _median_ms([(q["t_first"] - q["t_send"]) - (r["first_sent"] - r["received"])
                                                      for q, r in zip(reqs, recs)]),
            "ttft_err_nominal_ms": _median_ms([q["t_first"] - q["t_send"] for q in reqs]) - 1000 * nominal_ttft,
            "server_late_ms": _median_ms([r["first_sent"] - r["first_due"] for r in recs]),
            "server_ttft_ms": _median_ms([r["first_sent"] - r["received"] for r in recs]),
            **_rate_errors(measured, server, streams / itl), "cpu_s": cpu,
            "nominal_ttft_ms": 1000 * nominal_ttft, "cli_cpu_s": ours["cli_cpu_s"], "plots": ours["plots"],
            "tokens": sum(q["tokens"] for q in ours["requests"]), "failed": sum(not q["ok"] for q in ours["requests"])}


def _benchy_figures(benchy: dict[str, Any], recs: list[dict[str, Any]], streams: int, itl: float,
                    cpu: float, nominal_ttft: float) -> dict[str, Any]:
    recs = sorted(recs, key=lambda r: r["received"])
    if streams == 1:
        server = statistics.mean((r["tokens"] - 1) / (r["last_sent"] - r["first_sent"]) for r in recs)
    else:  # its runs follow each other: consecutive groups of `streams`; its batch rate over each group
        groups = [recs[i:i + streams] for i in range(0, len(recs) - streams + 1, streams)]
        server = statistics.mean(sum(r["tokens"] - 1 for r in g) / (max(r["last_sent"] for r in g)
                                                                    - min(r["first_sent"] for r in g)) for g in groups)
    b_ttft = statistics.median(benchy["e2e_ttft"]["values"]) / 1000.0
    # Its requests cannot be matched one by one (no response id in its output): medians of both sides.
    return {"ttft_err_ms": None,
            "ttft_err_vs_server_ttft_ms": 1000 * b_ttft - _median_ms([r["first_sent"] - r["received"] for r in recs]),
            "ttft_err_nominal_ms": 1000 * (b_ttft - nominal_ttft),
            "server_late_ms": _median_ms([r["first_sent"] - r["first_due"] for r in recs]),
            "server_ttft_ms": _median_ms([r["first_sent"] - r["received"] for r in recs]),
            **_rate_errors(benchy["tg_throughput"]["mean"], server, streams / itl), "cpu_s": cpu,
            "tokens": sum(r["tokens"] for r in recs)}


def compare_one(streams: int, runs: int, itl: float, work: Path, venv: Path | None,
                env: dict[str, str] | None, tg: int = TG, tick: float = 0.0, ttft_base: float = TTFT_BASE) -> dict[str, Any]:
    from conftest import Standin

    server = Standin({"STANDIN_ITL_S": str(itl), "STANDIN_TTFT_BASE_S": str(ttft_base),
                      "STANDIN_PREFILL_TPS": str(PREFILL_TPS), "STANDIN_DECODE_TICK_S": str(tick),
                      "STANDIN_TRACE_WRITES": "1"},
                     ("--max-num-seqs", "512"))
    try:
        row: dict[str, Any] = {"streams": streams, "itl_ms": 1000 * itl, "tg": tg, "decode_tick_ms": 1000 * tick,
                               "load_average": os.getloadavg()[0]}
        ours, ours_cpu = _run_ours(server.url, streams, runs, work, tg)
        row["ours"] = _ours_figures(ours, _trace(server.url), streams, itl, ours_cpu, ttft_base)
        nominal_ttft = row["ours"]["nominal_ttft_ms"] / 1000
        if venv is not None and env is not None:
            t0 = time.monotonic()
            benchy, benchy_cpu = _benchy(server.url, streams, runs, work, venv, env)
            t1 = time.monotonic()
            recs = [r for r in _trace(server.url).values() if t0 <= r["received"] <= t1 and r["tokens"] == TG]
            row["llama_benchy"] = _benchy_figures(benchy, recs, streams, itl, benchy_cpu, nominal_ttft)
            row["cpu_ratio_ours_over_benchy"] = ours_cpu / benchy_cpu if benchy_cpu else None
        row["truth"] = {"ttft_ms": 1000 * nominal_ttft, "tps": streams / itl}
        return row
    finally:
        server.stop()


def parse_points(text: str, default_itl: float) -> list[tuple[int, float]]:
    """--streams: `1,8,64` at the default time between tokens, `16x5` = 16 streams at 5 ms between tokens."""
    points = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        streams, sep, itl_ms = word.partition("x")
        if int(streams) < 1 or (sep and float(itl_ms) <= 0):
            raise ValueError(f"--streams: bad point {word!r} (N or NxMS, N >= 1, MS > 0)")
        points.append((int(streams), float(itl_ms) / 1000 if sep else default_itl))
    return points


def point_label(streams: int, itl: float, default_itl: float) -> str:
    """The key of a point in the summary: its stream count, with `x<ms>` when not at the default ITL."""
    return str(streams) if itl == default_itl else f"{streams}x{1000 * itl:g}"


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _line(name: str, fig: dict[str, Any]) -> str:
    per_token = f", {1e6 * fig['cpu_s'] / fig['tokens']:.0f} us/token" if fig.get("tokens") else ""
    own = ("" if fig["ttft_err_ms"] is None else
           f"TTFT err {fig['ttft_err_ms']:+.2f} ms vs the server's first write; ")
    return (f"  {name:<13} {own}TTFT - server TTFT ({fig['server_ttft_ms']:.2f} ms, handler start to first write) "
            f"{fig['ttft_err_vs_server_ttft_ms']:+.2f} ms; vs nominal {fig['ttft_err_nominal_ms']:+.2f} ms "
            f"(server {fig['server_late_ms']:.2f} ms behind schedule)\n"
            f"  {'':<13} tok/s {_fmt(fig['tps'], '.1f')} err {_fmt(fig['tps_err_pct'], '+.3f')} % vs the server's "
            f"writes ({_fmt(fig['server_tps'], '.1f')}), {_fmt(fig['tps_err_nominal_pct'], '+.3f')} % vs nominal "
            f"(server {_fmt(fig['server_vs_nominal_pct'], '+.3f')} %)   client CPU {fig['cpu_s']:.2f} s{per_token}")


def _abs_values(rows: list[dict[str, Any]], tool: str, key: str) -> list[float]:
    return [abs(r[tool][key]) for r in rows if r[tool].get(key) is not None]


CPU_RATIO_TARGET = 0.5
TTFT_TARGET_MS = 1.0


def targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's targets, point by point: our TTFT error against the server's first write within 1 ms at one
    stream; our TTFT - server TTFT below llama-benchy's at 16 streams x 5 ms; the whole process's CPU at most
    half of llama-benchy's."""
    out: dict[str, Any] = {"cpu_ratio_le_0_5": {r["label"]: r["cpu_ratio_ours_over_benchy"] <= CPU_RATIO_TARGET
                                                for r in rows if r.get("cpu_ratio_ours_over_benchy") is not None}}
    for r in rows:
        if r["streams"] == 1:
            out[f"ttft_err_le_1ms_{r['label']}"] = abs(r["ours"]["ttft_err_ms"]) <= TTFT_TARGET_MS
        if r["streams"] == 16 and r["itl_ms"] == 5 and "llama_benchy" in r:
            out["ttft_below_benchy_16x5"] = (abs(r["ours"]["ttft_err_vs_server_ttft_ms"])
                                             < abs(r["llama_benchy"]["ttft_err_vs_server_ttft_ms"]))
    return out


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    out: dict[str, Any] = {}
    for tool, label in (("ours", "ours"), ("llama_benchy", "benchy")):
        own = _abs_values(rows, tool, "ttft_err_ms")
        out[f"{label}_median_ttft_err_ms"] = statistics.median(own) if own else None
        out[f"{label}_median_ttft_err_vs_server_ttft_ms"] = statistics.median(
            _abs_values(rows, tool, "ttft_err_vs_server_ttft_ms"))
        out[f"{label}_median_ttft_err_nominal_ms"] = statistics.median(_abs_values(rows, tool, "ttft_err_nominal_ms"))
        out[f"{label}_max_tps_err_pct"] = max(_abs_values(rows, tool, "tps_err_pct"), default=None)
        out[f"{label}_max_tps_err_nominal_pct"] = max(_abs_values(rows, tool, "tps_err_nominal_pct"), default=None)
    out["cpu_ratio_ours_over_benchy"] = {r["label"]: r["cpu_ratio_ours_over_benchy"] for r in rows}
    out["targets"] = targets(rows)
    stress = result.get("stress", {}).get("ours", {})
    out["stress_tps_err_pct"] = stress.get("tps_err_pct")
    out["stress_tps_err_nominal_pct"] = stress.get("tps_err_nominal_pct")
    out["stress_server_vs_nominal_pct"] = stress.get("server_vs_nominal_pct")
    return out


def main_compare(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    venv = Path(args.benchy_venv)
    env = prepare_benchy(work, venv)
    result: dict[str, Any] = {"truth": {"ttft_base_s": TTFT_BASE, "itl_s": args.itl, "pp": PP, "tg": TG},
                              "runs": args.runs, "rows": []}
    result["load_average_at_start"] = os.getloadavg()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (timing figures degrade with load)")
    for streams, itl in parse_points(args.streams, args.itl):
        t0 = time.perf_counter()
        row = compare_one(streams, args.runs, itl, work, venv, env)
        row["label"] = point_label(streams, itl, args.itl)
        result["rows"].append(row)
        print(f"streams {streams} x {1000 * itl:g} ms (truth TTFT {row['truth']['ttft_ms']:.2f} ms, "
              f"{row['truth']['tps']:.0f} tok/s; load {row['load_average']:.2f}; {time.perf_counter() - t0:.0f} s)")
        print(_line("ours", row["ours"]))
        print(_line("llama-benchy", row["llama_benchy"]))
        print(f"  ratios        CPU ours/llama-benchy {row['cpu_ratio_ours_over_benchy']:.3f}   |TTFT - server TTFT| "
              f"{abs(row['ours']['ttft_err_vs_server_ttft_ms']):.2f} vs "
              f"{abs(row['llama_benchy']['ttft_err_vs_server_ttft_ms']):.2f} ms", flush=True)
    if args.stress_streams:
        row = compare_one(args.stress_streams, args.runs, args.stress_itl, work, None, None, args.stress_tokens,
                          args.stress_tick, args.stress_ttft_base)
        result["stress"] = row
        print(f"stress: ours, {args.stress_streams} streams x {args.stress_tokens} tokens at {1000 * args.stress_itl:g} ms "
              f"(truth {row['truth']['tps']:.0f} tok/s; stand-in writes grouped every {1000 * args.stress_tick:g} ms; "
              f"load {row['load_average']:.2f})")
        print(_line("ours", row["ours"]))
    result["load_average_at_end"] = os.getloadavg()
    result["summary"] = _summary(result)
    print(json.dumps(result, separators=(",", ":")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("--benchy-venv", required=True)
    cmp_.add_argument("--work", required=True)
    cmp_.add_argument("--streams", default=DEFAULT_POINTS,
                      help="points: N streams at --itl, or NxMS = N streams at MS ms between tokens")
    cmp_.add_argument("--runs", type=int, default=3)
    cmp_.add_argument("--itl", type=float, default=0.02)
    cmp_.add_argument("--stress-streams", type=int, default=256)
    cmp_.add_argument("--stress-itl", type=float, default=0.005)
    cmp_.add_argument("--stress-tokens", type=int, default=1024,
                      help="output tokens per stream in the stress run (256 prefills must end inside the decode)")
    cmp_.add_argument("--stress-ttft-base", type=float, default=1.0,
                      help="STANDIN_TTFT_BASE_S of the stress run: every request is read before the first token is due")
    cmp_.add_argument("--stress-tick", type=float, default=0.05,
                      help="STANDIN_DECODE_TICK_S of the stress run: the stand-in writes each stream at most this often")
    ours = sub.add_parser("ours")
    ours.add_argument("--url", required=True)
    ours.add_argument("--streams", type=int, required=True)
    ours.add_argument("--runs", type=int, required=True)
    ours.add_argument("--out", required=True)
    ours.add_argument("--tg", type=int, default=TG)
    ours.add_argument("--report-dir", required=True, help="the CLI's --output-dir")
    args = parser.parse_args()
    if args.cmd == "ours":
        run_ours_child(args)
    else:
        main_compare(args)


if __name__ == "__main__":
    main()
