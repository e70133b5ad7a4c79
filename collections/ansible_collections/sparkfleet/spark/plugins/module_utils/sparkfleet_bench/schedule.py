"""The scheduled benchmark's bookkeeping: Prometheus textfile of a report, history pruning, promotion.

`prometheus_textfile` is pure; `write_textfile`, `prune_history` and `promote` touch only the paths they
are given. Used by sparkfleet_bench.scheduled (run by the bench_schedule role's systemd unit).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Optional

from .report import (
    SCHEMA, comparable_points, verdict, verdict_reasons, write_json_atomic)

VERDICTS = ("pass", "fail", "regression")
STAMP = re.compile(r"^\d{8}T\d{6}Z$")
TEXTFILE_NAME = "sparkfleet_bench.prom"


def _esc(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: Any) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items()) + "}" if labels else ""


def _epoch(stamp: Optional[str]) -> Optional[float]:
    if not stamp:
        return None
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def _num(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def _family(name: str, kind: str, text: str, samples: Iterable[tuple[str, Any]]) -> list[str]:
    rows = [f"{name}{labels} {_num(value)}" for labels, value in samples if value is not None]
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *rows] if rows else []


# (report metric, family stem, unit, scale to the base unit, help) of every decode point. Units are base units
# (seconds, not milliseconds), the unit ends the name, and the interval of the mean has its own families.
DECODE_FAMILIES = (
    ("tps", "decode", "tokens_per_second", 1.0, "Aggregate decode tok/s"),
    ("decode_window_tps", "decode_window", "tokens_per_second", 1.0, "Decode tok/s while all streams decode"),
    ("ttft_s", "ttft", "seconds", 1.0, "Time to first token"),
    ("itl_s", "inter_token_latency", "seconds", 1.0, "Gap between token-bearing chunks"),
    ("e2e_s", "e2e_latency", "seconds", 1.0, "Request send to last token"),
    ("step_ms", "step", "seconds", 0.001, "Decode step time"),
)


def _scaled(summary: Optional[dict[str, Any]], scale: float) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """(mean, ci95 lower, ci95 upper) in the base unit; None where the report has no value."""
    if not summary or summary.get("mean") is None:
        return None, None, None
    lo, hi = summary.get("ci95") or (None, None)
    return (summary["mean"] * scale, None if lo is None else lo * scale, None if hi is None else hi * scale)


def _interval_families(stem: str, unit: str, text: str,
                       rows: list[tuple[str, tuple[Optional[float], Optional[float], Optional[float]]]]) -> list[str]:
    """Mean, lower and upper 95 % bound of one metric as three families (sparkfleet_bench_<stem>[_ci95_*]_<unit>)."""
    lines: list[str] = []
    for index, (qualifier, what) in enumerate((("", "mean"), ("_ci95_lower", "lower 95% bound of the mean"),
                                               ("_ci95_upper", "upper 95% bound of the mean"))):
        lines += _family(f"sparkfleet_bench_{stem}{qualifier}_{unit}", "gauge", f"{text} ({what}).",
                         [(labels, values[index]) for labels, values in rows])
    return lines


def prometheus_textfile(report: dict[str, Any]) -> str:
    """node_exporter textfile-collector text with the headline figures and the verdict of one report.

    Labels name what was measured (model, url, case, concurrency, depth, prefill text and size) and stay the same
    from run to run, so every run updates the same series; when a run happened is a value
    (`sparkfleet_bench_last_run_timestamp_seconds`), never a label.
    """
    base = {"model": report.get("model", ""), "url": report.get("url", "")}
    verdict = report.get("verdict")
    points = (report.get("suites", {}).get("decode") or {}).get("points", [])
    prefill = (report.get("suites", {}).get("prefill") or {}).get("points", [])
    quality = report.get("suites", {}).get("quality") or {}
    comparison = report.get("comparison") or {}
    lines: list[str] = []
    lines += _family("sparkfleet_bench_verdict", "gauge", "1 for the verdict of the last scheduled benchmark.",
                     [(_labels(**base, verdict=v), int(v == verdict)) for v in VERDICTS])
    lines += _family("sparkfleet_bench_last_run_timestamp_seconds", "gauge", "Finish time of the last benchmark.",
                     [(_labels(**base), _epoch(report.get("finished")))])
    lines += _family("sparkfleet_bench_failed_requests", "gauge", "Failed requests in the last benchmark.",
                     [(_labels(**base), report.get("failed_requests", 0))])
    lines += _family("sparkfleet_bench_aborted", "gauge", "1 when the last benchmark was aborted.",
                     [(_labels(**base), int(bool(report.get("aborted"))))])
    lines += _family("sparkfleet_bench_quality_passed", "gauge", "Quality-gate runs that passed.",
                     [(_labels(**base), quality.get("passed"))])
    lines += _family("sparkfleet_bench_regressions", "gauge", "Significant regressions against the baseline.",
                     [(_labels(**base), comparison.get("regressions") if comparison else None)])
    for metric, stem, unit, scale, text in DECODE_FAMILIES:
        rows = [(_labels(**base, case=p["case"], concurrency=p["concurrency"], depth=p.get("depth", 0)),
                 _scaled(p["metrics"].get(metric), scale)) for p in points]
        lines += _interval_families(stem, unit, text, rows)
    rows = [(_labels(**base, text=p["text"], size=p["size"]), _scaled(p["metrics"].get("prefill_tps"), 1.0))
            for p in prefill]
    lines += _interval_families("prefill", "tokens_per_second", "Cold prefill tok/s", rows)
    lines += _family("sparkfleet_bench_client_cpu_seconds", "gauge", "Benchmark client CPU time.",
                     [(_labels(**base), (report.get("client") or {}).get("cpu_s"))])
    return "\n".join(lines + _monitor_families(base, report.get("monitors"))) + "\n"


# (record field, family, scale to the base unit, help) of each rank's monitor record.
MONITOR_FAMILIES = (
    ("min_available_gib", "sparkfleet_bench_monitor_min_available_bytes", 1024 ** 3,
     "Lowest MemAvailable of the rank during the benchmark."),
    ("max_gpu_c", "sparkfleet_bench_monitor_max_gpu_celsius", 1.0, "Hottest GPU temperature during the benchmark."),
    ("max_zone_c", "sparkfleet_bench_monitor_max_zone_celsius", 1.0, "Hottest thermal zone during the benchmark."),
    ("min_sm_clock_mhz", "sparkfleet_bench_monitor_min_sm_clock_hertz", 1e6, "Lowest GPU SM clock during the benchmark."),
)


def _monitor_families(base: dict[str, Any], monitors: Optional[dict[str, Any]]) -> list[str]:
    """Per rank (label `node`) what the monitors saw, and whether they halted the run."""
    if not monitors:
        return []
    nodes = monitors.get("nodes") or {}
    lines = _family("sparkfleet_bench_monitor_halted", "gauge", "1 when a monitor halted the last benchmark.",
                    [(_labels(**base), int(bool(monitors.get("halted"))))])
    for field, name, scale, text in MONITOR_FAMILIES:
        lines += _family(name, "gauge", text, [(_labels(**base, node=node), None if rec.get(field) is None
                                                else rec[field] * scale) for node, rec in nodes.items()])
    lines += _family("sparkfleet_bench_monitor_clock_latch", "gauge", "1 when the rank's GPU held a latched clock.",
                     [(_labels(**base, node=node), int(bool(rec.get("clock_latch")))) for node, rec in nodes.items()])
    return lines


_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def parse_window(text: str) -> Optional[tuple[int, int]]:
    """"HH:MM-HH:MM" (local time, may wrap past midnight) -> (start, end) minutes of the day; "" -> None (any
    time). ValueError for anything else, or an empty window (start == end)."""
    text = (text or "").strip()
    if not text:
        return None
    match = _WINDOW.match(text)
    if not match:
        raise ValueError(f"window {text!r} is not HH:MM-HH:MM (24-hour local time, e.g. 01:00-05:00)")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if start == end:
        raise ValueError(f"window {text!r} is empty (start equals end)")
    return start, end


def in_window(window: Optional[tuple[int, int]], now: datetime) -> bool:
    """Whether `now` (its wall-clock time) lies in [start, end), wrapping past midnight when end < start."""
    if window is None:
        return True
    start, end = window
    minute = now.hour * 60 + now.minute
    return start <= minute < end if start < end else minute >= start or minute < end


def hold_reason(hold_file: str) -> Optional[str]:
    """Why a hold is in place (the hold file exists; its holder named when it is JSON with one), or None."""
    if not hold_file:
        return None
    path = Path(hold_file)
    if not path.exists():
        return None
    holder = None
    try:
        data = json.loads(path.read_text(encoding="utf-8")[:65536] or "{}")
        holder = data.get("holder") if isinstance(data, dict) else None
    except (OSError, ValueError):
        pass
    return f"hold file {hold_file} is present" + (f" (holder {holder})" if holder else "")


def skip_reason(window_text: str, hold_file: str, now: datetime) -> Optional[str]:
    """Why a scheduled run must not start now, or None: outside the workload window, or a hold in place."""
    window = parse_window(window_text)
    if not in_window(window, now):
        return f"outside the workload window {window_text} (local time now {now.strftime('%H:%M')})"
    return hold_reason(hold_file)


def write_textfile(directory: Path, text: str, name: str = TEXTFILE_NAME) -> Path:
    """Write atomically (the collector may read at any moment); mode 0644."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=str(directory))
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    target = directory / name
    os.replace(tmp, target)
    return target


