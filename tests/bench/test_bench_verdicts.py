"""Honest verdicts: a run that did not complete its suites, a comparison that compared nothing, a report that
is not a complete pass and options that cannot measure anything never end as `pass`.

End-to-end cases feed a tiny loopback server (a /v1/models answer chosen per case, a chat endpoint that holds
every request open) and read the bench.json, summary.md, textfile and exit status the real entry points leave."""
from __future__ import annotations

import json
import signal
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from sparkfleet_bench import report as rp
from sparkfleet_bench.schedule import promote
from sparkfleet_bench.stats import summarize
from sparkfleet_bench.suites import (
    BenchConfig, Runner, run_bench, validate)

from testlib import bench_command

# The CLI and the scheduled runner as commands (python -m, the bench package from PYTHONPATH, as on a node).
BENCH = bench_command()
SCHEDULED = bench_command("sparkfleet_bench.scheduled")
MODELS_OK = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]})


# ---------------------------------------------------------------- pure: verdicts, comparison, promotion

def _point(case: str, conc: int, tps: list[float]) -> dict[str, Any]:
    return {"case": case, "concurrency": conc, "n": len(tps), "failed_requests": 0,
            "metrics": {"tps": summarize(tps), "decode_window_tps": summarize([v * 1.05 for v in tps])}}


def _complete(suites: tuple[str, ...] = ("quality", "decode")) -> dict[str, Any]:
    """A complete passing report, shaped as the runner writes it."""
    rep = rp.new_report("http://h:8000", "m", "2026-12-01T00:00:00Z", {"suites": list(suites)})
    content = {"quality": {"runs": [{"verdict": "pass"}] * 5, "passed": 5, "ok": True},
               "decode": {"points": [_point("prose", 1, [50.0, 50.5, 49.5]), _point("prose", 8, [380.0, 384.0])],
                          "failed_requests": 0}}
    rep["suites"] = {name: content[name] for name in suites}
    rep["completed_suites"] = list(suites)
    rep["finished"] = "2026-12-01T00:05:00Z"
    rep["verdict"] = rp.verdict(rep)
    return rep


def _without_completion_record(rep: dict[str, Any]) -> None:
    del rep["completed_suites"]


NOT_A_PASS = [
    ("stopped by a signal", lambda r: r.update(aborted="stopped by SIGTERM"), "aborted: stopped by SIGTERM"),
    ("unexpected error", lambda r: r.update(aborted="unexpected KeyError: 'id'"), "unexpected KeyError"),
    ("decode never completed", lambda r: r.update(completed_suites=["quality"]), "suites not completed: decode"),
    ("nothing ran", lambda r: r.update(suites={}, completed_suites=[]), "suites not completed: quality, decode"),
    ("nothing requested or run", lambda r: r.update(suites={}, completed_suites=[], workload={"suites": []}),
     "no suite completed"),
    ("no completion record", _without_completion_record, "records no completed suites"),
    ("comparison compared nothing", lambda r: r.update(comparison={"error": "baseline shares no points"}),
     "comparison: baseline shares no points"),
]


def test_a_complete_report_passes() -> None:
    rep = _complete()
    assert rp.verdict_reasons(rep) == [] and rp.verdict(rep) == "pass"
    assert "- verdict: **pass**\n" in rp.summary_markdown(rep)


@pytest.mark.parametrize("mutate, reason", [case[1:] for case in NOT_A_PASS], ids=[case[0] for case in NOT_A_PASS])
def test_a_report_that_did_not_complete_fails_with_its_reason(mutate: Callable[[dict[str, Any]], None],
                                                              reason: str, tmp_path: Path) -> None:
    rep = _complete()
    mutate(rep)
    rep["verdict"] = rp.verdict(rep)
    assert rep["verdict"] == "fail"
    assert any(reason in r for r in rp.verdict_reasons(rep)), rp.verdict_reasons(rep)
    rp.write_outputs(tmp_path, rep)
    summary = (tmp_path / "summary.md").read_text()
    verdict_line = next(line for line in summary.splitlines() if line.startswith("- verdict:"))
    assert verdict_line.startswith("- verdict: **fail** — ") and reason in verdict_line
    assert json.loads((tmp_path / "bench.json").read_text())["verdict"] == "fail"


