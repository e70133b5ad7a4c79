"""sparkfleet-bench-scheduled: one scheduled benchmark (what the bench_schedule role's systemd unit runs).

Starts only inside the workload window ("window", HH:MM-HH:MM local time; empty = any time) and while no hold
file ("hold_file") exists; a skipped run says why, writes no report and exits 0. A hold file that appears during
the run stops it at the next point boundary (verdict fail, aborted "hold: ...").
Runs the configured suites into HISTORY/<UTC>/, compares with the promoted baseline when there is one,
writes the Prometheus textfile (node_exporter textfile collector), points HISTORY/latest at the new
report and keeps the newest N reports. On a node (no pip install) it runs as `python3 -m sparkfleet_bench.scheduled`
with the role's lib/ directory on PYTHONPATH.
  sparkfleet-bench-scheduled --config /etc/sparkfleet/bench-schedule.json
  sparkfleet-bench-scheduled --config ... --promote latest     # make a complete passing report the baseline
Exit status: 0 pass, 1 fail (SIGTERM from systemctl stop included), 3 regression, 2 bad configuration or a
refused promotion.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from .client import read_api_key
from .schedule import (
    prometheus_textfile, promote, prune_history, report_dirs, skip_reason, write_textfile)
from .suites import BenchConfig, run_bench, validate

EXIT = {"pass": 0, "fail": 1, "regression": 3}
SCHEDULE_KEYS = ("history_dir", "baseline", "keep", "textfile_dir", "api_key_file", "window", "hold_file")


def load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(schedule settings, BenchConfig keyword arguments) from the role's JSON file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in ("url", "history_dir", "baseline", "keep", "textfile_dir") if k not in data]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    schedule = {k: data.pop(k) for k in SCHEDULE_KEYS if k in data}
    return schedule, data


def run(schedule: dict[str, Any], bench: dict[str, Any]) -> int:
    try:
        skipped = skip_reason(schedule.get("window") or "", schedule.get("hold_file") or "", datetime.now())
    except ValueError as exc:
        print(f"sparkfleet-bench-scheduled: {exc}", file=sys.stderr)
        return 2
    if skipped:
        print(f"skipped: {skipped}; no report written", flush=True)
        return 0
    history = Path(schedule["history_dir"])
    out = history / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    baseline = Path(schedule["baseline"])
    try:
        api_key = read_api_key(schedule.get("api_key_file"), os.environ)
    except ValueError as exc:
        print(f"sparkfleet-bench-scheduled: {exc}", file=sys.stderr)
        return 2
    cfg = BenchConfig(**bench, output_dir=str(out), compare=str(baseline) if baseline.is_file() else "",
                      api_key=api_key, hold_file=schedule.get("hold_file") or "")
    problems = validate(cfg)
    if problems:
        print("\n".join(f"sparkfleet-bench-scheduled: {p}" for p in problems), file=sys.stderr)
        return 2
    report = run_bench(cfg, log=lambda m: print(f"[bench] {m}", flush=True))
    write_textfile(Path(schedule["textfile_dir"]), prometheus_textfile(report))
    latest = history / "latest"
    tmp_link = history / ".latest.tmp"
    if tmp_link.is_symlink():
        tmp_link.unlink()
    tmp_link.symlink_to(out.name)
    os.replace(tmp_link, latest)
    for removed in prune_history(history, int(schedule["keep"])):
        print(f"pruned {removed}")
    print(f"report {out / 'bench.json'} verdict {report['verdict']}"
          f"{'' if cfg.compare else ' (no promoted baseline at ' + str(baseline) + ')'}")
    return EXIT.get(report["verdict"], 1)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="sparkfleet-bench-scheduled", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--promote", help="'latest' or a report directory name under the history directory")
    args = parser.parse_args(argv)
    try:
        schedule, bench = load(args.config)
    except (OSError, ValueError) as exc:
        print(f"sparkfleet-bench-scheduled: {exc}", file=sys.stderr)
        return 2
    if args.promote:
        history = Path(schedule["history_dir"])
        source = history / args.promote if args.promote != "latest" else (report_dirs(history) or [history])[-1]
        try:
            promote(source / "bench.json", Path(schedule["baseline"]))
        except (OSError, ValueError) as exc:
            print(f"sparkfleet-bench-scheduled: {exc}", file=sys.stderr)
            return 2
        print(f"promoted {source / 'bench.json'} to {schedule['baseline']}")
        return 0
    return run(schedule, bench)


if __name__ == "__main__":
    sys.exit(main())
