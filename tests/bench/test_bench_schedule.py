"""Scheduled benchmark: Prometheus textfile, history pruning, promotion, and the role's rendered units
driving the scheduled runner against the stand-in (what the systemd unit executes)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from sparkfleet_bench.metrics import parse_prometheus
from sparkfleet_bench.report import new_report
from sparkfleet_bench.schedule import (
    promote, prometheus_textfile, prune_history, write_textfile)
from sparkfleet_bench.stats import summarize

from test_bench_monitor import fake_rank
from conftest import MODEL, Standin
from testlib import BENCH_PARENT, COLLECTION, ROOT

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+(inf)?$')


def _report(verdict: str) -> dict[str, Any]:
    rep = new_report("http://h:8000", "m", "2026-11-29T03:30:00Z", {"suites": ["quality", "decode"]})
    rep.update(finished="2026-11-29T03:36:40Z", verdict=verdict, client={"cpu_s": 0.8},
               completed_suites=["quality", "decode"])
    rep["suites"] = {"quality": {"passed": 5, "ok": True, "runs": []},
                     "decode": {"points": [{"case": "prose", "concurrency": 4, "n": 3, "failed_requests": 0,
                                            "metrics": {"tps": summarize([190.0, 200.0, 210.0]),
                                                        "ttft_s": summarize([0.2, 0.2, 0.2])}}]}}
    rep["monitors"] = {"halted": None, "nodes": {
        "dgx1": {"min_available_gib": 5.5, "max_gpu_c": 71.0, "max_zone_c": 64.5, "min_sm_clock_mhz": 2405.0,
                 "clock_latch": False, "timeline": [{"t": 1.0}]},
        "dgx2": {"min_available_gib": 20.25, "max_gpu_c": None, "max_zone_c": 60.0, "min_sm_clock_mhz": None,
                 "clock_latch": False, "timeline": []}}}
    return rep


def test_textfile_is_valid_and_carries_the_headline(tmp_path: Path) -> None:
    text = prometheus_textfile(_report("regression"))
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or SAMPLE.match(line), line
    values = parse_prometheus(text)
    assert values["sparkfleet_bench_verdict"] == 1  # exactly one verdict label is 1
    assert 'sparkfleet_bench_verdict{model="m",url="http://h:8000",verdict="regression"} 1' in text
    point = 'model="m",url="http://h:8000",case="prose",concurrency="4",depth="0"'
    assert f"sparkfleet_bench_decode_tokens_per_second{{{point}}} 200" in text
    # the interval of the mean is exported beside it: 200 ± t(2) * 10 / sqrt(3)
    assert values["sparkfleet_bench_decode_ci95_lower_tokens_per_second"] == pytest.approx(175.159, abs=1e-3)
    assert values["sparkfleet_bench_decode_ci95_upper_tokens_per_second"] == pytest.approx(224.841, abs=1e-3)
    assert values["sparkfleet_bench_ttft_seconds"] == pytest.approx(0.2)
    # base units only, and the unit ends every name
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert not [n for n in names if "millisecond" in n or "_ms" in n]
    assert all(n.endswith(("_seconds", "_per_second", "_verdict", "_requests", "_aborted", "_passed", "_regressions",
                           "_bytes", "_celsius", "_hertz", "_halted", "_latch"))
               for n in names), names
    # what the monitors saw per rank, in base units; a figure a rank did not sample is left out
    assert 'sparkfleet_bench_monitor_min_available_bytes{model="m",url="http://h:8000",node="dgx1"} 5905580032' in text
    assert 'sparkfleet_bench_monitor_min_sm_clock_hertz{model="m",url="http://h:8000",node="dgx1"} 2405000000' in text
    assert 'node="dgx2"} ' in text and 'sparkfleet_bench_monitor_max_gpu_celsius{model="m",url="http://h:8000",node="dgx2"}' \
        not in text and values["sparkfleet_bench_monitor_halted"] == 0
    # no label whose value changes from run to run: two runs at other times, of other reports, give the same series
    later = _report("pass")
    later.update(finished="2026-11-30T03:36:40Z", started="2026-11-30T03:30:00Z")
    later["suites"]["decode"]["points"][0]["metrics"]["tps"] = summarize([150.0, 160.0, 170.0])

    def series(txt: str) -> set[str]:
        return {line.rsplit(" ", 1)[0] for line in txt.splitlines() if not line.startswith("#")}

    assert series(prometheus_textfile(later)) == series(text)
    assert "2026" not in "".join(series(text)) and "bench.json" not in text
    assert values["sparkfleet_bench_last_run_timestamp_seconds"] == 1795923400.0
    path = write_textfile(tmp_path / "tf", text)
    assert path.name == "sparkfleet_bench.prom" and oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in (tmp_path / "tf").iterdir()] == ["sparkfleet_bench.prom"]


def test_prune_and_promote(tmp_path: Path) -> None:
    stamps = [f"2026112{i}T033000Z" for i in range(5)]
    for stamp in stamps:
        (tmp_path / stamp).mkdir()
    (tmp_path / "notes").mkdir()
    removed = prune_history(tmp_path, 2)
    assert [Path(p).name for p in removed] == stamps[:3]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(stamps[3:] + ["notes"])
    with pytest.raises(ValueError):
        prune_history(tmp_path, 0)
    (tmp_path / "bad.json").write_text(json.dumps(_report("fail")))
    with pytest.raises(ValueError, match="not a complete pass"):
        promote(tmp_path / "bad.json", tmp_path / "base.json")
    (tmp_path / "good.json").write_text(json.dumps(_report("pass")))
    promote(tmp_path / "good.json", tmp_path / "b" / "base.json")
    assert json.loads((tmp_path / "b" / "base.json").read_text())["verdict"] == "pass"


def _install(tmp_path: Path) -> Path:
    """The node's install directory as the role lays it out: the bench package's modules (the role's fileglob of
    *.py) in lib/sparkfleet_bench, lib/ the unit's PYTHONPATH, and nothing else."""
    role_vars = yaml.safe_load((COLLECTION / "roles" / "bench_schedule" / "vars" / "main.yml").read_text())
    assert role_vars["bench_schedule_package_src"] == "{{ role_path | dirname | dirname }}/plugins/module_utils/sparkfleet_bench"
    assert role_vars["bench_schedule_library_dir"].endswith("}}/lib/sparkfleet_bench")
    install = tmp_path / "install"
    (install / "lib" / "sparkfleet_bench").mkdir(parents=True)
    for module in (BENCH_PARENT / "sparkfleet_bench").glob("*.py"):
        shutil.copy2(module, install / "lib" / "sparkfleet_bench" / module.name)
    return install


