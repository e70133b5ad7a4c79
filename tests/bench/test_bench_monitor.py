"""Run monitors: the sampler's parsing (fixtures in the formats /proc/meminfo, thermal zones and nvidia-smi print),
the halt rules, the per-rank record, and whole runs against the stand-in that a rank's memory, silence, dead
stream or unreadable GPU halts."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from sparkfleet_bench.monitor import (
    BOOT, MonitorLimits, MonitorSpec, NodeRecord, halt_reason, latched, monitor_reasons, monitor_warnings,
    sampler_argv, sampler_program, spec_problems)
from sparkfleet_bench.sampler import (
    GPU_FIELDS, GPU_FIELDS_NO_TLIMIT, hottest_zone_c, parse_gpu_csv, parse_meminfo, query_gpus)
from sparkfleet_bench.suites import (
    BenchConfig, run_bench, validate)

from conftest import MODEL, Standin

DOUBLES = Path(__file__).parent / "doubles"
GIB_KIB = 1024 * 1024


def meminfo(available_gib: float, swap_used_gib: float = 0.0) -> str:
    """/proc/meminfo as the kernel prints it (kB columns), with the fields the sampler reads among others."""
    avail, swap_total = int(available_gib * GIB_KIB), 16 * GIB_KIB
    return (f"MemTotal:       127535216 kB\nMemFree:         1234567 kB\nMemAvailable:   {avail:>9} kB\n"
            f"Buffers:           12345 kB\nCached:          8765432 kB\nSwapCached:            0 kB\n"
            f"SwapTotal:      {swap_total:>9} kB\nSwapFree:       {swap_total - int(swap_used_gib * GIB_KIB):>9} kB\n"
            "HugePages_Total:       0\nHugepagesize:       2048 kB\n")


# nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits: ", " between fields, [N/A] where unsupported.
SMI_HEALTHY = "0, 47, 38, 2405, 11.25, 93, 0x0000000000000000\n"
SMI_LATCHED = "0, 44, 41, 611, [N/A], 98, 0x0000000000000000\n"
SMI_SLOWDOWN = "0, 86, 3, 1800, 92.40, 100, 0x0000000000000060\n"


def test_meminfo_and_zones_parse_as_the_kernel_prints_them() -> None:
    assert parse_meminfo(meminfo(10.5, 0.25)) == {"mem_available_kib": int(10.5 * GIB_KIB),
                                                  "swap_used_kib": int(0.25 * GIB_KIB)}
    assert parse_meminfo("MemTotal: 1 kB\n") == {}
    assert hottest_zone_c(["45000\n", "52500\n", "garbage\n", ""]) == 52.5
    assert hottest_zone_c([]) is None


def test_gpu_lines_parse_with_unsupported_cells_and_event_reasons() -> None:
    assert parse_gpu_csv(SMI_HEALTHY) == [{"index": 0, "temp_c": 47.0, "headroom_c": 38.0, "sm_clock_mhz": 2405.0,
                                           "power_w": 11.25, "util_pct": 93.0, "event_reasons": 0}]
    latched_gpu = parse_gpu_csv(SMI_LATCHED)[0]
    assert latched_gpu["power_w"] is None and latched_gpu["sm_clock_mhz"] == 611.0
    assert parse_gpu_csv(SMI_SLOWDOWN)[0]["event_reasons"] == 0x60
    with pytest.raises(ValueError, match="7 were asked for"):
        parse_gpu_csv("0, 47, 2405\n")


def _done(code: int, out: str = "", err: str = "") -> "subprocess.CompletedProcess[str]":
    return subprocess.CompletedProcess([], code, out, err)


def test_gpu_query_falls_back_without_the_headroom_field_and_names_failures() -> None:
    asked: list[str] = []

    def old_smi(argv: Any) -> "subprocess.CompletedProcess[str]":
        asked.append(argv[1])
        if "tlimit" in argv[1]:
            return _done(2, 'Field "temperature.gpu.tlimit" is not a valid field to query.\n')
        return _done(0, "0, 47, 2405, 11.25, 93, 0x0000000000000000\n")

    assert query_gpus("/usr/bin/nvidia-smi", old_smi)["gpus"][0] == {
        "index": 0, "temp_c": 47.0, "sm_clock_mhz": 2405.0, "power_w": 11.25, "util_pct": 93.0, "event_reasons": 0}
    assert asked == ["--query-gpu=" + ",".join(GPU_FIELDS), "--query-gpu=" + ",".join(GPU_FIELDS_NO_TLIMIT)]
    assert query_gpus(None) == {"error": "nvidia-smi not found"}
    failed = query_gpus("nvidia-smi", lambda _a: _done(9, "", "NVIDIA-SMI has failed because it couldn't "
                                                       "communicate with the NVIDIA driver.\n"))
    assert failed == {"error": "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with "
                               "the NVIDIA driver."}
    assert query_gpus("nvidia-smi", lambda _a: _done(0, "")) == {"error": "nvidia-smi listed no GPU"}


LIMITS = MonitorLimits()


@pytest.mark.parametrize("sample, required, reason", [
    ({"mem_available_kib": 10 * GIB_KIB, "zone_max_c": 60.0}, True, None),
    ({"mem_available_kib": 3.5 * GIB_KIB}, True, "dgx1: MemAvailable 3.50 GiB below the floor 4 GiB"),
    ({}, True, "dgx1: MemAvailable missing from /proc/meminfo"),
    ({"mem_available_kib": 10 * GIB_KIB, "zone_max_c": 98.0}, True,
     "dgx1: thermal zone at 98 °C, at or above the limit 98 °C"),
    ({"mem_available_kib": 10 * GIB_KIB, "gpu": {"gpus": parse_gpu_csv(SMI_SLOWDOWN)}}, True,
     "dgx1: GPU 0 3 °C from its slowdown temperature (halts within 5 °C)"),
    ({"mem_available_kib": 10 * GIB_KIB, "gpu": {"gpus": [{"index": 0, "temp_c": 91.0}]}}, True,
     "dgx1: GPU 0 at 91 °C, at or above the limit 90 °C"),
    ({"mem_available_kib": 10 * GIB_KIB, "gpu": {"error": "nvidia-smi not found"}}, True,
     "dgx1: GPU not readable under device policy require: nvidia-smi not found"),
    ({"mem_available_kib": 10 * GIB_KIB, "gpu": {"error": "nvidia-smi not found"}}, False, None),
    ({"mem_available_kib": 10 * GIB_KIB, "gpu": {"gpus": parse_gpu_csv(SMI_LATCHED)}}, True, None),
])
def test_halt_rules(sample: dict[str, Any], required: bool, reason: Optional[str]) -> None:
    spec = MonitorSpec(node="dgx1", memory_floor_gib=4.0, gpu_required=required)
    assert halt_reason(spec, sample, LIMITS) == reason


def test_the_record_keeps_extremes_flags_and_a_sparse_timeline() -> None:
    record = NodeRecord(MonitorSpec(node="dgx2", memory_floor_gib=4.0), MonitorLimits(timeline_s=10))
    for second in range(25):
        gpu = {"gpus": parse_gpu_csv(SMI_LATCHED if second == 12 else SMI_HEALTHY)} if second % 6 == 0 else None
        record.add({"t": 1000.0 + second, "mem_available_kib": (20 - second * 0.5) * GIB_KIB,
                    "swap_used_kib": (1 + second * 0.01) * GIB_KIB, "zone_max_c": 50.0 + second % 4,
                    **({"gpu": gpu} if gpu else {})})
    rep = record.report()
    assert rep["samples"] == 25 and [s["t"] for s in rep["timeline"]] == [1000.0, 1010.0, 1020.0]
    assert rep["min_available_gib"] == 8.0 and rep["swap_growth_gib"] == 0.24 and rep["max_zone_c"] == 53.0
    assert (rep["min_sm_clock_mhz"], rep["max_sm_clock_mhz"], rep["max_gpu_c"], rep["min_headroom_c"]) == \
        (611.0, 2405.0, 47.0, 38.0)
    assert rep["clock_latch"] and rep["clock_latch_samples"] == 1 and not rep["thermal_slowdown"]
    assert rep["gpu"] == "sampled" and rep["memory_floor_gib"] == 4.0
    report = {"nodes": {"dgx2": rep, "dgx3": {**rep, "clock_latch": False, "thermal_slowdown": True}}}
    assert monitor_reasons(report) == ["thermal slowdown on dgx3 (results are not comparable)"]
    assert monitor_warnings(report)[0].startswith("dgx2: GPU SM clock held at 611 MHz while busy (clock latch")
    assert latched({"gpus": parse_gpu_csv(SMI_LATCHED.replace(", 98,", ", 3,"))}, LIMITS) is False  # idle: no latch


def test_spec_problems_name_node_and_field() -> None:
    assert spec_problems([{"node": "a"}, {"node": "b", "argv": ["ssh", "b"], "memory_floor_gib": 4.5}]) == []
    assert spec_problems([{"node": "a"}, {"node": "a", "argv": "ssh a"}, {"memory_floor_gib": 0}]) == [
        "monitors: node a named twice", "monitors a.argv: must be a list of strings, got 'ssh a'",
        "monitors[2].node: missing", "monitors monitors[2].memory_floor_gib: must be positive"]
    cfg = BenchConfig(url="http://x:1", output_dir="/tmp/x", monitor_limits={"silence": 3, "zone_c": "hot"})
    assert validate(cfg) == ["monitor_limits: unknown ['silence'] (known: gpu_headroom_c, gpu_interval_s, gpu_temp_c, "
                             "interval_s, latch_mhz, latch_util_pct, silence_s, timeline_s, zone_c)",
                             "monitor_limits.zone_c: must be a positive number, got 'hot'"]


def test_ssh_streams_get_the_command_as_one_shell_word() -> None:
    spec = MonitorSpec(node="dgx1", argv=["ssh", "-o", "BatchMode=yes", "admin@dgx1"], remote_shell=True)
    argv = sampler_argv(spec, LIMITS, 1234, 600)
    assert argv[:4] == spec.argv and len(argv) == 5
    assert argv[4].startswith("python3 -c 'import sys;") and argv[4].endswith(
        "' 1234 --interval 1 --gpu-interval 15 --lifetime 600")
    docker = sampler_argv(MonitorSpec(node="dgx1", argv=["docker", "exec", "-i", "dgx1"]), LIMITS, 99, 60)
    assert docker[4:7] == ["python3", "-c", BOOT] and docker[7] == "99"


def fake_rank(tmp_path: Path, name: str, available_gib: float, *extra: str,
              smi: Optional[str] = None) -> tuple[list[str], Path]:
    """A monitor argv through the fake-rank double, and the rank's meminfo fixture (rewrite it to change memory)."""
    mem = tmp_path / f"{name}-meminfo"
    mem.write_text(meminfo(available_gib))
    zones = tmp_path / f"{name}-zones"
    zones.mkdir()
    (zones / "temp0").write_text("51250\n")
    (zones / "temp1").write_text("48000\n")
    argv = [sys.executable, str(DOUBLES / "fake-rank"), str(mem), str(zones / "temp*"),
            smi or str(tmp_path / "absent-nvidia-smi"), *extra, "--"]
    return argv, mem


