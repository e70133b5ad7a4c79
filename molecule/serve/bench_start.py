#!/usr/bin/env python3
"""Start benchmark (not a test): time from `serve.yml` start to ready on a serve lab with a fixed stand-in
startup time S, the orchestration overhead (ready - S) and the readiness detection latency (the first
successful /v1/models poll minus the moment the head's API came up, read from the head container's
timestamped log line "Application startup complete."). Starts from a stopped group and stops it again.
The last line printed is one JSON object {"ready_s", "startup_s", "overhead_s", "detect_latency_s"}.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "dsv41-karmic-kraken"


def playbook(inventory: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [str(ROOT / ".venv/bin/ansible-playbook"), "-i", inventory, str(ROOT / "playbooks" / name), *extra]
    return subprocess.run(argv, cwd=ROOT, text=True, capture_output=True, check=False)


def head_ready_at(head: str) -> float:
    logs = subprocess.run(["docker", "exec", head, "docker", "logs", "--timestamps", NAME], text=True,
                          capture_output=True, check=True)
    for line in (logs.stdout + logs.stderr).splitlines():
        if "Application startup complete." in line:
            stamp = re.sub(r"(\.\d{6})\d*Z", r"\1+00:00", line.split()[0])
            return datetime.fromisoformat(stamp).timestamp()
    raise SystemExit("the head never logged 'Application startup complete.'")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--head", required=True, help="lab container of rank 0")
    parser.add_argument("--startup-s", type=float, default=5.0)
    args = parser.parse_args()
    if playbook(args.inventory, "stop.yml").returncode != 0:
        raise SystemExit("stop.yml failed before the benchmark")
    started = time.time()
    run = playbook(args.inventory, "serve.yml", "-e", f"serve_lab_startup_s={args.startup_s:g}")
    if run.returncode != 0:
        print(run.stdout[-3000:], file=sys.stderr)
        raise SystemExit("serve.yml failed")
    first = float(re.search(r"first API answer at ([0-9.]+)", run.stdout).group(1))
    api_up = head_ready_at(args.head)
    figures = {"ready_s": round(first - started, 3), "startup_s": args.startup_s,
               "overhead_s": round(first - started - args.startup_s, 3),
               "detect_latency_s": round(first - api_up, 3)}
    print(f"serve.yml start -> first successful /v1/models poll: {figures['ready_s']:.2f} s")
    print(f"stand-in startup time S (all ranks joined -> API up): {args.startup_s:.2f} s")
    print(f"orchestration overhead (ready - S): {figures['overhead_s']:.2f} s (target <= 3 s)")
    print(f"readiness detection latency (first poll success - API up): {figures['detect_latency_s']:.3f} s (target <= 0.3 s)")
    playbook(args.inventory, "stop.yml")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
