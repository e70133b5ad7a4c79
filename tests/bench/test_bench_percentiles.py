"""Percentiles of single observations (TTFT and E2E per request, ITL per chunk gap) beside the interval of the
mean, in bench.json metric objects, summary.md and points.csv."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from sparkfleet_bench import report as rp
from sparkfleet_bench import stats as st
from sparkfleet_bench.client import RequestResult
from sparkfleet_bench.suites import (
    distributions, sample_metrics, with_percentiles)


def test_percentile_is_linear_between_ranks() -> None:
    values = list(range(1, 101))  # 1..100, shuffled order must not matter
    values.reverse()
    assert st.percentile(values, 50) == pytest.approx(50.5)
    assert st.percentile(values, 90) == pytest.approx(90.1)
    assert st.percentile(values, 95) == pytest.approx(95.05)
    assert st.percentile(values, 99) == pytest.approx(99.01)
    assert st.percentile(values, 0) == 1 and st.percentile(values, 100) == 100
    assert st.percentile([7.0], 99) == 7.0
    assert st.percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    with pytest.raises(ValueError):
        st.percentile([], 50)
    with pytest.raises(ValueError):
        st.percentile([1.0], 101)


def test_percentiles_block() -> None:
    got = st.percentiles([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 10.0])
    assert got["observations"] == 11
    assert got["p50"] == pytest.approx(0.6)
    assert got["p90"] == pytest.approx(1.0)
    assert got["p95"] == pytest.approx(5.5)
    assert got["p99"] == pytest.approx(9.1)
    assert st.percentiles([]) == {"p50": None, "p90": None, "p95": None, "p99": None, "observations": 0}


def _stream(ttft: float, gaps: list[float]) -> RequestResult:
    first = ttft
    times = [first]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestResult(t_send=0.0, t_first_chunk=first, t_first_token=first, t_first_answer=first,
                         t_last_token=times[-1], t_end=times[-1] + 0.001, token_times=times,
                         completion_tokens=len(times), usage_seen=True)


def test_distributions_and_sample_means_of_known_streams() -> None:
    # two streams: TTFT 0.1 and 0.3; gaps 10 ms x 9 and one 100 ms stall
    results = [_stream(0.1, [0.01] * 9 + [0.1]), _stream(0.3, [0.01] * 10)]
    dist = distributions(results)
    assert dist["ttft_s"] == pytest.approx([0.1, 0.3])
    assert dist["e2e_s"] == pytest.approx([0.1 + 0.19, 0.3 + 0.1])
    assert len(dist["itl_s"]) == 20 and max(dist["itl_s"]) == pytest.approx(0.1)
    m = sample_metrics(results, {})
    assert m["itl_s"] == pytest.approx((0.09 + 0.1 + 0.1) / 20)
    assert m["e2e_s"] == pytest.approx((0.29 + 0.4) / 2)
    metrics = with_percentiles({"itl_s": st.summarize([m["itl_s"]]), "ttft_s": st.summarize([m["ttft_s"]])}, dist)
    assert metrics["itl_s"]["p50"] == pytest.approx(0.01)
    assert metrics["itl_s"]["p99"] == pytest.approx(0.1 - 0.19 * 0.09)  # rank 18.81 of 20 sorted gaps
    assert metrics["ttft_s"]["p50"] == pytest.approx(0.2) and metrics["ttft_s"]["observations"] == 2
    assert metrics["ttft_s"]["mean"] == pytest.approx(0.2) and "ci95" in metrics["ttft_s"]


def test_summary_and_csv_show_percentiles_beside_the_interval(tmp_path: Path) -> None:
    ttft = with_percentiles({"ttft_s": st.summarize([0.2, 0.21, 0.22]), "tps": st.summarize([50.0, 51.0, 49.0])},
                            {"ttft_s": [0.1 * k for k in range(1, 11)]})
    rep = rp.new_report("http://x", "m", "2026-12-01T00:00:00Z", {"suites": ["decode"]})
    rep["suites"] = {"decode": {"points": [{"case": "prose", "concurrency": 2, "n": 3, "failed_requests": 0,
                                            "metrics": ttft}], "failed_requests": 0}}
    rep["completed_suites"] = ["decode"]
    paths = rp.write_outputs(tmp_path, rep)
    md = Path(paths["summary"]).read_text()
    assert "## Decode latency" in md
    row = next(line for line in md.splitlines() if line.startswith("| prose-c2 |") and "/" in line)
    assert "210.0 [" in row and "550.0 / 910.0 / 955.0 / 991.0" in row
    rows = list(csv.DictReader(io.StringIO(Path(paths["csv"]).read_text())))
    ttft_row = next(r for r in rows if r["metric"] == "ttft_s")
    assert float(ttft_row["p50"]) == pytest.approx(0.55) and float(ttft_row["p99"]) == pytest.approx(0.991)
    assert float(ttft_row["ci95_lo"]) < 0.21 < float(ttft_row["ci95_hi"])
    assert next(r for r in rows if r["metric"] == "tps")["p50"] == ""
