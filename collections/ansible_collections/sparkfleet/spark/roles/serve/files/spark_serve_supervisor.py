"""The supervised-mode program (opt-in): installed on every rank as supervise.py next to spark_serve_supervise.py
and spark_memguard.py.

`supervise.py watch --config F` runs on the head as `<container>-supervisor.service`: every `interval` seconds
it asks every rank for its container's state (the head directly, the workers over SSH with the node-to-node
transfer key, `supervise.py rank state`), lets spark_serve_supervise.decide choose, and on a dead rank restarts
the whole group in order: stop the head, stop the workers by ascending rank, start the workers by ascending
rank under confirmed startup guards, the head last, wait until the head answers, steady guards everywhere.
At most `max_restarts` restarts per `window` seconds (the times are kept in `history_file`); beyond that, or
when a memory guard killed the container, it writes why to the journal and ends (the unit stays inactive).

`supervise.py rank <state|stop|start|steady> --config F` is one rank's local part of that.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Sequence

# Siblings installed beside this file: the decisions (this role's files/spark_serve_supervise.py) and the memory
# guard's logic (the collection's module_utils/spark_memguard.py, the very file spark_memory_guard ships).
import spark_memguard as memguard
import spark_serve_supervise as sup

LOG_ERR, LOG_WARNING, LOG_INFO = 3, 4, 6
CONFIRM_TIMEOUT = 5.0


def log(level: int, text: str) -> None:
    """One journal record (journald reads the <N> priority prefix of a service's stderr lines)."""
    sys.stderr.write(f"<{level}>{text}\n")
    sys.stderr.flush()


def run(argv: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 255, "", str(exc))


# --- one rank's local actions -----------------------------------------------------------------------

class Local:
    """This node: docker, systemctl, systemd-run and the guard's status file."""

    def __init__(self, config: Dict[str, Any]) -> None:
        self.config = config
        self.name = str(config["container"])
        self.docker = str(config["docker"])

    def guard_config(self, phase: str) -> Any:
        g = self.config[f"guard_{phase}"]
        return memguard.build_config(self.name, phase, g["threshold"], g["interval"], g["wait"],
                                     state_dir=str(self.config["state_dir"]))

    def state(self, host: str) -> str:
        done = run([self.docker, "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", self.name], 30)
        state, code = sup.container_state(done.returncode, done.stdout)
        doc = memguard.parse_status_document(_read(self.guard_config("steady").state_file))
        return sup.format_state(host, state, code, (doc or {}).get("status") if state != sup.RUNNING else None)

    def disarm(self) -> None:
        unit = memguard.unit_file(self.guard_config("steady").unit)
        run(["systemctl", "stop", "--", unit], 60)
        run(["systemctl", "reset-failed", "--", unit], 30)
        path = self.guard_config("steady").state_file
        if os.path.exists(path):
            os.remove(path)

    def arm(self, phase: str) -> str:
        """Arm the guard and wait for its first sample (the container may only start after that)."""
        self.disarm()
        config = self.guard_config(phase)
        program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memguard.py")
        argv = memguard.systemd_run_argv(config, str(self.config["python"]), program, self.docker)
        done = run(argv, 60)
        if done.returncode != 0:
            raise RuntimeError(f"systemd-run of the {phase} guard failed: {(done.stderr or done.stdout).strip()}")
        deadline = time.monotonic() + CONFIRM_TIMEOUT
        while True:
            shown = run(["systemctl", "show", "--property=LoadState,ActiveState,MainPID", "--",
                         memguard.unit_file(config.unit)], 30)
            verdict, message = memguard.confirmation(config, memguard.parse_systemctl_show(shown.stdout),
                                                     memguard.parse_status_document(_read(config.state_file)))
            if verdict == "confirmed":
                return message
            if verdict == "failed" or time.monotonic() >= deadline:
                self.disarm()
                raise RuntimeError(message if verdict == "failed" else f"{phase} guard did not confirm in time")
            time.sleep(0.1)

    def act(self, action: str, host: str) -> str:
        if action == "state":
            return self.state(host)
        if action == "stop":
            self.disarm()
            done = run([self.docker, "stop", "--time", str(self.config["stop_timeout"]), self.name],
                       float(self.config["stop_timeout"]) + 60)
            return f"{host}: guard disarmed, container stopped (rc {done.returncode})"
        if action == "start":
            message = self.arm("startup")
            done = run([self.docker, "start", self.name], 120)
            if done.returncode != 0:
                self.disarm()
                raise RuntimeError(f"docker start failed: {(done.stderr or done.stdout).strip()}")
            return f"{host}: {message}; container started"
        if action == "steady":
            return f"{host}: {self.arm('steady')}"
        raise ValueError(f"unknown rank action {action}")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


# --- the watch on the head --------------------------------------------------------------------------

class Group:
    """Reach every rank: the head locally, the workers over SSH running this program's `rank` actions."""

    def __init__(self, config: Dict[str, Any], ranks: List[Any], config_path: str) -> None:
        self.config, self.ranks, self.config_path = config, ranks, config_path
        self.local = Local(config)
        self.by_host = {r.host: r for r in ranks}

    def call(self, host: str, action: str) -> subprocess.CompletedProcess[str]:
        rank = self.by_host[host]
        if rank.local:
            try:
                return subprocess.CompletedProcess([], 0, self.local.act(action, host), "")
            except (RuntimeError, OSError) as exc:
                return subprocess.CompletedProcess([], 1, "", str(exc))
        command = [str(self.config["python"]), "-B", str(self.config["program"]), "rank", action, "--host", host,
                   "--config", self.config_path]
        timeout = float(self.config["stop_timeout"]) + 120
        return run(sup.ssh_argv(self.config["ssh"], rank.address, command), timeout)

    def observe(self) -> List[Any]:
        seen = []
        for rank in self.ranks:
            done = self.call(rank.host, "state")
            seen.append(sup.parse_state(done.stdout) if done.returncode == 0 else
                        sup.Seen(rank.host, sup.UNREACHABLE, detail=(done.stderr or done.stdout).strip()[:200]))
        return seen

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(str(self.config["api_url"]), timeout=2) as response:  # noqa: S310
                body = json.loads(response.read(65536).decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return any(m.get("id") == self.config["model"] for m in body.get("data") or [] if isinstance(m, dict))

    def wait_ready(self) -> None:
        deadline = time.monotonic() + float(self.config["ready_timeout"])
        next_check = 0.0
        while time.monotonic() < deadline:
            if self.answers():
                return
            if time.monotonic() >= next_check:
                dead = [s for s in self.observe() if s.state != sup.RUNNING]
                if dead:
                    raise RuntimeError("rank(s) died during the restart: " + ", ".join(f"{s.host} {s.state}" for s in dead))
                next_check = time.monotonic() + 2.0
            time.sleep(0.25)
        raise RuntimeError(f"the head did not answer within {self.config['ready_timeout']} s")

    def restart(self) -> None:
        for action, host in sup.restart_steps(self.ranks):
            if action == "wait":
                self.wait_ready()
                log(LOG_INFO, f"restart: {host} answers again")
                continue
            done = self.call(host, action)
            if done.returncode != 0:
                raise RuntimeError(f"{action} on {host} failed: {(done.stderr or done.stdout).strip()[:500]}")
            log(LOG_INFO, f"restart: {done.stdout.strip()}")


def load_history(path: str) -> List[float]:
    doc = _read(path)
    try:
        values = json.loads(doc) if doc else []
    except ValueError:
        values = []
    return [float(v) for v in values if isinstance(v, (int, float))]


def save_history(path: str, history: List[float]) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(history, handle)
    os.replace(tmp, path)


def watch(group: Group, stop: Callable[[], bool] = lambda: False) -> int:
    config = group.config
    last = ""
    log(LOG_INFO, f"supervising {config['container']} on {', '.join(r.host for r in group.ranks)}: at most "
                  f"{config['max_restarts']} restart(s) per {config['window']} s, check every {config['interval']} s")
    while not stop():
        now = time.time()
        history = sup.recent(load_history(config["history_file"]), now, float(config["window"]))
        decision = sup.decide(group.observe(), history, now, int(config["max_restarts"]), float(config["window"]))
        if decision.message != last and decision.action != sup.NONE:
            log(LOG_ERR if decision.action == sup.GIVE_UP else LOG_WARNING, decision.message)
        last = decision.message
        if decision.action == sup.GIVE_UP:
            return 0
        if decision.action == sup.RESTART:
            save_history(config["history_file"], history + [now])
            try:
                group.restart()
                log(LOG_INFO, f"restart done: {config['container']} answers on every rank again")
            except RuntimeError as exc:
                log(LOG_ERR, f"restart failed: {exc}")
            last = ""
        time.sleep(float(config["interval"]))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="supervise", description="sparkfleet serving-group supervisor")
    parser.add_argument("mode", choices=("watch", "rank"))
    parser.add_argument("action", nargs="?", choices=("state", "stop", "start", "steady"))
    parser.add_argument("--config", required=True)
    parser.add_argument("--host", default=os.uname()[1])
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with open(args.config, encoding="utf-8") as handle:
        ranks, config = sup.parse_config(json.load(handle))
    if args.mode == "rank":
        try:
            print(Local(config).act(str(args.action), args.host))
        except RuntimeError as exc:
            print(f"{args.host}: {exc}", file=sys.stderr)
            return 1
        return 0
    return watch(Group(config, ranks, args.config))


if __name__ == "__main__":
    sys.exit(main())
