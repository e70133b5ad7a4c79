"""spark_memory_guard end to end without systemd: the real module starts the real watcher program through
stand-in systemctl / systemd-run / docker commands written into tmp_path (test doubles, named fake_*).

The stand-in systemd-run starts the watcher as a detached process and records its pid; the stand-in
systemctl reports that pid as the unit's MainPID while it lives and SIGTERMs it on stop; the stand-in docker
keeps the container's state in a file and records kills. MemAvailable is this machine's real one, so
thresholds of 1 MiB (never trips) and 1 TiB (always trips) give certain outcomes. The real systemd unit
(properties, journal, --collect) is exercised later by the serve role's lab scenario.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Tuple

import pytest

FAKE_SYSTEMD_RUN = r'''
import os, subprocess, sys
state = sys.argv[0].rsplit("/", 2)[0] + "/units"
os.makedirs(state, exist_ok=True)
args = sys.argv[1:]
unit = next(a.split("=", 1)[1] for a in args if a.startswith("--unit="))
with open(os.path.join(state, unit + ".argv"), "w") as f:
    f.write("\n".join(args))
command = args[args.index("--") + 1:]
log = open(os.path.join(state, unit + ".log"), "ab")
proc = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
with open(os.path.join(state, unit + ".pid"), "w") as f:
    f.write(str(proc.pid))
'''

FAKE_SYSTEMCTL = r'''
import os, signal, sys, time
state = sys.argv[0].rsplit("/", 2)[0] + "/units"
verb, unit = sys.argv[1], sys.argv[-1]
pidfile = os.path.join(state, unit + ".pid")

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False

pid = int(open(pidfile).read()) if os.path.exists(pidfile) else 0
if verb == "show":
    if pid and alive(pid):
        print(f"LoadState=loaded\nActiveState=active\nMainPID={pid}")
    else:
        print("LoadState=not-found\nActiveState=inactive\nMainPID=0")
elif verb == "stop":
    # Like systemd with --collect: a unit whose process is gone is not loaded any more (rc 5).
    if not (pid and alive(pid)):
        if os.path.exists(pidfile):
            os.remove(pidfile)
        sys.exit(5)
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not alive(pid):
            break
        time.sleep(0.05)
    os.remove(pidfile)
elif verb == "reset-failed":
    sys.exit(0 if pid and alive(pid) else 1)
else:
    sys.exit(f"fake systemctl: unsupported {verb}")
'''

FAKE_DOCKER = r'''
import os, sys
base = sys.argv[0].rsplit("/", 2)[0]
state_file = os.path.join(base, "container")
state = open(state_file).read().strip() if os.path.exists(state_file) else "absent"
if sys.argv[1] == "inspect":
    if state == "absent":
        sys.exit("Error: No such object: " + sys.argv[-1])
    print("true" if state == "running" else "false")
elif sys.argv[1] == "kill":
    with open(os.path.join(base, "kills"), "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\n")
    with open(state_file, "w") as f:
        f.write("stopped")
'''

TINY, HUGE = "1MiB", "1TiB"


class Lab:
    """The stand-in node: tool paths, the container state file and the started watcher pids."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for name, body in (("systemd-run", FAKE_SYSTEMD_RUN), ("systemctl", FAKE_SYSTEMCTL), ("docker", FAKE_DOCKER)):
            path = self.bin / name
            path.write_text(f"#!{sys.executable}\n{body}")
            path.chmod(0o755)
        (root / "units").mkdir()

    def args(self, **kwargs: Any) -> Dict[str, Any]:
        base = dict(container="dsv41-karmic-kraken", state_dir=str(self.root / "run"), program_dir=str(self.root / "libexec"),
                    docker=str(self.bin / "docker"), python=sys.executable, confirm_timeout=10.0)
        return base | kwargs

    def container(self, state: str) -> None:
        (self.root / "container").write_text(state)

    def container_state(self) -> str:
        return (self.root / "container").read_text().strip()

    def kills(self) -> list[str]:
        path = self.root / "kills"
        return path.read_text().splitlines() if path.exists() else []

    def pid(self, unit: str = "dsv41-karmic-kraken-memguard.service") -> int:
        path = self.root / "units" / f"{unit}.pid"
        return int(path.read_text()) if path.exists() else 0

    def log(self) -> str:
        path = self.root / "units" / "dsv41-karmic-kraken-memguard.service.log"
        return path.read_text() if path.exists() else ""

    def status(self) -> Dict[str, Any]:
        return json.loads((self.root / "run" / "dsv41-karmic-kraken-memguard.json").read_text())

    def stop_all(self) -> None:
        for pidfile in (self.root / "units").glob("*.pid"):
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    node = Lab(tmp_path)
    monkeypatch.setenv("PATH", f"{node.bin}:{os.environ['PATH']}")
    yield node
    node.stop_all()


