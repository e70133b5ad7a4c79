"""The bench against the stand-in server on loopback, whose timing is known:
token k of a stream at first_token + k * ITL, TTFT = base + uncached prompt tokens / prefill rate.

Tolerances are generous on absolute latency (the 2-core CI box runs the server, the client and other
work at once) and tight on rates, which average over hundreds of tokens."""
from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from sparkfleet_bench.client import BenchClient, RequestResult
from sparkfleet_bench.suites import (
    BenchConfig, Hygiene, Runner, run_bench)

from conftest import MODEL, Standin

# Asserts wall-clock figures of the stand-in: run alone, after the lanes that load the machine (Makefile).
pytestmark = pytest.mark.timing

ITL = 0.01
BASE = 0.05
PREFILL = 4000.0
REASONING = 16
TRUTH_ENV = {"STANDIN_ITL_S": str(ITL), "STANDIN_TTFT_BASE_S": str(BASE), "STANDIN_PREFILL_TPS": str(PREFILL),
             "STANDIN_REASONING_TOKENS": str(REASONING)}


def _cfg(server: Standin, out: Path, **kw: Any) -> BenchConfig:
    base: dict[str, Any] = dict(url=server.url, output_dir=str(out), model=MODEL, concurrency=[1, 4],
                                cases=["prose"], max_tokens=64, min_samples=2, max_samples=3, precision=5.0,
                                settle=0.05, poll_interval=0.2, idle_timeout=20, timeout=30)
    base.update(kw)
    return BenchConfig(**base)


def _ttft_truth(prompt_tokens: float) -> float:
    return BASE + prompt_tokens / PREFILL