def _render(tmp_path: Path, url: str) -> Path:
    out = tmp_path / "rendered"
    out.mkdir()
    extra = {"bench_schedule_test_dir": str(out), "spark_bench_schedule_url": url,
             "spark_bench_schedule_model": MODEL, "spark_bench_schedule_install_dir": str(_install(tmp_path)),
             "spark_bench_schedule_python": sys.executable, "spark_bench_schedule_config": str(out / "bench-schedule.json"),
             "spark_bench_schedule_history_dir": str(tmp_path / "history"),
             "spark_bench_schedule_baseline": str(tmp_path / "state" / "baseline.json"),
             "spark_bench_schedule_textfile_dir": str(tmp_path / "textfile"), "spark_bench_schedule_keep": 1,
             "spark_bench_schedule_concurrency": [2], "spark_bench_schedule_cases": ["code-nothink"],
             "spark_bench_schedule_suites": ["decode"], "spark_bench_schedule_identity": {"serve_profile": "tp3-64k-r6"},
             # as -e gives them: strings, typed by the role as the spark_bench module types its options
             "spark_bench_schedule_min_samples": "2", "spark_bench_schedule_max_samples": "2",
             "spark_bench_schedule_max_tokens": 32, "spark_bench_schedule_timeout": "20",
             "spark_bench_schedule_monitors": [{"node": "r0", "argv": fake_rank(tmp_path, "r0", 11.0)[0],
                                                "python": sys.executable, "gpu_required": False}],
             "spark_bench_schedule_monitor_limits": {"interval_s": 0.2}}
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "tests/bench/render_bench_schedule.yml",
                           "-e", json.dumps(extra)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    return out


