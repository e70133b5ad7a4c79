"""Readiness watch: pure decisions (module_utils/spark_serve_ready.py) and the module against a real HTTP server."""
from __future__ import annotations

import http.server
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serve_ready as ready

MODELS = json.dumps({"object": "list", "data": [{"id": "deepseek-v4.1-flash", "object": "model"}]})


def test_parse_container_state_running_and_missing() -> None:
    running = ready.parse_container_state(0, json.dumps({"Status": "running", "Running": True, "ExitCode": 0}))
    assert running.running and ready.container_problem(running) is None
    missing = ready.parse_container_state(1, "")
    assert ready.container_problem(missing) == "container does not exist"


def test_exited_container_names_exit_code_and_oom() -> None:
    state = ready.parse_container_state(0, json.dumps({"Status": "exited", "Running": False, "ExitCode": 137,
                                                       "OOMKilled": True, "Error": ""}))
    assert ready.container_problem(state) == "container is exited, exit code 137, OOM-killed"


def test_guard_problem_inactive_or_tripped() -> None:
    assert ready.guard_problem("u", ready.guard_state("active", {"status": "guarding"})) is None
    tripped = ready.guard_problem("u", ready.guard_state("active", {"status": "tripped", "detail": "below 5 GiB"}))
    assert tripped is not None and "tripped: below 5 GiB" in tripped and "unguarded launch" in tripped
    gone = ready.guard_problem("u", ready.guard_state("inactive", None))
    assert gone is not None and "is inactive (no status file)" in gone


@pytest.mark.parametrize(("status", "body", "expected"), [
    (200, MODELS, True),
    (200, json.dumps({"data": [{"id": "other"}]}), False),
    (503, MODELS, False),
    (200, "not json", False),
    (200, json.dumps({"data": "x"}), False),
])
def test_models_ready(status: int, body: str, expected: bool) -> None:
    assert ready.models_ready(status, body, "deepseek-v4.1-flash") is expected


def test_verdict_order() -> None:
    assert ready.verdict("h", True, ["container is exited"], 1, 10, 5).state == ready.DEAD
    assert ready.verdict("h", True, [], 1, 10, 5).state == ready.READY
    assert ready.verdict("h", False, [], 11, 10, 5).state == ready.TIMEOUT
    assert ready.verdict("h", False, [], 6, 10, 5).state == ready.PENDING
    assert ready.verdict("h", False, [], 1, 10, 5) is None
    assert ready.verdict("dgx2", False, ["a", "b"], 1, 10, 5).message == "dgx2: a; b"


def test_log_excerpt_bounds() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\n"
    tail = ready.log_excerpt(text, lines=3)
    assert tail == "line 97\nline 98\nline 99"
    assert len(ready.log_excerpt("x" * 10000, lines=1)) == 4000


# --- the module, against a real HTTP server on loopback and stand-in docker/systemctl commands ---------------

class _Models(http.server.BaseHTTPRequestHandler):
    ready_after = 0.0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if time.monotonic() < self.ready_after:
            self.send_response(503)
            self.end_headers()
            return
        body = MODELS.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def api() -> Iterator[tuple[str, type[_Models]]]:
    handler = type("Handler", (_Models,), {"ready_after": time.monotonic() + 0.6})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/models", handler
    server.shutdown()


def _tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-in docker/systemctl reading their answers from files the test writes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "docker", f'if [ "$1" = logs ]; then echo "last line"; exit 0; fi\ncat {tmp_path}/state\n')
    _tool(bin_dir, "systemctl", f"cat {tmp_path}/unit\n")
    (tmp_path / "state").write_text(json.dumps({"Status": "running", "Running": True, "ExitCode": 0}))
    (tmp_path / "unit").write_text("active\n")
    guards = tmp_path / "guards"
    guards.mkdir()
    (guards / "c-memguard.json").write_text(json.dumps({"status": "guarding"}))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path