Run = Callable[..., Tuple[bool, Dict[str, Any]]]


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_arm_is_confirmed_and_idempotent(lab: Lab, run_module: Run) -> None:
    failed, result = run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1, wait_for_container=30))
    assert not failed, result
    assert result["changed"] and result["actions"] == ["install-program", "start-unit", "confirm-first-sample"]
    assert result["msg"].startswith("startup memguard active for dsv41-karmic-kraken (threshold 1.0 MiB, interval 0.1s")
    guard = result["guard"]
    assert guard["pid"] == lab.pid() and guard["status"] == "waiting" and guard["first_sample"]["mem_available_bytes"] > 0
    assert (lab.root / "libexec" / "memguard.py").stat().st_mode & 0o777 == 0o755
    argv = (lab.root / "units" / "dsv41-karmic-kraken-memguard.service.argv").read_text().splitlines()
    assert "--property=OOMScoreAdjust=-1000" in argv and "--collect" in argv
    failed, again = run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1, wait_for_container=30))
    assert not failed and not again["changed"] and again["actions"] == [] and again["guard"]["pid"] == guard["pid"]
    assert again["reason"] == "startup guard already armed"
    assert "<7>sample phase=startup" in lab.log()


def test_check_mode_changes_nothing(lab: Lab, run_module: Run) -> None:
    failed, result = run_module("spark_memory_guard", lab.args(threshold=TINY), check_mode=True)
    assert not failed and result["changed"] and result["actions"][-1] == "confirm-first-sample"
    assert not (lab.root / "libexec").exists() and lab.pid() == 0 and not (lab.root / "run").exists()


def test_phase_switch_and_disarm(lab: Lab, run_module: Run) -> None:
    lab.container("running")
    assert not run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1))[0]
    startup_pid = lab.pid()
    assert wait_for(lambda: lab.status()["status"] == "guarding")
    failed, checked = run_module("spark_memory_guard", lab.args(phase="steady", threshold=TINY, interval=0.2), check_mode=True)
    assert not failed and checked["changed"] and lab.pid() == startup_pid
    assert checked["reason"] == "switch the guard from startup to steady"
    failed, result = run_module("spark_memory_guard", lab.args(phase="steady", threshold=TINY, interval=0.2))
    assert not failed, result
    assert result["actions"] == ["stop-unit", "reset-failed", "remove-state", "start-unit", "confirm-first-sample"]
    assert lab.pid() != startup_pid and result["guard"]["phase"] == "steady" and result["guard"]["wait_for_container"] == 0
    assert lab.status()["status"] == "guarding"
    failed, result = run_module("spark_memory_guard", lab.args(state="disarmed"))
    assert not failed and result["changed"] and result["actions"] == ["stop-unit", "reset-failed", "remove-state"]
    assert lab.pid() == 0 and not (lab.root / "run" / "dsv41-karmic-kraken-memguard.json").exists()
    assert not run_module("spark_memory_guard", lab.args(state="disarmed"))[1]["changed"]
    failed, result = run_module("spark_memory_guard", lab.args(state="absent"))
    assert not failed and result["actions"] == ["remove-program"] and not (lab.root / "libexec" / "memguard.py").exists()
    assert lab.container_state() == "running" and lab.kills() == []