def test_the_sampler_streams_samples_and_ends_with_its_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = tmp_path / "smi.csv"
    csv.write_text(SMI_HEALTHY)
    monkeypatch.setenv("FAKE_SMI_CSV", str(csv))
    argv, _ = fake_rank(tmp_path, "r0", 12.0, smi=str(DOUBLES / "nvidia-smi"))
    program = sampler_program()
    cmd = sampler_argv(MonitorSpec(node="r0", argv=argv, python=sys.executable),
                       MonitorLimits(interval_s=0.2, gpu_interval_s=0.3), len(program), 60)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(program)
    proc.stdin.flush()
    lines = [json.loads(proc.stdout.readline()) for _ in range(3)]
    proc.stdin.close()
    assert proc.wait(5) == 0, proc.stderr.read() if proc.stderr else ""
    assert lines[0]["mem_available_kib"] == 12 * GIB_KIB and lines[0]["swap_used_kib"] == 0
    assert lines[0]["zone_max_c"] == 51.25 and lines[0]["gpu"]["gpus"][0]["sm_clock_mhz"] == 2405.0
    assert "gpu" not in lines[1] and "gpu" in lines[2] and lines[2]["t"] > lines[0]["t"]


def _run(server: Standin, tmp_path: Path, monitors: list[dict[str, Any]], log: Callable[[str], None] = print,
         **limits: float) -> dict[str, Any]:
    cfg = BenchConfig(url=server.url, output_dir=str(tmp_path / "out"), model=MODEL, suites=["quality", "decode"],
                      concurrency=[1, 2], cases=["code-nothink"], max_tokens=16, min_samples=3, max_samples=3,
                      settle=0.05, poll_interval=0.2, quality_runs=2, monitors=monitors,
                      monitor_limits={"interval_s": 0.2, "gpu_interval_s": 0.5, "timeline_s": 0.5, "silence_s": 3,
                                      **limits})
    assert validate(cfg) == []
    return run_bench(cfg, log)