def test_rendered_units_run_the_scheduled_benchmark(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    out = _render(tmp_path, server.url)
    service = (out / "sparkfleet-bench.service").read_text()
    timer = (out / "sparkfleet-bench.timer").read_text()
    assert "OnCalendar=*-*-* 03:30:00" in timer and "Persistent=true" in timer
    assert "Unit=sparkfleet-bench.service" in timer and "WantedBy=timers.target" in timer
    assert "Type=oneshot" in service and f"ReadWritePaths={tmp_path / 'history'}" in service
    config = json.loads((out / "bench-schedule.json").read_text())
    assert config["url"] == server.url and config["keep"] == 1 and config["api_key_file"] is None
    assert config["identity"] == {"serve_profile": "tp3-64k-r6"}
    # only the bench options the site set, typed; the others take the bench's own defaults on the node
    assert {k: config[k] for k in ("suites", "concurrency", "cases", "min_samples", "max_samples", "max_tokens",
                                   "timeout")} == {"suites": ["decode"], "concurrency": [2], "cases": ["code-nothink"],
                                                   "min_samples": 2, "max_samples": 2, "max_tokens": 32, "timeout": 20.0}
    assert not {"depths", "precision", "tolerance"} & set(config)
    assert config["window"] == "" and config["hold_file"] == "/var/lib/sparkfleet/bench/hold"
    if shutil.which("systemd-analyze"):
        verify = subprocess.run(["systemd-analyze", "verify", str(out / "sparkfleet-bench.service"),
                                 str(out / "sparkfleet-bench.timer")], capture_output=True, text=True, timeout=60)
        assert "Unknown key" not in verify.stderr and "Invalid" not in verify.stderr, verify.stderr
    exec_start = shlex.split(re.search(r"^ExecStart=(.*)$", service, re.M).group(1))
    env = {**os.environ, **dict(line.split("=", 1)[1].split("=", 1) for line in service.splitlines()
                                if line.startswith("Environment="))}
    assert exec_start[1:3] == ["-m", "sparkfleet_bench.scheduled"]
    # the unit's environment imports the installed copy, not the venv's editable install
    where = subprocess.run([exec_start[0], "-c", "import sparkfleet_bench; print(sparkfleet_bench.__file__)"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(tmp_path / "install" / "lib" / "sparkfleet_bench" / "__init__.py"), where.stderr

    def run_unit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(exec_start, env=env, capture_output=True, text=True, timeout=120)

    first = run_unit()
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "no promoted baseline" in first.stdout
    promoted = subprocess.run(exec_start + ["--promote", "latest"], env=env, capture_output=True, text=True, timeout=60)
    assert promoted.returncode == 0, promoted.stderr
    second = run_unit()
    assert second.returncode in (0, 3), second.stdout[-2000:]
    history = tmp_path / "history"
    reports = sorted(p.name for p in history.iterdir() if p.name != "latest")
    assert len(reports) == 1  # keep = 1
    assert os.readlink(history / "latest") == reports[0]
    # every scheduled run was monitored: the rank's memory sampled through its stream
    monitored = json.loads((history / "latest" / "bench.json").read_text())["monitors"]
    assert monitored["nodes"]["r0"]["min_available_gib"] == 11.0 and monitored["halted"] is None
    report = json.loads((history / "latest" / "bench.json").read_text())
    assert report["comparison"]["baseline"] == str(tmp_path / "state" / "baseline.json")
    assert report["comparison"]["points"]
    assert report["identity"]["serve_profile"] == "tp3-64k-r6" and report["identity"]["server_version"]
    prom = (tmp_path / "textfile" / "sparkfleet_bench.prom").read_text()
    assert f'verdict="{report["verdict"]}"}} 1' in prom
    assert parse_prometheus(prom)["sparkfleet_bench_decode_tokens_per_second"] > 0