NO_SHARED_POINTS = [
    ("baseline is an empty report", _complete(), rp.new_report("http://h:8000", "m", "t", {"suites": []})),
    ("this run has no points", _complete(("quality",)), _complete()),
    ("different shape", _complete(),
     {**_complete(), "suites": {"decode": {"points": [_point("code", 2, [60.0, 61.0])]}}}),
]


@pytest.mark.parametrize("current, baseline", [case[1:] for case in NO_SHARED_POINTS],
                         ids=[case[0] for case in NO_SHARED_POINTS])
def test_a_comparison_with_no_shared_points_is_an_error(current: dict[str, Any], baseline: dict[str, Any]) -> None:
    comparison = rp.compare(current, baseline, 3.0, "base.json")
    assert "shares no points" in comparison["error"] and comparison["points"] == []
    current = {**current, "comparison": comparison}
    assert rp.verdict(current) == "fail"
    assert "ERROR: baseline shares no points" in rp.summary_markdown(current)


def test_a_comparison_without_two_samples_anywhere_is_an_error() -> None:
    current, baseline = _complete(), _complete()
    for point in baseline["suites"]["decode"]["points"]:
        point["metrics"] = {"tps": summarize([50.0])}
    comparison = rp.compare(current, baseline, 3.0)
    assert "two samples" in comparison["error"] and rp.verdict({**current, "comparison": comparison}) == "fail"


def _stored(rep: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**rep, **fields}


REFUSED = [
    # what a crashed or stopped run used to leave behind: `pass` with nothing in it
    ("empty pass", _stored(rp.new_report("http://h", "m", "t", {"suites": ["quality", "decode"]}), verdict="pass"),
     "suites not completed: quality, decode"),
    ("stopped pass", _stored(_complete(), aborted="stopped by SIGTERM", completed_suites=["quality"], verdict="pass"),
     "stopped by SIGTERM"),
    ("stored fail", _stored(_complete(), verdict="fail"), "verdict 'fail'"),
    ("regression", _stored(_complete(), comparison={"regressions": 1}, verdict="regression"), "verdict 'regression'"),
    ("nothing to compare", _complete(("quality",)), "no decode or prefill points"),
    ("another schema", _stored(_complete(), schema="other/9"), "schema 'other/9'"),
]