def report_dirs(history: Path) -> list[Path]:
    """Report directories under history (named by UTC stamp), oldest first."""
    if not history.is_dir():
        return []
    return sorted(p for p in history.iterdir() if p.is_dir() and STAMP.match(p.name))


def prune_history(history: Path, keep: int) -> list[str]:
    """Remove all but the newest `keep` report directories; returns what was removed."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    dirs = report_dirs(history)
    doomed = dirs[:-keep] if len(dirs) > keep else []
    for path in doomed:
        shutil.rmtree(path)
    return [str(p) for p in doomed]


def promotion_refusal(report: dict[str, Any]) -> Optional[str]:
    """Why a report cannot be the baseline, or None. The report is judged again rather than trusted: a run
    that crashed or was stopped used to write `pass` with nothing measured."""
    if report.get("schema") != SCHEMA:
        return f"schema {report.get('schema')!r} is not {SCHEMA}"
    reasons = verdict_reasons(report)
    if reasons:
        return "; ".join(reasons)
    if report.get("verdict") != "pass" or verdict(report) != "pass":
        return f"verdict {report.get('verdict')!r}, judged {verdict(report)!r}"
    if not comparable_points(report):
        return "no decode or prefill points for later runs to compare with"
    return None


def promote(report_path: Path, baseline: Path) -> None:
    """Make a report the baseline later runs compare with; only a complete pass with points qualifies."""
    report = json.loads(report_path.read_text(encoding="utf-8"))
    refusal = promotion_refusal(report)
    if refusal:
        raise ValueError(f"{report_path}: not a complete pass ({refusal}); only a complete passing report "
                         "can be promoted")
    write_json_atomic(baseline, report)
