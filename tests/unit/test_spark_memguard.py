"""Pure memory-guard logic: sizes, meminfo, the systemd-run argv, trip decisions, journal lines, the
status file and the module's arm/re-arm/disarm decisions (image-model-serve.md section 7)."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard as mg
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard_watch as watch

GIB = 1024 ** 3
MEMINFO = """MemTotal:       128478812 kB
MemFree:         2145632 kB
MemAvailable:    5123456 kB
Buffers:            1024 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""


@pytest.mark.parametrize("value,expected", [
    ("5GiB", 5 * GIB), ("3 GiB", 3 * GIB), ("512MiB", 512 * 1024 ** 2), ("5368709120", 5 * GIB),
    (5368709120, 5 * GIB), ("1.5gib", 3 * GIB // 2), ("64 KiB", 65536), ("1TiB", 1024 * GIB), ("100 B", 100),
])
def test_parse_size(value: Any, expected: int) -> None:
    assert mg.parse_size(value) == expected


@pytest.mark.parametrize("value", ["5GB", "5G", "five", "", "-1GiB", 0, -5, True, "0GiB", None])
def test_parse_size_refuses(value: Any) -> None:
    with pytest.raises(ValueError):
        mg.parse_size(value)


def test_meminfo() -> None:
    values = mg.parse_meminfo(MEMINFO)
    assert values["MemTotal"] == 128478812 * 1024
    assert values["HugePages_Total"] == 0
    assert mg.mem_available(MEMINFO) == 5123456 * 1024
    with pytest.raises(ValueError, match="no MemAvailable"):
        mg.mem_available("MemTotal: 1 kB\n")


def test_meminfo_of_this_machine_is_readable() -> None:
    with open("/proc/meminfo", encoding="ascii") as handle:
        text = handle.read()
    available = mg.mem_available(text)
    assert 0 < available <= mg.parse_meminfo(text)["MemTotal"]


def config(**changes: Any) -> mg.GuardConfig:
    return replace(mg.build_config("dsv41-karmic-kraken", "startup", state_dir="/run/sparkfleet/memguard"), **changes)


def test_phase_defaults_are_the_reference() -> None:
    startup = mg.build_config("dsv41-karmic-kraken", "startup")
    steady = mg.build_config("dsv41-karmic-kraken", "steady")
    assert (startup.threshold_bytes, startup.interval, startup.wait_for_container) == (5 * GIB, 0.25, 120)
    assert (steady.threshold_bytes, steady.interval, steady.wait_for_container) == (3 * GIB, 2.0, 0)
    assert startup.unit == steady.unit == "dsv41-karmic-kraken-memguard"
    assert startup.state_file == "/run/sparkfleet/memguard/dsv41-karmic-kraken-memguard.json"


@pytest.mark.parametrize("kwargs,message", [
    ({"phase": "warmup"}, "phase must be one of startup, steady"),
    ({"threshold": "5GB"}, "threshold must be a size such as 5GiB"),
    ({"interval": 0}, "interval must be a positive number of seconds"),
    ({"wait_for_container": -1}, "wait_for_container must be >= 0"),
    ({"unit": "x.service"}, "unit_name must be a unit name without .service"),
    ({"container": "bad name"}, "container must be a container name"),
    ({"container": "x"}, "container must be a container name"),
])
def test_build_config_refuses(kwargs: Dict[str, Any], message: str) -> None:
    args = dict(container="c1", phase="startup") | kwargs
    with pytest.raises(ValueError, match=message):
        mg.build_config(**args)


def test_systemd_run_argv() -> None:
    argv = mg.systemd_run_argv(config(), "/usr/bin/python3", "/usr/local/libexec/sparkfleet/memguard.py",
                               "/usr/bin/docker", "/usr/bin/systemd-run")
    assert argv == [
        "/usr/bin/systemd-run", "--unit=dsv41-karmic-kraken-memguard.service", "--collect",
        "--description=sparkfleet startup memory guard of container dsv41-karmic-kraken",
        "--property=Type=simple", "--property=OOMScoreAdjust=-1000", "--property=MemoryMin=64M",
        "--property=CPUWeight=1000", "--property=KillMode=mixed", "--property=SyslogIdentifier=spark-memguard", "--",
        "/usr/bin/python3", "-B", "/usr/local/libexec/sparkfleet/memguard.py",
        "--container", "dsv41-karmic-kraken", "--phase", "startup", "--threshold-bytes", str(5 * GIB),
        "--interval", "0.25", "--wait-for-container", "120", "--unit", "dsv41-karmic-kraken-memguard",
        "--state-file", "/run/sparkfleet/memguard/dsv41-karmic-kraken-memguard.json", "--docker", "/usr/bin/docker"]
    with_user = mg.systemd_run_argv(config(), "p", "m", "d", user="serve")
    assert with_user[with_user.index("--") - 1] == "--property=User=serve"


def test_watcher_parses_what_systemd_run_passes() -> None:
    cfg = config(phase="steady", threshold_bytes=3 * GIB, interval=2.0, wait_for_container=0)
    argv = mg.systemd_run_argv(cfg, "python3", "memguard.py", "/usr/bin/docker")
    parsed, docker = watch.parse_args(argv[argv.index("memguard.py") + 1:])
    assert parsed == cfg and docker == "/usr/bin/docker"


# --- the watcher's decisions ----------------------------------------------------------------------

def decide(samples: List[Tuple[float, Optional[int], str]], cfg: Optional[mg.GuardConfig] = None) -> List[mg.Verdict]:
    cfg = cfg or config()
    state = mg.WatchState(started=0.0)
    verdicts = []
    for now, available, container in samples:
        obs = mg.Observation(now, available, container)
        verdicts.append(mg.decide(cfg, state, obs))
        state = mg.advance(state, obs)
        if verdicts[-1].exit_code is not None:
            break
    return verdicts


def test_healthy_samples_continue() -> None:
    verdicts = decide([(0, 8 * GIB, "absent"), (0.25, 8 * GIB, "absent"), (0.5, 6 * GIB, "running"), (0.75, 5 * GIB, "running")])
    assert [v.event for v in verdicts] == ["sample"] * 4
    assert all(v.exit_code is None and not v.kill for v in verdicts)


def test_trip_kills_a_running_container() -> None:
    verdicts = decide([(0, 8 * GIB, "running"), (0.25, 5 * GIB - 1, "running")])
    assert (verdicts[-1].event, verdicts[-1].kill, verdicts[-1].exit_code, verdicts[-1].level) == ("trip", True, 1, mg.LOG_ERR)


def test_trip_before_the_container_refuses_to_wait() -> None:
    verdicts = decide([(0, 4 * GIB, "absent")])
    assert (verdicts[0].event, verdicts[0].kill, verdicts[0].exit_code) == ("trip", False, 1)
    assert "refusing to keep waiting" in verdicts[0].detail


def test_container_that_never_appears_ends_the_guard() -> None:
    verdicts = decide([(0, 8 * GIB, "absent"), (119.9, 8 * GIB, "absent"), (120.0, 8 * GIB, "stopped")])
    assert [v.event for v in verdicts] == ["sample", "sample", "container-missing"]
    assert verdicts[-1].exit_code == 1 and not verdicts[-1].kill


def test_steady_guard_needs_a_running_container() -> None:
    steady = config(phase="steady", wait_for_container=0, threshold_bytes=3 * GIB)
    assert decide([(0, 8 * GIB, "absent")], steady)[0].event == "container-missing"
    assert decide([(0, 8 * GIB, "running")], steady)[0].event == "sample"


def test_guard_ends_with_its_container() -> None:
    verdicts = decide([(0, 8 * GIB, "running"), (0.25, 8 * GIB, "stopped")])
    assert (verdicts[-1].event, verdicts[-1].exit_code, verdicts[-1].kill) == ("container-stopped", 0, False)


def test_vanished_container_is_killed_and_fails() -> None:
    verdicts = decide([(0, 8 * GIB, "running"), (0.25, 8 * GIB, "absent")])
    assert (verdicts[-1].event, verdicts[-1].exit_code, verdicts[-1].kill) == ("container-vanished", 1, True)


def test_unreadable_meminfo_fails_closed() -> None:
    assert (decide([(0, None, "running")])[0].kill, decide([(0, None, "running")])[0].exit_code) == (True, 1)
    assert decide([(0, None, "absent")])[0].kill is False


def test_threshold_is_strictly_below() -> None:
    assert decide([(0, 5 * GIB, "running")])[0].event == "sample"
    assert decide([(0, 5 * GIB - 1024, "running")])[0].event == "trip"


def test_journal_lines() -> None:
    cfg = config()
    sample = mg.journal_line(cfg, mg.Observation(1.0, 8 * GIB, "running"), mg.Verdict("sample", mg.LOG_DEBUG), "T")
    assert sample == (f"<7>sample phase=startup container=dsv41-karmic-kraken state=running mem_available={8 * GIB} "
                      f"(8.00 GiB) threshold={5 * GIB} (5.00 GiB)")
    obs = mg.Observation(2.0, 4831838208, "running")
    trip = mg.journal_line(cfg, obs, mg.decide(cfg, mg.WatchState(0.0, True), obs), "2026-11-29T10:00:00.250Z")
    assert trip == ("<3>TRIP at 2026-11-29T10:00:00.250Z: phase=startup container=dsv41-karmic-kraken state=running "
                    f"mem_available=4831838208 (4.50 GiB) threshold={5 * GIB} (5.00 GiB) "
                    "action=docker kill --signal KILL dsv41-karmic-kraken: killing the container")
    assert mg.kill_line(cfg, 0, "", "W") == "<3>killed container dsv41-karmic-kraken at W"
    assert mg.kill_line(cfg, 1, "Error: No such container\n", "W") == (
        "<3>docker kill of dsv41-karmic-kraken FAILED at W (rc 1): Error: No such container")


# --- the watcher loop with a fake node ------------------------------------------------------------

class FakeHost:
    """Scripted samples; records journal lines, kills and status writes."""

    def __init__(self, samples: List[Tuple[Optional[int], str]]) -> None:
        self.samples = list(samples)
        self.clock = 0.0
        self.lines: List[str] = []
        self.kills: List[str] = []
        self.writes: List[Dict[str, Any]] = []
        self.current: Tuple[Optional[int], str] = (None, "absent")

    def now(self) -> float:
        return self.clock

    def wall(self) -> str:
        return f"2026-11-29T10:00:{self.clock:06.3f}Z"

    def sleep(self, seconds: float) -> None:
        self.clock += seconds

    def mem_available(self) -> Optional[int]:
        self.current = self.samples.pop(0)
        return self.current[0]

    def container(self, name: str) -> Tuple[str, str]:
        return self.current[1], "rc 1: Error: No such object" if self.current[1] == "absent" else ""

    def kill(self, name: str) -> Tuple[int, str]:
        self.kills.append(name)
        return 0, ""

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def write_status(self, path: str, doc: Dict[str, Any]) -> None:
        self.writes.append(json.loads(json.dumps(doc)))


def test_loop_records_first_sample_then_trips() -> None:
    host = FakeHost([(8 * GIB, "absent")] * 3 + [(7 * GIB, "running")] * 8 + [(4 * GIB, "running")])
    assert watch.run(config(), host, pid=4242) == 1
    assert host.kills == ["dsv41-karmic-kraken"]
    first = host.writes[0]
    assert first["status"] == "waiting" and first["pid"] == 4242 and first["phase"] == "startup"
    assert first["first_sample"] == {"time": "2026-11-29T10:00:00.000Z", "mem_available_bytes": 8 * GIB, "container": "absent"}
    last = host.writes[-1]
    assert (last["status"], last["event"], last["exit_code"], last["killed"]) == ("tripped", "trip", 1, True)
    assert last["first_sample"] == first["first_sample"] and last["samples"] == 12
    assert last["last_sample"]["mem_available_bytes"] == 4 * GIB
    # Every sample is in the journal; writes happen on the first sample, status changes, each second, the end.
    assert sum(line.startswith("<7>sample") for line in host.lines) == 11
    assert [s["status"] for s in host.writes] == ["waiting", "guarding", "guarding", "tripped"]
    assert host.lines[-2].startswith("<3>TRIP at 2026-11-29T10:00:02.750Z")
    assert host.lines[-1] == "<3>killed container dsv41-karmic-kraken at 2026-11-29T10:00:02.750Z"


def test_loop_stops_on_request_and_says_so() -> None:
    host = FakeHost([(8 * GIB, "running")] * 10)
    calls = iter([False, False, True])
    assert watch.run(config(), host, pid=7, stop=lambda: next(calls)) == 0
    assert host.writes[-1]["status"] == "stopped" and host.writes[-1]["exit_code"] == 0
    assert host.kills == []


# --- the module's decisions -----------------------------------------------------------------------

ACTIVE = mg.UnitStatus("loaded", "active", 4242)
GONE = mg.UnitStatus()


def live_doc(cfg: mg.GuardConfig, pid: int = 4242, status: str = "waiting") -> Dict[str, Any]:
    return dict(cfg.params(), pid=pid, status=status, first_sample={"mem_available_bytes": 8 * GIB})


def test_parse_systemctl_show() -> None:
    assert mg.parse_systemctl_show("LoadState=loaded\nActiveState=active\nMainPID=4242\n") == ACTIVE
    assert mg.parse_systemctl_show("LoadState=not-found\nActiveState=inactive\nMainPID=0\n") == GONE
    assert not GONE.running and not GONE.loaded and ACTIVE.running


def test_parse_status_document() -> None:
    assert mg.parse_status_document(None) is None
    assert mg.parse_status_document("{broken") == {"status": "corrupt"}
    assert mg.parse_status_document('{"status": "waiting"}') == {"status": "waiting"}


def test_fresh_node_arms() -> None:
    plan = mg.plan_guard("armed", config(), GONE, None, False, False, False)
    assert plan.steps == ("install-program", "start-unit", "confirm-first-sample")
    assert plan.reason == "arm the startup guard" and plan.stale is None and plan.changed


def test_same_guard_is_left_alone() -> None:
    cfg = config()
    plan = mg.plan_guard("armed", cfg, ACTIVE, live_doc(cfg), True, True, False)
    assert plan.steps == () and plan.reason == "startup guard already armed" and not plan.changed


def test_phase_switch_rearms() -> None:
    startup = config()
    steady = mg.build_config("dsv41-karmic-kraken", "steady")
    plan = mg.plan_guard("armed", steady, ACTIVE, live_doc(startup), True, True, False)
    assert plan.steps == ("stop-unit", "reset-failed", "remove-state", "start-unit", "confirm-first-sample")
    assert plan.reason == "switch the guard from startup to steady" and plan.stale is None


def test_new_threshold_rearms() -> None:
    cfg = config()
    plan = mg.plan_guard("armed", replace(cfg, threshold_bytes=6 * GIB), ACTIVE, live_doc(cfg), True, True, False)
    assert plan.reason == "re-arm the startup guard with new parameters" and "start-unit" in plan.steps


@pytest.mark.parametrize("unit,doc,stale", [
    (ACTIVE, None, "the guard unit is active but has no status file (left by an interrupted run)"),
    (ACTIVE, "other-pid", "the status file belongs to pid 99, the unit runs pid 4242"),
    (GONE, "live", "a status file says waiting but the guard unit is not running"),
    (mg.UnitStatus("loaded", "failed", 0), None, "the guard unit failed and was not collected"),
])
def test_stale_guards_are_found_and_replaced(unit: mg.UnitStatus, doc: Optional[str], stale: str) -> None:
    cfg = config()
    docs = {None: None, "other-pid": live_doc(cfg, pid=99), "live": live_doc(cfg)}
    plan = mg.plan_guard("armed", cfg, unit, docs[doc], True, True, False)
    assert plan.stale == stale
    assert plan.steps[-2:] == ("start-unit", "confirm-first-sample")
    assert ("stop-unit" in plan.steps) == unit.running
    assert ("remove-state" in plan.steps) == (doc is not None)
    disarm = mg.plan_guard("disarmed", cfg, unit, docs[doc], True, True, False)
    assert disarm.stale == stale and disarm.changed and "start-unit" not in disarm.steps


def test_program_update_rearms_the_same_guard() -> None:
    cfg = config()
    plan = mg.plan_guard("armed", cfg, ACTIVE, live_doc(cfg), False, True, False)
    assert plan.reason == "update the guard program" and "install-program" in plan.steps


@pytest.mark.parametrize("desired,unit,doc,installed,others,steps", [
    ("disarmed", ACTIVE, True, True, False, ("stop-unit", "reset-failed", "remove-state")),
    ("disarmed", GONE, False, True, False, ()),
    ("disarmed", GONE, True, True, False, ("remove-state",)),
    ("absent", ACTIVE, True, True, False, ("stop-unit", "reset-failed", "remove-state", "remove-program")),
    ("absent", ACTIVE, True, True, True, ("stop-unit", "reset-failed", "remove-state")),
    ("absent", GONE, False, False, False, ()),
])
def test_disarm_and_absent(desired: str, unit: mg.UnitStatus, doc: bool, installed: bool, others: bool,
                           steps: Tuple[str, ...]) -> None:
    cfg = config()
    plan = mg.plan_guard(desired, cfg, unit, live_doc(cfg, status="tripped") if doc else None, True, installed, others)
    assert plan.steps == steps
    assert plan.reason == ("disarm the guard" if steps else "guard already disarmed")


def test_confirmation() -> None:
    cfg = config()
    assert mg.confirmation(cfg, ACTIVE, None) == ("pending", "waiting for the first sample")
    verdict, message = mg.confirmation(cfg, ACTIVE, live_doc(cfg))
    assert verdict == "confirmed"
    assert message == ("startup memguard active for dsv41-karmic-kraken (threshold 5.00 GiB, interval 0.25s, "
                       "wait 120s, first MemAvailable 8.00 GiB)")
    assert mg.confirmation(cfg, ACTIVE, live_doc(cfg, pid=1))[0] == "pending"
    assert mg.confirmation(cfg, GONE, None) == (
        "failed", "startup memguard unit dsv41-karmic-kraken-memguard.service exited before its first sample")
    tripped = dict(live_doc(cfg, status="tripped"), event="trip", detail="container not running; refusing to keep waiting")
    verdict, message = mg.confirmation(cfg, GONE, tripped)
    assert verdict == "failed" and "trip (container not running; refusing to keep waiting; MemAvailable 8.00 GiB" in message
    # A status file of other parameters (an old phase) never confirms the new guard.
    steady = mg.build_config("dsv41-karmic-kraken", "steady")
    assert mg.confirmation(steady, ACTIVE, live_doc(cfg))[0] == "pending"


def test_other_guard_files() -> None:
    assert mg.other_guard_files(["a-memguard.json", "b-memguard.json"], "a-memguard")
    assert not mg.other_guard_files(["a-memguard.json", "a-memguard.json.12.tmp"], "a-memguard")


def test_vanished_line_says_why_inspect_failed() -> None:
    cfg = config()
    obs = mg.Observation(3.0, 8 * GIB, "absent", note="rc 1: Error: No such object: dsv41-karmic-kraken")
    line = mg.journal_line(cfg, obs, mg.decide(cfg, mg.WatchState(0.0, True), obs), "W")
    assert line.startswith("<3>CONTAINER-VANISHED at W: phase=startup")
    assert line.endswith("action=docker kill --signal KILL dsv41-karmic-kraken: the container was running and can no "
                         "longer be inspected (docker inspect: rc 1: Error: No such object: dsv41-karmic-kraken)")


def test_sample_taken_while_stopping_never_kills() -> None:
    """systemctl stop during a sample: the inspect that failed because of the stop must not read as a vanished container."""
    host = FakeHost([(8 * GIB, "running"), (8 * GIB, "absent")])
    calls = iter([False, False, False, True])
    assert watch.run(config(), host, pid=9, stop=lambda: next(calls)) == 0
    assert host.kills == [] and not any(line.startswith("<3>") for line in host.lines)
    assert host.writes[-1]["status"] == "stopped"


@pytest.mark.parametrize("began,now,expected", [(10.0, 10.0, 0.25), (10.0, 10.1, 0.15), (10.0, 10.4, 0.0)])
def test_sampling_keeps_its_cadence(began: float, now: float, expected: float) -> None:
    assert mg.next_sleep(0.25, began, now) == pytest.approx(expected)


@pytest.mark.parametrize("settings,expected", [
    ({"guard_startup_threshold": "5GiB", "guard_startup_interval": 0.25, "guard_startup_wait": 120,
      "guard_steady_threshold": "3GiB", "guard_steady_interval": 2}, []),
    ({"guard_steady_threshold": "1GiB", "guard_steady_interval": 5}, []),
    ({"guard_steady_threshold": "1023MiB"}, [("guard_steady_threshold", "must be at least 1 GiB, got '1023MiB'")]),
    ({"guard_startup_threshold": "2TiB"}, [("guard_startup_threshold", "must be at most 1024 GiB, got '2TiB'")]),
    ({"guard_steady_interval": 5.5}, [("guard_steady_interval", "must be at most 5 seconds, got 5.5")]),
    ({"guard_steady_interval": True}, [("guard_steady_interval", "must be a positive number of seconds, got True")]),
    ({"guard_startup_wait": 3601}, [("guard_startup_wait", "must be at most 3600 seconds, got 3601")]),
    ({"guard_startup_wait": 0}, [("guard_startup_wait", "must be a positive integer of seconds, got 0")]),
])
def test_guard_setting_bounds(settings: Dict[str, Any], expected: List[Tuple[str, str]]) -> None:
    assert mg.setting_errors(settings) == expected
