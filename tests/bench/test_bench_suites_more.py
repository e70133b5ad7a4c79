"""The reference's compliance and sampled suites: scoring, verdict rules, and a run against the stand-in."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from sparkfleet_bench import compliance as cp
from sparkfleet_bench import report as rp
from sparkfleet_bench.suites import (
    FULL, BenchConfig, plan, run_bench, validate)

from conftest import MODEL, Standin


def _answer(record: str, count: int = 12, **change: Any) -> str:
    fields = cp.RECORDS[record][1]
    values = {"string": "x", "integer": 3, "number": 2.5, "boolean": True}
    items = [{name: values[spec["type"]] for name, spec in fields.items()} for _ in range(count)]
    for key, value in change.items():
        items[2][key] = value
    return json.dumps(items)


def test_compliance_scoring_names_each_failure() -> None:
    rec = "library_books"
    assert cp.score(rec, _answer(rec), "stop") == "pass"
    assert cp.score(rec, "  " + _answer(rec) + "\n", "stop") == "pass"
    assert cp.score(rec, _answer(rec), "length") == "stopped by the length limit"
    assert cp.score(rec, "```json\n" + _answer(rec) + "\n```", "stop").startswith("not a bare JSON array")
    assert cp.score(rec, "Here you go: " + _answer(rec), "stop").startswith("not a bare JSON array")
    assert cp.score(rec, "[1, 2,]", "stop").startswith("not JSON")
    assert cp.score(rec, _answer(rec, 11), "stop") == "11 objects, not 12"
    assert cp.score(rec, _answer(rec, year="1999"), "stop") == "object 3: year is str, not integer"
    assert cp.score(rec, _answer(rec, year=True), "stop") == "object 3: year is a boolean, not integer"
    assert cp.score(rec, _answer(rec, extra=1), "stop") == "object 3: extra fields ['extra']"
    items = json.loads(_answer(rec))
    del items[0]["isbn"]
    assert cp.score(rec, json.dumps(items), "stop") == "object 1: missing ['isbn']"
    assert cp.type_error(2.0, "integer") is None and cp.type_error(2, "number") is None


def test_compliance_prompts_and_schemas() -> None:
    assert len(cp.RECORDS) == 8 and cp.ARMS == ("prompt", "constrained")
    for record in cp.RECORDS:
        text = cp.prompt(record)
        assert "exactly 12 objects" in text and "no code fence, no commentary" in text
        schema = cp.response_format(record)["json_schema"]["schema"]
        assert schema["minItems"] == schema["maxItems"] == 12 and schema["items"] == cp.item_schema(record)
        assert json.dumps(cp.item_schema(record), separators=(", ", ": ")) in text


def test_suite_selection_full_and_opt_in() -> None:
    full = BenchConfig(url="http://h", output_dir="d", suites=["full"])
    assert full.suites == list(FULL) and "compliance" not in full.suites and not validate(full)
    cfg = BenchConfig(url="http://h", output_dir="d", suites=["compliance", "sampled"], sampled_concurrency=[1, 4])
    assert plan(cfg) == ["compliance/prompt", "compliance/constrained", "sampled/essay-c1", "sampled/essay-c4",
                         "sampled/module-c1", "sampled/module-c4"]
    assert validate(BenchConfig(url="http://h", output_dir="d", sampled_concurrency=[0]))


def test_compliance_and_sampled_verdicts() -> None:
    rep = rp.new_report("http://h", "m", "t", {"suites": ["compliance", "sampled"]})
    rep["completed_suites"] = ["compliance", "sampled"]
    rep["suites"] = {"compliance": {"passed": 16, "total": 16, "ok": True, "failed_requests": 0, "arms": {}},
                     "sampled": {"points": [], "failed_requests": 0}}
    assert rp.verdict(rep) == "pass"
    rep["suites"]["compliance"].update(passed=15, ok=False)
    assert "suite compliance failed" in rp.verdict_reasons(rep)
    rep["suites"]["compliance"].update(passed=16, ok=True)
    rep["suites"]["sampled"]["failed_requests"] = 1
    assert rp.verdict_reasons(rep) == ["suite sampled failed"]


def test_compliance_and_sampled_against_the_standin(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.001"})
    report = run_bench(BenchConfig(url=server.url, output_dir=str(tmp_path), model=MODEL,
                                   suites=["compliance", "sampled"], sampled_requests=6, sampled_concurrency=[1, 2],
                                   max_tokens=32, settle=0.05, poll_interval=0.2, timeout=60))
    assert report["verdict"] == "pass", (report["errors"], report.get("aborted"))
    comp = report["suites"]["compliance"]
    assert comp["ok"] and comp["passed"] == comp["total"] == 16
    for arm in ("prompt", "constrained"):
        answers = comp["arms"][arm]["answers"]
        assert [a["verdict"] for a in answers] == ["pass"] * 8 and all(a["finish_reason"] == "stop" for a in answers)
        assert len(json.loads((tmp_path / "outputs" / f"compliance-{arm}" / "invoices.json").read_text())) == 12
    sampled = {(p["case"], p["concurrency"]): p for p in report["suites"]["sampled"]["points"]}
    assert sorted(sampled) == [("essay", 1), ("essay", 2), ("module", 1), ("module", 2)]
    for point in sampled.values():
        assert point["requests"] == 6 and point["failed_requests"] == 0 and point["tps"] > 0
        assert point["output_tokens"] <= 6 * 32
    md = (tmp_path / "summary.md").read_text()
    assert "## Compliance" in md and "16/16 passed — ok" in md and "| essay-c2 | 6 |" in md


def test_loop_lag_ticks_every_period_and_stops() -> None:
    """The ticker is a self-re-arming timer callback: ~10 ticks in 10 periods, lateness >= 0, nothing after stop."""
    import asyncio

    from sparkfleet_bench.suites import LoopLag

    lag = LoopLag()

    async def run() -> dict[str, Any]:
        lag.start()
        await asyncio.sleep(10.5 * LoopLag.PERIOD)
        out = lag.stop()
        count = len(lag.lags)
        await asyncio.sleep(3 * LoopLag.PERIOD)
        assert len(lag.lags) == count  # cancelled
        return out

    out = asyncio.run(run())
    assert 5 <= len(lag.lags) <= 11 and min(lag.lags) >= -1e-4
    assert out["loop_lag_max_ms"] is not None and out["loop_lag_max_ms"] >= out["loop_lag_p99_ms"] >= 0
