"""Pure parts of the bench: Prometheus parsing and hygiene rules, prompts and the quality check,
decode-sample metrics on synthetic timings, report verdicts, comparison, summary, CSV and plots."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from sparkfleet_bench import metrics as mt
from sparkfleet_bench import prompts as pr
from sparkfleet_bench import report as rp
from sparkfleet_bench.client import RequestResult
from sparkfleet_bench.stats import summarize
from sparkfleet_bench.suites import (
    BenchConfig, decode_window_tps, plan, sample_metrics, validate)

PROM = """# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
vllm:num_requests_waiting{model_name="m"} 0.0
vllm:request_success_total{finished_reason="stop",model_name="m"} 10.0
vllm:request_success_total{finished_reason="length",model_name="m"} 5.0
vllm:kv_cache_usage_perc{model_name="m"} 0.25
vllm:spec_decode_num_drafts_total{model_name="m"} 100
vllm:spec_decode_num_draft_tokens_total{model_name="m"} 300
vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 150
weird_metric NaN
process_cpu_seconds_total 3.5 1700000000000
"""


def test_prometheus_parse_sums_label_sets() -> None:
    snap = mt.parse_prometheus(PROM)
    assert snap["vllm:num_requests_running"] == 3.0
    assert snap["vllm:request_success_total"] == 15.0
    assert snap["process_cpu_seconds_total"] == 3.5
    assert "weird_metric" not in snap
    assert not mt.is_idle(snap) and mt.is_idle({})


def test_deltas_spec_decode_and_foreign_traffic() -> None:
    before = mt.parse_prometheus(PROM)
    after = dict(before)
    after["vllm:request_success_total"] += 4
    after["vllm:spec_decode_num_drafts_total"] += 10
    after["vllm:spec_decode_num_draft_tokens_total"] += 30
    after["vllm:spec_decode_num_accepted_tokens_total"] += 20
    d = mt.deltas(before, after)
    assert d["request_success_total"] == 4
    spec = mt.spec_decode(d)
    assert spec["accepted_per_draft"] == 2.0 and spec["tokens_per_step"] == 3.0
    assert spec["accepted_per_verified"] == pytest.approx(20 / 30)
    peaks = mt.Peaks()
    assert peaks.as_dict()["peak_running"] is None
    peaks.observe({"vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 0.0})
    assert mt.foreign_traffic(d, peaks, sent=4, concurrency=4) is None
    assert "5 requests finished" in mt.foreign_traffic({"request_success_total": 5}, peaks, 4, 4)
    peaks.observe({"vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 2.0})
    assert "peak active" in mt.foreign_traffic(d, peaks, 4, 4)
    assert mt.prefix_hit_rate({"prefix_cache_queries_total": 100, "prefix_cache_hits_total": 25}) == 0.25
    assert mt.prefix_hit_rate({}) is None


def test_quality_check_names_failures() -> None:
    good = "Here:\n```python\nclass C:\n    def get(self, key):\n        return 1\n    def put(self, key, value):\n" \
           "        pass\n```\nO(1)."
    assert pr.check_quality(good) == "pass"
    assert pr.check_quality("no code at all") == "no fenced Python block"
    assert pr.check_quality("```python\nclass C(:\n```") == "code block does not parse"
    assert pr.check_quality("```python\nclass C:\n    def get(self, k): pass\n```") == "no class defining get and put"
    assert pr.check_quality("```python\nclass C:\n    def get(self, k): pass\n    def put(self, v): pass\n```") == \
        "put is not put(self, key, value)"


def test_texts_nonce_and_needle() -> None:
    import random

    assert len(pr.filler_text(100).split()) == 100
    src = pr.text_of_chars("source", 5000, 3)
    assert len(src) == 5000 and src == pr.text_of_chars("source", 5000, 3)
    rng = random.Random(0)
    assert pr.nonce_prefix(rng) != pr.nonce_prefix(rng)
    hay = pr.needle_haystack("line\n" * 1000, 50)
    assert "COPPER-OTTER-50-CEDAR" in hay and 2000 < hay.index("COPPER") < 3100
    with pytest.raises(ValueError):
        pr.text_of_chars("novel", 10, 0)


def _stream(t_send: float, ttft: float, itl: float, n: int) -> RequestResult:
    first = t_send + ttft
    times = [first + k * itl for k in range(n)]
    return RequestResult(t_send=t_send, t_first_chunk=first, t_first_token=first, t_first_answer=first,
                         t_last_token=times[-1], t_end=times[-1] + 0.001, token_times=times,
                         completion_tokens=n, usage_seen=True)


def test_sample_metrics_on_known_timings() -> None:
    # four streams, staggered first tokens, 20 ms between tokens, 256 tokens each
    results = [_stream(0.0, 0.2 + 0.01 * i, 0.02, 256) for i in range(4)]
    m = sample_metrics(results, {})
    assert m["per_stream_tps"] == pytest.approx(50.0)
    assert m["decode_window_tps"] == pytest.approx(200.0)
    assert m["ttft_s"] == pytest.approx(0.215)
    wall = results[-1].t_end
    assert m["tps"] == pytest.approx(4 * 256 / wall)
    assert m["step_ms"] is None
    spec = {"tokens_per_step": 2.5}
    assert sample_metrics(results, spec)["step_ms"] == pytest.approx(1000 * 2.5 * 4 / 200.0)
    # the window needs every stream to decode; a stream with one token has no window
    assert decode_window_tps(results + [_stream(0.0, 0.3, 0.02, 1)]) is None


def _point(case: str, c: int, tps: list[float]) -> dict[str, Any]:
    return {"case": case, "concurrency": c, "n": len(tps), "failed_requests": 0,
            "metrics": {"tps": summarize(tps), "decode_window_tps": summarize([v * 1.05 for v in tps]),
                        "ttft_s": summarize([0.2, 0.21, 0.2])}}


def _report(tps1: list[float], tps8: list[float]) -> dict[str, Any]:
    rep = rp.new_report("http://x", "m", "2026-11-29T00:00:00Z", {})
    rep["suites"] = {"quality": {"runs": [{"verdict": "pass"}] * 5, "passed": 5, "ok": True},
                     "decode": {"points": [_point("prose", 1, tps1), _point("prose", 8, tps8)], "failed_requests": 0},
                     "prefill": {"points": [{"text": "filler", "size": 2048, "n": 3, "failed_requests": 0,
                                             "metrics": {"prefill_tps": summarize([4000.0, 4010.0, 3990.0]),
                                                         "prompt_tokens": summarize([1990.0] * 3),
                                                         "ttft_s": summarize([0.5, 0.5, 0.5])}}]}}
    rep["completed_suites"] = list(rep["suites"])
    return rep


def test_verdicts() -> None:
    base = _report([50.0, 50.5, 49.5], [380.0, 385.0, 383.0])
    assert rp.verdict(base) == "pass"
    same = _report([50.2, 50.4, 49.8], [381.0, 384.0, 382.0])
    same["comparison"] = rp.compare(same, base, 3.0, "base.json")
    assert same["comparison"]["regressions"] == 0 and rp.verdict(same) == "pass"
    slow = _report([45.0, 45.3, 44.8], [380.0, 385.0, 383.0])
    slow["comparison"] = rp.compare(slow, base, 3.0, "base.json")
    regs = [r for r in slow["comparison"]["points"] if r["regression"]]
    assert {(r["point"], r["metric"]) for r in regs} == {("decode/prose-c1", "tps"),
                                                          ("decode/prose-c1", "decode_window_tps")}
    assert rp.verdict(slow) == "regression"
    # with a 15 % tolerance the same slowdown passes
    assert rp.compare(slow, base, 15.0)["regressions"] == 0
    failed = _report([50.0, 50.5, 49.5], [380.0, 385.0, 383.0])
    failed["failed_requests"] = 1
    assert rp.verdict(failed) == "fail"
    failed_quality = _report([50.0, 50.5, 49.5], [380.0, 385.0, 383.0])
    failed_quality["suites"]["quality"]["ok"] = False
    assert rp.verdict(failed_quality) == "fail"
    aborted = _report([50.0, 50.5, 49.5], [380.0, 385.0, 383.0])
    aborted["aborted"] = "quality gate 3/5"
    assert rp.verdict(aborted) == "fail"


def test_comparison_of_another_shape_is_an_error() -> None:
    base = _report([50.0, 50.5, 49.5], [380.0, 385.0, 383.0])
    other = rp.new_report("http://x", "m", "t", {})
    other["suites"] = {"decode": {"points": [_point("code", 2, [60.0, 61.0])]}}
    assert "shares no points" in rp.compare(other, base, 3.0)["error"]
    assert "schema" in rp.compare(base, {"schema": "other/9"}, 3.0)["error"]


def test_outputs_summary_csv_and_plots(tmp_path: Path) -> None:
    from sparkfleet_bench.plots import write_plots

    base = _report([50.0, 50.5, 49.5], [380.0, 385.0, 383.0])
    rep = _report([45.0, 45.3, 44.8], [380.0, 385.0, 383.0])
    rep["comparison"] = rp.compare(rep, base, 3.0, "base.json")
    rep["verdict"] = rp.verdict(rep)
    rep["server_metrics"] = False
    paths = rp.write_outputs(tmp_path, rep)
    assert json.loads(Path(paths["json"]).read_text())["schema"] == "sparkfleet-bench/1"
    md = Path(paths["summary"]).read_text()
    assert "verdict: **regression**" in md and "| prose-c8 | 3 |" in md and "REGRESSION" in md
    assert "no /metrics" in md
    rows = list(csv.DictReader(io.StringIO(Path(paths["csv"]).read_text())))
    tps = [r for r in rows if r["point"] == "prose-c1" and r["metric"] == "tps"][0]
    assert float(tps["mean"]) == pytest.approx(45.0333, abs=1e-3) and tps["n"] == "3"
    plots = write_plots(tmp_path, rep, base)
    assert {Path(p).name for p in plots} == {"decode_tps.png", "decode_decode_window_tps.png", "prefill_tps.png"}
    for p in plots:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(p).stat().st_size > 5000


def test_config_validation_and_plan(tmp_path: Path) -> None:
    cfg = BenchConfig(url="ftp://x", output_dir="", suites=["quality", "nope"], cases=["prose", "poetry"],
                      concurrency=[0], min_samples=1, compare=str(tmp_path / "missing.json"))
    problems = " ".join(validate(cfg))
    for field in ("url:", "output_dir:", "suites:", "cases:", "concurrency:", "min_samples", "compare:"):
        assert field in problems
    ok = BenchConfig(url="http://h:8000", output_dir=str(tmp_path), suites=["prefill", "quality"],
                     prefill_sizes=[1000, 5000], prefill_texts=["filler"])
    assert validate(ok) == []
    assert plan(ok, max_model_len=4096) == ["quality", "prefill/filler-1000"]


def _events(spaces: str) -> list[bytes]:
    """A vLLM-like chat stream: role+reasoning, reasoning, empty content, tricky content, finish, usage."""
    sep = ":" + spaces
    def ev(delta: str, finish: str = "null") -> bytes:
        return ('{"choices"' + sep + '[{"index"' + sep + '0,"delta"' + sep + delta + ',"finish_reason"' + sep + finish
                + '}],"usage"' + sep + 'null}').encode()
    return [ev('{"role":"assistant","reasoning_content"' + sep + '"Think"}'),
            ev('{"reasoning_content"' + sep + '" more"}'),
            ev('{"content"' + sep + '""}'),
            ev('{"content"' + sep + r'"\"content\": \"x\""}'),
            ev('{"content"' + sep + r'"\""}'),
            ev('{"content"' + sep + '" done"}', '"length"'),
            ('{"choices"' + sep + '[],"usage"' + sep + '{"prompt_tokens":7,"completion_tokens":5,'
             '"completion_tokens_details":{"reasoning_tokens":2}}}').encode(),
            b"[DONE]"]


@pytest.mark.parametrize("spaces", ["", " "])
def test_sse_fast_path_agrees_with_the_full_parser(spaces: str) -> None:
    from sparkfleet_bench.client import _Stream

    fast, full = RequestResult(), RequestResult()
    fast_stream, full_stream = _Stream(fast, keep_content=False), _Stream(full, keep_content=True)
    for i, payload in enumerate(_events(spaces)):
        fast_stream.feed(payload, float(i))
        full_stream.feed(payload, float(i))
    for res in (fast, full):
        assert res.token_times == [0.0, 1.0, 3.0, 4.0, 5.0]
        assert (res.t_first_token, res.t_first_answer, res.t_last_token) == (0.0, 3.0, 5.0)
        assert (res.completion_tokens, res.reasoning_tokens, res.finish_reason) == (5, 2, "length")
    assert fast_stream.done and full.reasoning_field == "reasoning_content"
    assert "".join(full_stream.parts) == '"content": "x"" done'
