"""The memory guard program that runs on a node as a transient systemd service.

spark_memory_guard ships this file to the node (as memguard.py) next to a copy of spark_memguard.py and
starts it with systemd-run. Each interval it reads MemAvailable, inspects the container, asks
spark_memguard.decide what to do, kills the container with `docker kill --signal KILL` on a trip, writes
one journal line per sample (debug) or event (err, with wall-clock time and value) and keeps a status file
that the module reads to confirm the first sample. Everything it touches goes through a Host object so
the loop runs in tests with a fake host.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

try:
    from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_memguard import (
        ABSENT, RUNNING, STOPPED, STOPPED_BY_SIGNAL, GuardConfig, Observation, WatchState, advance, decide,
        journal_line, kill_line, mem_available, next_sleep, should_write, status_document)
except ImportError:  # on the node: run as a program next to its copy of spark_memguard.py
    from spark_memguard import (  # type: ignore[no-redef]
        ABSENT, RUNNING, STOPPED, STOPPED_BY_SIGNAL, GuardConfig, Observation, WatchState, advance,
        decide, journal_line, kill_line, mem_available, next_sleep, should_write, status_document)


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Host:
    """The node: clock, /proc/meminfo, docker, the journal (stderr) and the status file."""

    def __init__(self, docker: str, meminfo: str = "/proc/meminfo") -> None:
        self.docker = docker
        self.meminfo_path = meminfo

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> str:
        return utc_now()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def mem_available(self) -> Optional[int]:
        try:
            with open(self.meminfo_path, encoding="ascii") as handle:
                return mem_available(handle.read())
        except (OSError, ValueError):
            return None

    def container(self, name: str) -> Tuple[str, str]:
        """(running|stopped|absent, why inspect failed)."""
        try:
            done = subprocess.run([self.docker, "inspect", "--format", "{{.State.Running}}", name],
                                  capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ABSENT, str(exc)
        if done.returncode != 0:
            return ABSENT, f"rc {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}"
        return (RUNNING if done.stdout.strip() == "true" else STOPPED), ""

    def kill(self, name: str) -> Tuple[int, str]:
        try:
            done = subprocess.run([self.docker, "kill", "--signal", "KILL", name],
                                  capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 127, str(exc)
        return done.returncode, done.stderr or done.stdout

    def emit(self, line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def write_status(self, path: str, doc: Dict[str, Any]) -> None:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, sort_keys=True)
        os.replace(tmp, path)


def run(config: GuardConfig, host: Any, pid: int, stop: Callable[[], bool] = lambda: False) -> int:
    """Sample until the guard decides to exit (or stop() turns true); return the exit code."""
    started_at = host.wall()
    state = WatchState(started=host.now())
    doc: Optional[Dict[str, Any]] = None
    last_write = float("-inf")
    while not stop():
        began = host.now()
        available = host.mem_available()
        container, note = host.container(config.container)
        obs = Observation(now=host.now(), mem_available=available, container=container, note=note)
        if stop():
            break  # a sample taken while being stopped proves nothing; never kill on it
        verdict = decide(config, state, obs)
        wall = host.wall()
        host.emit(journal_line(config, obs, verdict, wall))
        if verdict.kill:
            rc, output = host.kill(config.container)
            host.emit(kill_line(config, rc, output, wall))
        state = advance(state, obs)
        new = status_document(config, pid, started_at, doc, obs, verdict, state, wall)
        if should_write(verdict, doc is None or new["status"] != doc["status"], doc is None, obs.now, last_write):
            host.write_status(config.state_file, new)
            last_write = obs.now
        doc = new
        if verdict.exit_code is not None:
            return verdict.exit_code
        host.sleep(next_sleep(config.interval, began, host.now()))
    if doc is not None:
        host.write_status(config.state_file, dict(doc, status=STOPPED_BY_SIGNAL, event="stopped", exit_code=0))
    return 0


def parse_args(argv: Sequence[str]) -> Tuple[GuardConfig, str]:
    parser = argparse.ArgumentParser(prog="memguard", description="sparkfleet fail-closed memory guard")
    parser.add_argument("--container", required=True)
    parser.add_argument("--phase", required=True, choices=("startup", "steady"))
    parser.add_argument("--threshold-bytes", required=True, type=int)
    parser.add_argument("--interval", required=True, type=float)
    parser.add_argument("--wait-for-container", required=True, type=int)
    parser.add_argument("--unit", required=True)
    parser.add_argument("--state-file", required=True)
    parser.add_argument("--docker", default="docker")
    args = parser.parse_args(list(argv))
    config = GuardConfig(container=args.container, phase=args.phase, threshold_bytes=args.threshold_bytes,
                         interval=args.interval, wait_for_container=args.wait_for_container, unit=args.unit,
                         state_file=args.state_file)
    return config, args.docker


def main(argv: Optional[List[str]] = None) -> int:
    config, docker = parse_args(sys.argv[1:] if argv is None else argv)
    stopping: List[int] = []

    def _on_term(signum: int, _frame: Any) -> None:
        stopping.append(signum)

    # systemctl stop sends SIGTERM: finish the current sample, record "stopped" and exit 0.
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    host = Host(docker)
    host.emit(f"<6>armed {config.phase} guard for {config.container}: threshold {config.threshold_bytes} bytes, "
              f"interval {config.interval:g}s, wait {config.wait_for_container}s, status {config.state_file}")
    return run(config, host, os.getpid(), stop=lambda: bool(stopping))


if __name__ == "__main__":
    sys.exit(main())