def test_a_monitored_run_records_every_rank(standin: Callable[..., Standin], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    csv = tmp_path / "smi.csv"
    csv.write_text(SMI_HEALTHY)
    monkeypatch.setenv("FAKE_SMI_CSV", str(csv))
    r0, _ = fake_rank(tmp_path, "r0", 12.0, smi=str(DOUBLES / "nvidia-smi"))
    r1, _ = fake_rank(tmp_path, "r1", 9.0)
    report = _run(server, tmp_path, [{"node": "r0", "argv": r0, "python": sys.executable},
                                     {"node": "r1", "argv": r1, "python": sys.executable, "gpu_required": False}])
    assert report["verdict"] == "pass", report["aborted"]
    nodes = report["monitors"]["nodes"]
    assert list(nodes) == ["r0", "r1"] and report["monitors"]["halted"] is None
    assert nodes["r0"]["gpu"] == "sampled" and nodes["r0"]["max_gpu_c"] == 47.0
    assert nodes["r1"]["gpu"].startswith("not sampled: nvidia-smi not found")
    assert nodes["r1"]["min_available_gib"] == 9.0 and nodes["r1"]["max_zone_c"] == 51.25
    assert all(n["samples"] >= 2 and len(n["timeline"]) >= 2 for n in nodes.values())
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "## Monitors" in summary and "| r1 |" in summary and "9.00 (4.00)" in summary


def test_memory_below_the_floor_halts_the_run(standin: Callable[..., Standin], tmp_path: Path) -> None:
    # Memory runs short the moment the decode matrix starts (no timer), and each decode request takes about 0.3 s:
    # the matrix outlasts the monitor's next samples (every 0.2 s) even on a loaded machine.
    server = standin({"STANDIN_ITL_S": "0.02"})
    r0, mem = fake_rank(tmp_path, "r0", 8.0)

    def log(line: str) -> None:
        if line.startswith("suite decode"):  # memory runs short once the decode matrix starts
            mem.write_text(meminfo(2.25))

    report = _run(server, tmp_path, [{"node": "r0", "argv": r0, "python": sys.executable, "gpu_required": False}],
                  log)
    assert report["verdict"] == "fail"
    assert report["aborted"] == "monitor halt: r0: MemAvailable 2.25 GiB below the floor 4 GiB"
    assert report["completed_suites"] == ["quality"] and report["monitors"]["nodes"]["r0"]["min_available_gib"] == 2.25
    on_disk = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert on_disk["aborted"].startswith("monitor halt: r0: MemAvailable") and on_disk["monitors"]["halted"]


@pytest.mark.parametrize("case, expected", [
    ("silent", "monitor halt: r0: telemetry silent for"),
    ("dead", "monitor halt: r0: monitor stream ended (exit 3)"),
    ("gpu", "monitor halt: r0: GPU not readable under device policy require: nvidia-smi not found"),
])
def test_a_rank_that_stops_reporting_or_cannot_be_read_halts_the_run(
        standin: Callable[..., Standin], tmp_path: Path, case: str, expected: str) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    if case == "dead":
        argv = [sys.executable, "-c", "import sys; sys.stderr.write('connection refused'); sys.exit(3)", "--"]
    else:
        argv, _ = fake_rank(tmp_path, "r0", 8.0, *(["--interval", "60"] if case == "silent" else []))
    started = time.monotonic()
    report = _run(server, tmp_path, [{"node": "r0", "argv": argv, "python": sys.executable,
                                      "gpu_required": case == "gpu"}], silence_s=1.0)
    assert report["verdict"] == "fail" and report["aborted"].startswith(expected), report["aborted"]
    assert time.monotonic() - started < 30
    if case != "silent":  # halted before the first request
        assert report["completed_suites"] == [] and "quality" not in report["suites"]