@pytest.mark.parametrize("report, reason", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_promotion_refuses_what_is_not_a_complete_pass(report: dict[str, Any], reason: str, tmp_path: Path) -> None:
    (tmp_path / "bench.json").write_text(json.dumps(report))
    with pytest.raises(ValueError, match="not a complete pass") as refused:
        promote(tmp_path / "bench.json", tmp_path / "state" / "baseline.json")
    assert reason in str(refused.value)
    assert not (tmp_path / "state").exists()


def test_promotion_takes_a_complete_pass(tmp_path: Path) -> None:
    (tmp_path / "bench.json").write_text(json.dumps(_complete()))
    promote(tmp_path / "bench.json", tmp_path / "state" / "baseline.json")
    assert json.loads((tmp_path / "state" / "baseline.json").read_text()) == _complete()


# ---------------------------------------------------------------- options that cannot measure anything

@pytest.mark.parametrize("changes, problem", [
    ({"suites": []}, "suites: at least one suite is required"),
    ({"timeout": 0.0}, "timeout: must be a positive number of seconds, got 0"),
    ({"timeout": -5.0}, "timeout: must be a positive number of seconds, got -5"),
    ({"timeout": float("nan")}, "timeout: must be a positive number of seconds, got nan"),
])
def test_validate_refuses_options_that_measure_nothing(changes: dict[str, Any], problem: str) -> None:
    assert validate(BenchConfig(url="http://h:8000", output_dir="out", **changes)) == [problem]


@pytest.mark.parametrize("argv, problem", [
    (["--suites="], "suites: at least one suite is required"),
    (["--suites", ","], "suites: at least one suite is required"),
    (["--timeout", "0"], "timeout: must be a positive number of seconds, got 0"),
    (["--timeout", "-1.5"], "timeout: must be a positive number of seconds, got -1.5"),
])
def test_cli_refuses_them_as_bad_options(argv: list[str], problem: str, tmp_path: Path) -> None:
    proc = subprocess.run(BENCH + ["--url", "http://127.0.0.1:9", "--output-dir", str(tmp_path / "out"), *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"sparkfleet-bench: {problem}" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def _schedule_config(tmp_path: Path, url: str, **bench: Any) -> Path:
    config = {"url": url, "model": "m", "history_dir": str(tmp_path / "history"),
              "baseline": str(tmp_path / "state" / "baseline.json"), "keep": 3,
              "textfile_dir": str(tmp_path / "textfile"), **bench}
    path = tmp_path / "bench-schedule.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("bench, problem", [
    ({"suites": []}, "suites: at least one suite is required"),
    ({"timeout": 0}, "timeout: must be a positive number of seconds, got 0"),
])
def test_scheduled_runner_refuses_them_as_bad_configuration(bench: dict[str, Any], problem: str,
                                                            tmp_path: Path) -> None:
    config = _schedule_config(tmp_path, "http://127.0.0.1:9", **bench)
    proc = subprocess.run(SCHEDULED + ["--config", str(config)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"sparkfleet-bench-scheduled: {problem}" in proc.stderr, proc.stderr
    assert not (tmp_path / "history").exists() and not (tmp_path / "textfile").exists()


def test_the_module_refuses_them(run_module: Any, tmp_path: Path) -> None:
    failed, result = run_module("spark_bench", {"url": "http://127.0.0.1:9", "output_dir": str(tmp_path),
                                                "suites": [], "timeout": 0})
    assert failed and result["problems"] == ["suites: at least one suite is required",
                                             "timeout: must be a positive number of seconds, got 0"]


# ---------------------------------------------------------------- runs that did not complete

@dataclass
class FakeServer:
    """A loopback server: /v1/models answers as configured, /metrics is absent, every POST is held open."""

    url: str
    posted: threading.Event


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeServer]]:
    release = threading.Event()
    servers: list[ThreadingHTTPServer] = []

    def start(models: str = MODELS_OK, content_type: str = "application/json") -> FakeServer:
        posted = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                return

            def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
                if self.path.endswith("/v1/models"):
                    self._answer(200, content_type, models)
                else:
                    self._answer(404, "text/plain", "not found")

            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                posted.set()
                release.wait(60)  # the run is inside a suite until the test stops it
                self._answer(503, "text/plain", "released")

            def _answer(self, status: int, ctype: str, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return FakeServer(f"http://127.0.0.1:{httpd.server_address[1]}", posted)

    yield start
    release.set()
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _on_disk(out: Path) -> tuple[dict[str, Any], str]:
    return json.loads((out / "bench.json").read_text()), (out / "summary.md").read_text()


def _assert_failed(out: Path, reason: str) -> dict[str, Any]:
    """bench.json and summary.md both say fail and name the reason."""
    report, summary = _on_disk(out)
    assert report["verdict"] == "fail" and reason in report["aborted"], report["aborted"]
    assert report["finished"] and report["client"]["wall_s"] > 0
    assert f"- verdict: **fail** — aborted: {report['aborted']}" in summary
    return report


@pytest.mark.parametrize("content_type, models, reason", [
    ("text/html", "<!doctype html><html><body>Sign in</body></html>", "not an OpenAI model list"),
    ("application/json", "[]", "not an OpenAI model list"),
    ("application/json", '{"data": "m"}', "not an OpenAI model list"),
    ("application/json", '{"data": [{"object": "model"}]}', "not an OpenAI model list"),
    ("application/json", '{"data": []}', "server lists no models"),
], ids=["html", "json list", "data not a list", "card without id", "no models"])
def test_a_strange_model_list_fails_the_run(fake_server: Callable[..., FakeServer], tmp_path: Path,
                                            content_type: str, models: str, reason: str) -> None:
    server = fake_server(models, content_type)
    proc = subprocess.run(BENCH + ["--url", server.url, "--output-dir", str(tmp_path), "--timeout", "10"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stdout.strip().endswith("verdict: fail")
    report = _assert_failed(tmp_path, reason)
    assert report["suites"] == {} and report["completed_suites"] == []


@pytest.mark.parametrize("crashing, completed", [("quality", []), ("decode", ["quality"])])
def test_an_unexpected_error_in_a_suite_fails_the_run(fake_server: Callable[..., FakeServer], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, crashing: str,
                                                      completed: list[str]) -> None:
    async def passes(self: Runner) -> None:
        self.report["suites"]["quality"] = {"runs": [], "passed": 5, "ok": True}

    async def crashes(self: Runner) -> None:
        raise RuntimeError("a bug in the suite")

    monkeypatch.setattr(Runner, "suite_quality", crashes if crashing == "quality" else passes)
    monkeypatch.setattr(Runner, "suite_decode", crashes)
    server = fake_server()
    report = run_bench(BenchConfig(url=server.url, output_dir=str(tmp_path), timeout=10))
    assert report["verdict"] == "fail" and report["completed_suites"] == completed
    assert report["aborted"].startswith("unexpected RuntimeError: a bug in the suite at test_bench_verdicts.py:")
    _assert_failed(tmp_path, "unexpected RuntimeError")


@pytest.mark.parametrize("baseline", ["{not json", "[]"], ids=["not json", "not a report"])
def test_an_unreadable_baseline_fails_the_run(fake_server: Callable[..., FakeServer], tmp_path: Path,
                                              baseline: str) -> None:
    (tmp_path / "base.json").write_text(baseline)
    report = run_bench(BenchConfig(url=fake_server().url, output_dir=str(tmp_path / "out"),
                                   compare=str(tmp_path / "base.json"), timeout=10))
    assert report["verdict"] == "fail" and report["comparison"] is None
    _assert_failed(tmp_path / "out", f"baseline {tmp_path / 'base.json'}")


def _stop_mid_suite(cmd: list[str], server: FakeServer, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.posted.wait(60), "the run never reached its first suite"
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_fails_with_the_signal(fake_server: Callable[..., FakeServer], tmp_path: Path,
                                             sig: signal.Signals) -> None:
    server = fake_server()
    proc = _stop_mid_suite(BENCH + ["--url", server.url, "--output-dir", str(tmp_path), "--timeout", "120"],
                           server, sig)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stdout.strip().endswith("verdict: fail")
    report = _assert_failed(tmp_path, f"stopped by {sig.name}")
    assert report["completed_suites"] == [] and "quality" not in report["suites"]


def test_a_stopped_scheduled_run_is_a_fail_that_cannot_be_promoted(fake_server: Callable[..., FakeServer],
                                                                   tmp_path: Path) -> None:
    server = fake_server()
    config = _schedule_config(tmp_path, server.url, suites=["quality", "decode"], timeout=120)
    proc = _stop_mid_suite(SCHEDULED + ["--config", str(config)], server, signal.SIGTERM)
    assert proc.returncode == 1, proc.stderr[-2000:]
    baseline = tmp_path / "state" / "baseline.json"
    assert proc.stdout.strip().endswith(f"verdict fail (no promoted baseline at {baseline})")
    _assert_failed(tmp_path / "history" / "latest", "stopped by SIGTERM")
    textfile = (tmp_path / "textfile" / "sparkfleet_bench.prom").read_text()
    assert 'verdict="fail"} 1' in textfile and 'verdict="pass"} 0' in textfile
    assert 'sparkfleet_bench_aborted{model="m",url="' + server.url + '"} 1' in textfile
    promoted = subprocess.run(SCHEDULED + ["--config", str(config), "--promote", "latest"],
                              capture_output=True, text=True, timeout=60)
    assert promoted.returncode == 2 and "not a complete pass (aborted: stopped by SIGTERM" in promoted.stderr
    assert not (tmp_path / "state").exists()
