"""Windows and holds of the scheduled benchmark: when a run may start, and a hold that stops one in progress."""
from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pytest
from sparkfleet_bench.schedule import (
    hold_reason, in_window, parse_window, skip_reason)
from sparkfleet_bench.suites import BenchConfig, run_bench

from conftest import MODEL, Standin
from testlib import bench_command

SCHEDULED = bench_command("sparkfleet_bench.scheduled")


def _at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, 2, hour, minute)


def test_windows_parse_and_wrap_past_midnight() -> None:
    assert parse_window("") is None and in_window(None, _at(12))
    assert parse_window("01:00-05:00") == (60, 300)
    night = parse_window("01:00-05:00")
    assert [in_window(night, _at(h, m)) for h, m in ((0, 59), (1, 0), (4, 59), (5, 0), (12, 0))] == \
        [False, True, True, False, False]
    wrap = parse_window("22:30-02:00")
    assert [in_window(wrap, _at(h, m)) for h, m in ((22, 29), (22, 30), (23, 59), (0, 0), (1, 59), (2, 0))] == \
        [False, True, True, True, True, False]
    for bad in ("1:00-5:00", "01:00", "25:00-01:00", "01:00-01:00", "night"):
        with pytest.raises(ValueError):
            parse_window(bad)


def test_holds_and_skip_reasons(tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    assert hold_reason("") is None and hold_reason(str(hold)) is None
    assert skip_reason("01:00-05:00", str(hold), _at(3)) is None
    assert skip_reason("01:00-05:00", str(hold), _at(6)) == \
        "outside the workload window 01:00-05:00 (local time now 06:00)"
    hold.write_text("")
    assert skip_reason("", str(hold), _at(3)) == f"hold file {hold} is present"
    hold.write_text(json.dumps({"holder": "kernel upgrade", "since": "2026-12-02T01:00:00Z"}))
    assert skip_reason("", str(hold), _at(3)) == f"hold file {hold} is present (holder kernel upgrade)"


def test_a_hold_stops_a_run_at_the_next_point_boundary(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    hold = tmp_path / "hold"
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if "n=1" in line:  # the first measured round is done: an operator sets a hold
            hold.write_text("{}")

    report = run_bench(BenchConfig(url=server.url, output_dir=str(tmp_path / "out"), model=MODEL, suites=["decode"],
                                   concurrency=[1, 2], cases=["code-nothink"], max_tokens=16, min_samples=3,
                                   max_samples=3, settle=0.05, poll_interval=0.2, hold_file=str(hold)), log=log)
    assert report["verdict"] == "fail" and report["aborted"].startswith(f"hold: {hold} appeared")
    assert report["completed_suites"] == []
    # stopped right after the round in which the hold appeared: one measured sample, no more
    assert sum("n=" in line for line in lines) == 1
    on_disk = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert on_disk["verdict"] == "fail" and on_disk["aborted"].startswith("hold:")


def _config(tmp_path: Path, url: str, **extra: Any) -> Path:
    config = {"url": url, "model": MODEL, "suites": ["decode"], "concurrency": [1], "cases": ["code-nothink"],
              "min_samples": 2, "max_samples": 2, "max_tokens": 16, "timeout": 20,
              "history_dir": str(tmp_path / "history"), "baseline": str(tmp_path / "baseline.json"), "keep": 3,
              "textfile_dir": str(tmp_path / "textfile"), **extra}
    path = tmp_path / "bench-schedule.json"
    path.write_text(json.dumps(config))
    return path


def _run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(SCHEDULED + ["--config", str(config)], capture_output=True, text=True, timeout=120)


def test_the_scheduled_runner_skips_outside_its_window_and_under_a_hold(standin: Callable[..., Standin],
                                                                        tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    now = datetime.now()
    # a one-minute window that ended a few minutes ago (minute arithmetic wraps around the day)
    start = (now.hour * 60 + now.minute - 10) % 1440
    window = f"{start // 60:02d}:{start % 60:02d}-{(start + 1) // 60 % 24:02d}:{(start + 1) % 60:02d}"
    outside = _run(_config(tmp_path, server.url, window=window))
    assert outside.returncode == 0, outside.stderr
    assert outside.stdout.startswith(f"skipped: outside the workload window {window}") and "no report" in outside.stdout
    assert not (tmp_path / "history").exists() and not (tmp_path / "textfile").exists()
    hold = tmp_path / "hold"
    hold.write_text(json.dumps({"holder": "lab window"}))
    held = _run(_config(tmp_path, server.url, hold_file=str(hold)))
    assert held.returncode == 0 and held.stdout.startswith(f"skipped: hold file {hold} is present (holder lab window)")
    assert not (tmp_path / "history").exists()
    bad = _run(_config(tmp_path, server.url, window="nightly"))
    assert bad.returncode == 2 and "is not HH:MM-HH:MM" in bad.stderr
    hold.unlink()
    ran = _run(_config(tmp_path, server.url, hold_file=str(hold), window=""))
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert json.loads((tmp_path / "history" / "latest" / "bench.json").read_text())["verdict"] == "pass"