def test_impossible_threshold_kills_and_fails_the_arming(lab: Lab, run_module: Run) -> None:
    """The reference's proof test: a running container and an impossible threshold."""
    lab.container("running")
    failed, result = run_module("spark_memory_guard", lab.args(threshold=HUGE, interval=0.1))
    assert failed
    assert result["msg"].startswith("startup memguard for dsv41-karmic-kraken ended at its first samples: trip (killing the container")
    assert lab.kills() == ["kill --signal KILL dsv41-karmic-kraken"] and lab.container_state() == "stopped"
    assert result["guard"]["status"] == "tripped" and result["guard"]["killed"] is True
    assert "<3>TRIP at " in lab.log() and "action=docker kill --signal KILL dsv41-karmic-kraken" in lab.log()


def test_trip_before_the_container_fails_without_kill(lab: Lab, run_module: Run) -> None:
    failed, result = run_module("spark_memory_guard", lab.args(threshold=HUGE))
    assert failed and "refusing to keep waiting" in result["msg"] and lab.kills() == []


def test_steady_guard_without_container_fails(lab: Lab, run_module: Run) -> None:
    failed, result = run_module("spark_memory_guard", lab.args(phase="steady", threshold=TINY, interval=0.1))
    assert failed and "container-missing" in result["msg"]


def test_running_guard_trips_later_and_records_it(lab: Lab, run_module: Run) -> None:
    lab.container("running")
    assert not run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1))[0]
    pid = lab.pid()
    # The guard ends with the container when it stops on its own.
    lab.container("stopped")
    assert wait_for(lambda: lab.status()["status"] == "exited")
    assert lab.status()["event"] == "container-stopped" and lab.status()["exit_code"] == 0
    failed, result = run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1))
    assert not failed and result["changed"] and lab.pid() != pid


def test_stale_guard_from_an_interrupted_run_is_replaced(lab: Lab, run_module: Run) -> None:
    """A unit that runs but never reported (hung, or its status directory was wiped) is stopped and replaced."""
    subprocess.run([str(lab.bin / "systemd-run"), "--unit=dsv41-karmic-kraken-memguard.service", "--collect", "--",
                    "sleep", "60"], check=True)
    old = lab.pid()
    assert old
    failed, result = run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1))
    assert not failed
    assert result["stale"] == "the guard unit is active but has no status file (left by an interrupted run)"
    assert result["actions"][0] == "stop-unit" and lab.pid() != old


@pytest.mark.parametrize("args,message", [
    ({"threshold": "5GB"}, "spark_memory_guard: threshold must be a size such as 5GiB"),
    ({"interval": -1.0}, "spark_memory_guard: interval must be a positive number of seconds"),
    ({"unit_name": "guard.service"}, "unit_name must be a unit name without .service"),
    ({"confirm_timeout": 0.0}, "confirm_timeout must be positive"),
])
def test_bad_input_fails_before_anything_changes(lab: Lab, run_module: Run, args: Dict[str, Any], message: str) -> None:
    failed, result = run_module("spark_memory_guard", lab.args(**args))
    assert failed and message in result["msg"]
    assert not (lab.root / "libexec").exists() and lab.pid() == 0


def test_missing_docker_fails_before_the_old_guard_is_stopped(lab: Lab, run_module: Run,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert not run_module("spark_memory_guard", lab.args(threshold=TINY, interval=0.1))[0]
    armed = lab.pid()
    (lab.bin / "docker").unlink()
    monkeypatch.setenv("PATH", str(lab.bin))
    args = lab.args(phase="steady", threshold=TINY)
    del args["docker"]
    failed, result = run_module("spark_memory_guard", args)
    assert failed and "docker" in result["msg"]
    assert lab.pid() == armed and lab.status()["phase"] == "startup"