def _args(url: str, node: Path, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict(url=url, model="deepseek-v4.1-flash", container="c", name="dgx1",
                                state_dir=str(node / "guards"), deadline=time.time() + 30, slice=5.0)
    args.update(extra)
    return args


@pytest.mark.timing
def test_module_polls_at_four_hertz_until_ready(run_module: Any, api: tuple[str, Any], node: Path) -> None:
    url, _ = api
    started = time.time()
    failed, result = run_module("spark_serve_ready", _args(url, node))
    assert not failed and result["state"] == "ready" and result["changed"] is False
    # ready 0.6 s after start: at 4 Hz that is the 3rd or 4th poll, and the first success within 0.35 s of it
    assert 3 <= result["polls"] <= 5
    assert 0.6 <= result["first_ready_at"] - started <= 0.6 + 0.35


def test_module_reports_a_dead_rank_at_once(run_module: Any, api: tuple[str, Any], node: Path) -> None:
    url, _ = api
    (node / "state").write_text(json.dumps({"Status": "exited", "Running": False, "ExitCode": 1}))
    failed, result = run_module("spark_serve_ready", _args(url, node))
    assert not failed and result["state"] == "dead" and result["polls"] == 1
    assert result["message"].startswith("dgx1: container is exited, exit code 1")
    assert "last line" in result["log_tail"]


def test_module_hides_secrets_in_a_dead_rank_s_log_lines(run_module: Any, api: tuple[str, Any], node: Path) -> None:
    url, _ = api
    (node / "state").write_text(json.dumps({"Status": "exited", "Running": False, "ExitCode": 3}))
    _tool(node / "bin", "docker", 'if [ "$1" = logs ]; then echo "args: --api-key sk-listed0secret";'
                                  ' echo "STANDIN_LAB_API_KEY=unlisted0value"; echo "NCCL_PROTO=Simple"; exit 0; fi\n'
                                  f"cat {node}/state\n")
    failed, result = run_module("spark_serve_ready", _args(url, node, secrets=["sk-listed0secret"]))
    assert not failed and result["state"] == "dead"
    text = json.dumps(result)
    assert "sk-listed0secret" not in text and "unlisted0value" not in text, text
    assert "STANDIN_LAB_API_KEY=<redacted>" in result["log_tail"] and "NCCL_PROTO=Simple" in result["log_tail"]


def test_module_reports_a_stopped_guard(run_module: Any, api: tuple[str, Any], node: Path) -> None:
    url, _ = api
    (node / "unit").write_text("inactive\n")
    (node / "guards" / "c-memguard.json").write_text(json.dumps({"status": "tripped", "detail": "MemAvailable low"}))
    failed, result = run_module("spark_serve_ready", _args(url, node))
    assert not failed and result["state"] == "dead" and "tripped: MemAvailable low" in result["message"]


def test_module_returns_pending_at_slice_end(run_module: Any, node: Path) -> None:
    failed, result = run_module("spark_serve_ready", _args("http://127.0.0.1:9/v1/models", node, slice=0.6))
    assert not failed and result["state"] == "pending" and 2 <= result["polls"] <= 4


def test_module_times_out_at_the_deadline(run_module: Any, node: Path) -> None:
    args = _args("http://127.0.0.1:9/v1/models", node)
    args["deadline"] = time.time() - 1
    failed, result = run_module("spark_serve_ready", args)
    assert not failed and result["state"] == "timeout"


def test_module_rejects_non_positive_interval(run_module: Any, node: Path) -> None:
    failed, result = run_module("spark_serve_ready", _args("http://127.0.0.1:9/", node, interval=0))
    assert failed and "interval must be positive" in result["msg"]


def test_not_started_yet_forgives_only_a_container_that_never_ran() -> None:
    absent = ready.parse_container_state(1, "")
    created = ready.parse_container_state(0, json.dumps({"Status": "created", "Running": False, "ExitCode": 0}))
    exited = ready.parse_container_state(0, json.dumps({"Status": "exited", "Running": False, "ExitCode": 3}))
    assert ready.not_started_yet(absent, False, 1.0, 60) and ready.not_started_yet(created, False, 1.0, 60)
    assert not ready.not_started_yet(absent, True, 1.0, 60)  # it ran and vanished: dead
    assert not ready.not_started_yet(absent, False, 61.0, 60)  # waited long enough
    assert not ready.not_started_yet(exited, False, 1.0, 60)  # a start that failed is dead at once
    assert ready.rank_problems(None, "u", ready.guard_state("active", {"status": "waiting"})) == []


def test_module_started_before_its_container_waits_for_it(run_module: Any, api: tuple[str, Any], node: Path) -> None:
    url, _ = api
    (node / "state").write_text("")  # docker inspect prints nothing: the container does not exist yet
    failed, result = run_module("spark_serve_ready", _args(url, node, wait_for_container=30))
    # the API comes up 0.6 s after the fixture started; the missing container is not a dead rank meanwhile
    assert not failed and result["state"] == "ready"
    failed, result = run_module("spark_serve_ready", _args(url, node))
    assert not failed and result["state"] == "dead" and "container does not exist" in result["message"]


def test_guard_may_lag_only_for_a_killed_container_behind_a_live_guard() -> None:
    killed = ready.ContainerState(exists=True, status="exited", exit_code=137)
    live = ready.guard_state("active", {"status": "guarding"})
    assert ready.guard_may_lag(killed, "u", live)
    assert not ready.guard_may_lag(killed, "u", ready.guard_state("active", {"status": "tripped"}))
    assert not ready.guard_may_lag(ready.ContainerState(exists=True, status="exited", exit_code=1), "u", live)
    assert not ready.guard_may_lag(ready.ContainerState(exists=True, status="running", running=True), "u", live)
    assert not ready.guard_may_lag(killed, "u", None)


def test_module_names_the_guard_that_killed_the_container(run_module: Any, api: tuple[str, Any], node: Path) -> None:
    url, _ = api
    (node / "state").write_text(json.dumps({"Status": "exited", "Running": False, "ExitCode": 137}))

    def record_trip() -> None:  # the guard writes its status a moment after its kill
        time.sleep(0.4)
        (node / "guards" / "c-memguard.json").write_text(json.dumps({"status": "tripped", "detail": "below 5 GiB"}))

    writer = threading.Thread(target=record_trip)
    writer.start()
    failed, result = run_module("spark_serve_ready", _args(url, node))
    writer.join()
    assert not failed and result["state"] == "dead"
    assert "exit code 137" in result["message"] and "tripped: below 5 GiB" in result["message"]


def test_module_reports_a_killed_container_when_no_guard_records_it(run_module: Any, api: tuple[str, Any],
                                                                    node: Path) -> None:
    url, _ = api
    (node / "state").write_text(json.dumps({"Status": "exited", "Running": False, "ExitCode": 137}))
    started = time.monotonic()
    failed, result = run_module("spark_serve_ready", _args(url, node))
    assert not failed and result["state"] == "dead" and "memory guard" not in result["message"]
    assert time.monotonic() - started >= ready.GUARD_SETTLE_S