@pytest.fixture(scope="module")
def truth_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One quick run (quality, decode c1/c4, small filler prefill) shared by the accuracy tests."""
    server = Standin(TRUTH_ENV)
    out = tmp_path_factory.mktemp("truth")
    try:
        report = run_bench(_cfg(server, out, suites=["quality", "decode", "prefill", "prefix"],
                                prefill_sizes=[2048], prefill_texts=["filler", "source"], prefill_repeats=2,
                                prefix_tokens=1024, prefix_runs=1))
    finally:
        server.stop()
    return report, out


def test_decode_metrics_match_the_truth(truth_run: tuple[dict[str, Any], Path]) -> None:
    report, _ = truth_run
    assert report["verdict"] == "pass", report["errors"]
    assert report["server_metrics"] is True
    points = {p["concurrency"]: p for p in report["suites"]["decode"]["points"]}
    for conc, point in points.items():
        m = point["metrics"]
        assert point["n"] >= 2 and point["failed_requests"] == 0
        assert point["full_length_outputs"] == point["requests"]  # forced length honoured
        assert m["per_stream_tps"]["mean"] == pytest.approx(1 / ITL, rel=0.02)
        assert m["decode_window_tps"]["mean"] == pytest.approx(conc / ITL, rel=0.02)
        # reasoning is on: the first answer token follows the reasoning tokens
        assert m["ttfat_s"]["mean"] - m["ttft_s"]["mean"] == pytest.approx(REASONING * ITL, abs=0.01)
        assert point["reasoning_share"] == pytest.approx(REASONING / 64, abs=0.01)
        ttft = m["ttft_s"]["mean"]
        assert BASE <= ttft < BASE + 0.03
        # aggregate: every stream's tokens over the sample wall time (TTFT + 63 gaps, prefills in sequence)
        assert m["tps"]["mean"] == pytest.approx(conc * 64 / (ttft + 63 * ITL), rel=0.05)
        assert m["tps"]["ci95"][0] <= m["tps"]["mean"] <= m["tps"]["ci95"][1]
        assert len(m["tps"]["values"]) == point["n"]
        # percentiles of single observations: every chunk gap is one ITL, every request one TTFT and E2E
        assert m["itl_s"]["p50"] == pytest.approx(ITL, abs=0.003)
        assert m["itl_s"]["observations"] == point["n"] * conc * 63
        assert m["ttft_s"]["observations"] == m["e2e_s"]["observations"] == point["n"] * conc
        assert m["ttft_s"]["p50"] <= m["ttft_s"]["p90"] <= m["ttft_s"]["p95"] <= m["ttft_s"]["p99"]
        assert m["e2e_s"]["p50"] == pytest.approx(ttft + 63 * ITL, rel=0.1)


def test_prefill_and_prefix_match_the_truth(truth_run: tuple[dict[str, Any], Path]) -> None:
    report, _ = truth_run
    for point in report["suites"]["prefill"]["points"]:
        m = point["metrics"]
        tokens = m["prompt_tokens"]["mean"]
        assert 0.9 * 0.97 * 2048 < tokens < 1.1 * 0.97 * 2048, point
        assert m["ttft_s"]["mean"] == pytest.approx(_ttft_truth(tokens), abs=0.03)  # scheduling delay on a loaded 2-core box reaches ~20 ms
        assert m["prefill_tps"]["mean"] == pytest.approx(tokens / _ttft_truth(tokens), rel=0.06)
        assert point["discarded"] == 0 and point["n"] == 2
    prefix = report["suites"]["prefix"]
    cold, warm = prefix["metrics"]["cold_ttft_s"]["mean"], prefix["metrics"]["warm_ttft_s"]["mean"]
    assert cold > warm and prefix["warm_hit_rate"] > 0.9


def test_outputs_written(truth_run: tuple[dict[str, Any], Path]) -> None:
    report, out = truth_run
    on_disk = json.loads((out / "bench.json").read_text())
    assert on_disk["schema"] == "sparkfleet-bench/1" and on_disk["verdict"] == "pass"
    assert on_disk["suites"]["quality"] == {**on_disk["suites"]["quality"], "passed": 5, "ok": True}
    assert on_disk["client"]["cpu_s"] > 0 and on_disk["finished"]
    assert on_disk["client"]["read_bytes"] == 256 * 1024  # what one recv may read, as the client does
    assert "| prose-c4 |" in (out / "summary.md").read_text()
    assert "decode,prose-c1,prose,1,,tps," in (out / "points.csv").read_text()
    for name in ("decode_tps.png", "decode_decode_window_tps.png", "prefill_tps.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_regression_and_pass_against_baselines(truth_run: tuple[dict[str, Any], Path], tmp_path: Path,
                                               standin: Callable[..., Standin]) -> None:
    report, out = truth_run
    faster = copy.deepcopy(report)
    for point in faster["suites"]["decode"]["points"]:
        for name in ("tps", "decode_window_tps"):
            point["metrics"][name]["values"] = [v * 1.10 for v in point["metrics"][name]["values"]]
    (tmp_path / "faster.json").write_text(json.dumps(faster))
    server = standin(TRUTH_ENV)
    slow = run_bench(_cfg(server, tmp_path / "r", suites=["decode"], compare=str(tmp_path / "faster.json")))
    assert slow["verdict"] == "regression"
    assert slow["comparison"]["regressions"] >= 1
    assert (tmp_path / "r" / "decode_tps.png").is_file()
    same = run_bench(_cfg(server, tmp_path / "s", suites=["decode"], compare=str(out / "bench.json")))
    assert same["comparison"]["regressions"] == 0 and same["verdict"] == "pass", same["comparison"]


def test_failures_are_counted_and_classified(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.005"})

    async def run() -> list[RequestResult]:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "stream_options": {"include_usage": True}, "max_tokens": 64}
        async with BenchClient(server.url, timeout_s=1.0) as client:
            return [await client.stream("/v1/chat/completions", body) for _ in range(4)]

    server.faults(http_500=1, drop_stream=1, stall=1, stall_s=3)
    results = asyncio.run(run())
    assert [r.error_class for r in results[:3]] in (["http", "transport", "timeout"], ["http", "incomplete", "timeout"])
    assert results[0].status == 500 and results[3].ok and results[3].completion_tokens == 64
    # and in a run: one dropped stream fails the run and is counted by class
    server.faults(drop_stream=1)
    report = run_bench(_cfg(server, tmp_path, suites=["decode"], concurrency=[2], max_tokens=32, timeout=5))
    assert report["verdict"] == "fail"
    assert report["failed_requests"] == 1 and sum(report["failures_by_class"].values()) == 1
    assert report["suites"]["decode"]["points"][0]["failed_requests"] == 1


def test_quality_failure_aborts_with_a_partial_report(standin: Callable[..., Standin], tmp_path: Path,
                                                      run_module: Any) -> None:
    server = standin({"STANDIN_QUALITY_BROKEN": "1", "STANDIN_ITL_S": "0.002"})
    failed, result = run_module("spark_bench", {"url": server.url + "/v1", "output_dir": str(tmp_path),
                                                "poll_interval": 0.2})
    assert not failed and result["verdict"] == "fail"
    assert "quality gate 0/5" in result["aborted"]
    on_disk = json.loads((tmp_path / "bench.json").read_text())
    assert on_disk["suites"]["quality"]["ok"] is False and "decode" not in on_disk["suites"]
    assert on_disk["suites"]["quality"]["runs"][0]["verdict"] != "pass"
    assert "ABORTED" in (tmp_path / "summary.md").read_text()


def test_without_metrics_the_report_says_so(standin: Callable[..., Standin], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server = standin({"STANDIN_ITL_S": "0.005"})

    async def no_metrics(self: Hygiene) -> bool:
        self.available = False
        return False

    monkeypatch.setattr(Hygiene, "probe", no_metrics)
    report = asyncio.run(Runner(_cfg(server, tmp_path, suites=["decode"], concurrency=[2], max_tokens=32)).run())
    assert report["server_metrics"] is False and report["verdict"] == "pass"
    assert report["suites"]["decode"]["points"][0]["n"] >= 2
    assert "no /metrics" in (tmp_path / "summary.md").read_text()


def test_admission_and_needle(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.01", "STANDIN_PREFILL_TPS": "400000"}, ("--max-model-len", "32768"))
    cfg = _cfg(server, tmp_path / "a", suites=["admission", "needle"], admission_tokens=6000, needle_tokens=12000,
               needle_depths=[10, 90])
    report = run_bench(cfg)
    adm = report["suites"]["admission"]
    assert adm["ok"] and adm["peak_running"] == 4 and adm["preemptions"] == 0, adm
    assert all(0.95 * 0.97 * 6000 < t < 1.05 * 0.97 * 6000 for t in adm["prompt_tokens"])
    runs = report["suites"]["needle"]["runs"]
    assert [(r["depth_pct"], r["found"], r["passed"]) for r in runs] == [(10, True, True), (90, True, True)]
    assert all(12000 - 1024 < r["prompt_tokens"] <= 12000 for r in runs)
    assert report["verdict"] == "pass"
    # a preempted request fails the admission suite and the run
    server.faults(preempt=1)
    failed = run_bench(_cfg(server, tmp_path / "b", suites=["admission"], admission_tokens=6000))
    assert failed["suites"]["admission"]["preemptions"] >= 1 and failed["suites"]["admission"]["ok"] is False
    assert failed["verdict"] == "fail"


def test_many_streams_keep_rates_and_failures(standin: Callable[..., Standin]) -> None:
    """16 streams on pooled keep-alive connections: rates as accurate, a dropped stream still classified."""
    from sparkfleet_bench.suites import sample_metrics

    server = standin({"STANDIN_ITL_S": "0.01", "STANDIN_TTFT_BASE_S": "0.02"}, ("--max-num-seqs", "64"))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "stream_options": {"include_usage": True}, "max_tokens": 96, "min_tokens": 96, "ignore_eos": True,
            "chat_template_kwargs": {"thinking": False}}

    async def run(n: int) -> list[RequestResult]:
        async with BenchClient(server.url, timeout_s=20, max_connections=n + 2) as client:
            return list(await asyncio.gather(*(client.stream("/v1/chat/completions", body)
                                               for _ in range(n))))

    results = asyncio.run(run(16))
    assert all(r.ok and r.completion_tokens == 96 and len(r.token_times) == 96 for r in results)
    m = sample_metrics(results, {})
    assert m["per_stream_tps"] == pytest.approx(100.0, rel=0.03)
    assert m["decode_window_tps"] == pytest.approx(1600.0, rel=0.03)
    server.faults(drop_stream=1)
    dropped = asyncio.run(run(4))
    assert sorted(str(r.error_class) for r in dropped) in (["None"] * 3 + ["transport"], ["None"] * 3 + ["incomplete"])


def test_step_time_from_spec_decode_counters(standin: Callable[..., Standin], tmp_path: Path) -> None:
    """Stand-in with MTP (3 draft tokens, 2 accepted per step): a step yields 3 tokens, one token every ITL,
    so the step time is 3 x ITL whatever the stream count."""
    server = standin({"STANDIN_ITL_S": "0.01", "STANDIN_SPEC_ACCEPT": "2"},
                     ("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}'))
    report = run_bench(_cfg(server, tmp_path, suites=["decode"], concurrency=[1, 2], max_tokens=64))
    assert report["verdict"] == "pass"
    for point in report["suites"]["decode"]["points"]:
        assert point["spec_decode"]["accepted_per_draft"] == pytest.approx(2.0, abs=0.05)
        assert point["metrics"]["step_ms"]["mean"] == pytest.approx(30.0, rel=0.03)


def test_depths_run_every_decode_point_after_prior_context(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin(TRUTH_ENV)
    depth = 400
    report = run_bench(_cfg(server, tmp_path, suites=["decode"], concurrency=[1, 2], depths=[0, depth], max_tokens=32,
                            min_samples=2, max_samples=2))
    assert report["verdict"] == "pass", report["errors"]
    points = {(p["concurrency"], p["depth"]): p for p in report["suites"]["decode"]["points"]}
    assert sorted(points) == [(1, 0), (1, depth), (2, 0), (2, depth)]
    assert report["identity"]["planned_points"] == ["decode/prose-c1", "decode/prose-c2", f"decode/prose-c1@d{depth}",
                                                    f"decode/prose-c2@d{depth}"]
    for (conc, d), point in points.items():
        m = point["metrics"]
        prompt = m["prompt_tokens"]["mean"]
        if d:
            assert point["cached_prompt_tokens"] == 0  # each stream's context opens with its own nonce
            assert 0.9 * depth < prompt - points[(conc, 0)]["metrics"]["prompt_tokens"]["mean"] < 1.1 * depth
        # TTFT follows the stand-in's prefill rate over the whole prompt (context included); the stand-in
        # prefills concurrent streams one after another, so at c2 the second waits for the first
        queued = (conc - 1) * prompt / PREFILL / conc
        assert m["ttft_s"]["mean"] == pytest.approx(_ttft_truth(prompt) + queued, abs=0.03)
        assert m["per_stream_tps"]["mean"] == pytest.approx(1 / ITL, rel=0.03)
    assert points[(1, depth)]["metrics"]["pp_tps"]["mean"] > 2 * points[(1, 0)]["metrics"]["pp_tps"]["mean"]
    md = (tmp_path / "summary.md").read_text()
    assert "## Prefill and decode by depth (llama-benchy layout" in md
    assert "| model | test | t/s | ttfr (ms) | e2e_ttft (ms) |" in md
    assert f"| {MODEL} | tg32 @ d{depth} (c2) | " in md and f"| {MODEL} | tg32 | " in md
    assert any(line.startswith(f"| {MODEL} | pp") and f"@ d{depth} (c2)" in line for line in md.splitlines())
    assert f"| prose-c2@d{depth} |" in md
    csv_text = (tmp_path / "points.csv").read_text()
    assert f"decode,prose-c1@d{depth},prose,1,,tps," in csv_text and csv_text.splitlines()[0].endswith(",depth")
