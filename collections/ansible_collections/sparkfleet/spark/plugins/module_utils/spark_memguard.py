"""Fail-closed memory guard logic (image-model-serve.md section 7), free of I/O.

Sizes and /proc/meminfo, the guard's per-sample verdict, its journal lines and status document, the
systemd-run command that arms it, and the module's decision of what to do given the unit and status file
it finds. The watcher program (spark_memguard_watch.py) and the spark_memory_guard module do the I/O.
This file also runs on the nodes next to the watcher, so it imports nothing but the standard library.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

PHASES = ("startup", "steady")
RUNNING, STOPPED, ABSENT = "running", "stopped", "absent"
# Guard status as written to the status file; the first two mean "armed and watching".
WAITING, GUARDING, TRIPPED, EXITED, STOPPED_BY_SIGNAL = "waiting", "guarding", "tripped", "exited", "stopped"
LIVE_STATUSES = (WAITING, GUARDING)
# syslog priorities; journald reads the "<N>" prefix of each stderr line of a service.
LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG = 3, 4, 6, 7
SYSLOG_IDENTIFIER = "spark-memguard"
# Reference unit properties: never the OOM killer's victim, a protected memory floor, CPU priority.
# KillMode=mixed: `systemctl stop` (a phase switch) must SIGTERM only the watcher; with the default
# control-group mode an in-flight `docker inspect` child died too and read as a vanished container.
UNIT_PROPERTIES = ("Type=simple", "OOMScoreAdjust=-1000", "MemoryMin=64M", "CPUWeight=1000", "KillMode=mixed",
                   f"SyslogIdentifier={SYSLOG_IDENTIFIER}")
RUNNING_UNIT_STATES = ("active", "activating", "reloading")
GIB = 1024 ** 3

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB)?\s*$", re.IGNORECASE)
_FACTORS = {"b": 1, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}


# --- sizes and meminfo ----------------------------------------------------------------------------

def parse_size(value: Any) -> int:
    """Bytes from an int or a string such as '5GiB', '3 GiB', '512MiB', '5368709120' (binary units only)."""
    if isinstance(value, bool):
        raise ValueError(f"must be a size such as 5GiB or a number of bytes, got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(f"must be a size such as 5GiB, 3 GiB or a number of bytes "
                             f"(binary units B, KiB, MiB, GiB, TiB), got {value!r}")
        size = int(float(match.group(1)) * _FACTORS[(match.group(2) or "b").lower()])
    if size <= 0:
        raise ValueError(f"must be a positive size, got {value!r}")
    return size


def format_gib(size: Optional[int]) -> str:
    """GiB for people; sizes under 1 GiB in MiB so small test thresholds do not read as zero."""
    if size is None:
        return "unreadable"
    return f"{size / GIB:.2f} GiB" if size >= GIB else f"{size / 1024 ** 2:.1f} MiB"


def parse_meminfo(text: str) -> Dict[str, int]:
    """/proc/meminfo as {field: bytes}; fields without a unit (HugePages_*) keep their count."""
    values: Dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts or not parts[0].isdigit():
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        values[name.strip()] = int(parts[0]) * (1024 if unit == "kb" else 1)
    return values


def mem_available(text: str) -> int:
    """MemAvailable in bytes; ValueError when the kernel did not report it."""
    values = parse_meminfo(text)
    if "MemAvailable" not in values:
        raise ValueError("/proc/meminfo has no MemAvailable line")
    return values["MemAvailable"]


# --- configuration ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class GuardConfig:
    """One armed guard: what it watches, how, and where it reports."""

    container: str
    phase: str
    threshold_bytes: int
    interval: float
    wait_for_container: int
    unit: str
    state_file: str

    def params(self) -> Dict[str, Any]:
        """The values that make two armings the same guard."""
        return {"unit": self.unit, "container": self.container, "phase": self.phase,
                "threshold_bytes": self.threshold_bytes, "interval": float(self.interval),
                "wait_for_container": self.wait_for_container}


# Reference defaults per phase: threshold, sampling interval (s), wait for the container to run (s).
PHASE_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "startup": {"threshold": "5GiB", "interval": 0.25, "wait_for_container": 120},
    "steady": {"threshold": "3GiB", "interval": 2.0, "wait_for_container": 0},
}


# Bounds of a serving profile's guard settings (docs/serve-profile.md, "Memory guard bounds"). Below 1 GiB
# the kernel's own reclaim and the OOM killer act first, so the guard would never fire before the node
# stalls; above 1 TiB (eight times a DGX Spark's 128 GB) the value is a unit typo or an overflow and
# would kill every start. A sample every 5 s is the slowest that still sees the head's margin above the
# steady guard (~2.8 GiB at TP3) before a burst consumes it; the reference samples at 0.25 s and 2 s.
# The startup guard never needs to wait longer than the engine may take to become ready (3600 s).
THRESHOLD_FLOOR = GIB
THRESHOLD_CEILING = 1024 * GIB
INTERVAL_CEILING = 5.0
WAIT_CEILING = 3600


def _threshold_error(value: Any) -> Tuple[Optional[int], Optional[str]]:
    try:
        size = parse_size(value)
    except ValueError as exc:
        return None, str(exc)
    if size < THRESHOLD_FLOOR:
        return size, f"must be at least {THRESHOLD_FLOOR // GIB} GiB, got {value!r}"
    if size > THRESHOLD_CEILING:
        return size, f"must be at most {THRESHOLD_CEILING // GIB} GiB, got {value!r}"
    return size, None


def _interval_error(value: Any) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return f"must be a positive number of seconds, got {value!r}"
    if not value <= INTERVAL_CEILING:
        return f"must be at most {INTERVAL_CEILING:g} seconds, got {value!r}"
    return None


def _wait_error(value: Any) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return f"must be a positive integer of seconds, got {value!r}"
    if value > WAIT_CEILING:
        return f"must be at most {WAIT_CEILING} seconds, got {value!r}"
    return None


def setting_errors(settings: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """(field, problem) for every guard setting of a serving profile that cannot protect a node.

    settings holds any of guard_startup_threshold, guard_startup_interval, guard_startup_wait,
    guard_steady_threshold and guard_steady_interval; absent ones are not checked.
    """
    errors: List[Tuple[str, str]] = []
    sizes: Dict[str, Optional[int]] = {}
    for phase in PHASES:
        field = f"guard_{phase}_threshold"
        if field in settings:
            sizes[phase], problem = _threshold_error(settings[field])
            if problem:
                errors.append((field, problem))
        field = f"guard_{phase}_interval"
        problem = _interval_error(settings[field]) if field in settings else None
        if problem:
            errors.append((field, problem))
    problem = _wait_error(settings["guard_startup_wait"]) if "guard_startup_wait" in settings else None
    if problem:
        errors.append(("guard_startup_wait", problem))
    startup, steady = sizes.get("startup"), sizes.get("steady")
    if startup is not None and steady is not None and startup <= steady:
        errors.append(("guard_startup_threshold", f"({settings['guard_startup_threshold']}) must be above "
                                                  f"spark_serve_guard_steady_threshold ({settings['guard_steady_threshold']})"))
    return errors


def build_config(container: str, phase: str, threshold: Any = None, interval: Optional[float] = None,
                 wait_for_container: Optional[int] = None, unit: Optional[str] = None,
                 state_dir: str = "/run/sparkfleet/memguard") -> GuardConfig:
    """A checked configuration with the phase's defaults filled in; ValueError lists every problem."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    defaults = PHASE_DEFAULTS[phase]
    try:
        threshold_bytes = parse_size(defaults["threshold"] if threshold is None else threshold)
    except ValueError as exc:
        raise ValueError(f"threshold {exc}") from exc
    name = unit or unit_name(container)
    config = GuardConfig(container=container, phase=phase, threshold_bytes=threshold_bytes,
                         interval=float(defaults["interval"] if interval is None else interval),
                         wait_for_container=int(defaults["wait_for_container"] if wait_for_container is None
                                                else wait_for_container),
                         unit=name, state_file=state_path(state_dir, name))
    errors = config_errors(config)
    if errors:
        raise ValueError("; ".join(errors))
    return config


def unit_name(container: str) -> str:
    return f"{container}-memguard"


def state_path(state_dir: str, unit: str) -> str:
    return f"{state_dir.rstrip('/')}/{unit}.json"


def config_errors(config: GuardConfig) -> List[str]:
    """Everything wrong with a configuration, each naming the option."""
    errors = []
    if not re.match(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$", config.container):  # Docker's rule
        errors.append(f"container must be a container name, got {config.container!r}")
    if config.phase not in PHASES:
        errors.append(f"phase must be one of {', '.join(PHASES)}, got {config.phase!r}")
    if config.threshold_bytes <= 0:
        errors.append(f"threshold must be positive, got {config.threshold_bytes}")
    if not config.interval > 0:
        errors.append(f"interval must be a positive number of seconds, got {config.interval}")
    if config.wait_for_container < 0:
        errors.append(f"wait_for_container must be >= 0 seconds, got {config.wait_for_container}")
    if not re.match(r"^[a-zA-Z0-9:_.\\-]+$", config.unit) or config.unit.endswith(".service"):
        errors.append(f"unit_name must be a unit name without .service, got {config.unit!r}")
    return errors


def unit_file(unit: str) -> str:
    return f"{unit}.service"


def guard_args(config: GuardConfig, docker: str) -> List[str]:
    """The watcher's own arguments (parsed again by spark_memguard_watch.parse_args)."""
    return ["--container", config.container, "--phase", config.phase,
            "--threshold-bytes", str(config.threshold_bytes), "--interval", repr(float(config.interval)),
            "--wait-for-container", str(config.wait_for_container), "--unit", config.unit,
            "--state-file", config.state_file, "--docker", docker]


def systemd_run_argv(config: GuardConfig, python: str, program: str, docker: str,
                     systemd_run: str = "systemd-run", user: Optional[str] = None) -> List[str]:
    """A transient, collected, OOM-protected service running the watcher: one argv, never a shell string."""
    argv = [systemd_run, f"--unit={unit_file(config.unit)}", "--collect",
            f"--description=sparkfleet {config.phase} memory guard of container {config.container}"]
    argv += [f"--property={prop}" for prop in UNIT_PROPERTIES]
    if user:
        argv.append(f"--property=User={user}")
    # -B: the program directory stays exactly the two shipped files (no __pycache__ to clean up).
    return argv + ["--", python, "-B", program] + guard_args(config, docker)


# --- the watcher's decisions ----------------------------------------------------------------------

@dataclass(frozen=True)
class Observation:
    """One sample: monotonic time, MemAvailable in bytes (None = unreadable) and the container's state."""

    now: float
    mem_available: Optional[int]
    container: str
    note: str = ""  # why docker inspect failed, kept for the journal


@dataclass(frozen=True)
class WatchState:
    """What the watcher remembers between samples."""

    started: float
    seen_running: bool = False
    samples: int = 0


@dataclass(frozen=True)
class Verdict:
    """What to do after a sample: kill the container or not, exit (code) or continue (None)."""

    event: str
    level: int
    kill: bool = False
    exit_code: Optional[int] = None
    detail: str = ""


def decide(config: GuardConfig, state: WatchState, obs: Observation) -> Verdict:
    """The reference's loop semantics, one sample at a time."""
    running = obs.container == RUNNING
    if state.seen_running and obs.container == ABSENT:
        return Verdict("container-vanished", LOG_ERR, kill=True, exit_code=1,
                       detail="the container was running and can no longer be inspected")
    if state.seen_running and obs.container == STOPPED:
        return Verdict("container-stopped", LOG_INFO, exit_code=0, detail="the container stopped; the guard ends with it")
    if obs.mem_available is None:
        return Verdict("meminfo-unreadable", LOG_ERR, kill=running, exit_code=1,
                       detail="MemAvailable could not be read; failing closed")
    if obs.mem_available < config.threshold_bytes:
        return Verdict("trip", LOG_ERR, kill=running, exit_code=1,
                       detail="killing the container" if running else "container not running; refusing to keep waiting")
    if not state.seen_running and not running and obs.now - state.started >= config.wait_for_container:
        return Verdict("container-missing", LOG_ERR, exit_code=1,
                       detail=f"the container did not run within {config.wait_for_container}s")
    return Verdict("sample", LOG_DEBUG)


def advance(state: WatchState, obs: Observation) -> WatchState:
    return WatchState(started=state.started, seen_running=state.seen_running or obs.container == RUNNING,
                      samples=state.samples + 1)


def journal_line(config: GuardConfig, obs: Observation, verdict: Verdict, wall: str) -> str:
    """One journal record with its syslog priority prefix; trips carry the wall-clock time and the value."""
    values = (f"phase={config.phase} container={config.container} state={obs.container} "
              f"mem_available={obs.mem_available if obs.mem_available is not None else 'unreadable'} "
              f"({format_gib(obs.mem_available)}) threshold={config.threshold_bytes} ({format_gib(config.threshold_bytes)})")
    if verdict.event == "sample":
        return f"<{verdict.level}>sample {values}"
    action = f" action=docker kill --signal KILL {config.container}" if verdict.kill else ""
    label = "TRIP" if verdict.event == "trip" else verdict.event.upper()
    note = f" (docker inspect: {obs.note})" if obs.note else ""
    return f"<{verdict.level}>{label} at {wall}: {values}{action}: {verdict.detail}{note}"


def kill_line(config: GuardConfig, rc: int, output: str, wall: str) -> str:
    if rc == 0:
        return f"<{LOG_ERR}>killed container {config.container} at {wall}"
    return f"<{LOG_ERR}>docker kill of {config.container} FAILED at {wall} (rc {rc}): {output.strip()[:300]}"


def status_after(verdict: Verdict, state: WatchState) -> str:
    if verdict.exit_code is None:
        return GUARDING if state.seen_running else WAITING
    return TRIPPED if verdict.kill or verdict.event in ("trip", "meminfo-unreadable") else EXITED


def status_document(config: GuardConfig, pid: int, started_at: str, previous: Optional[Mapping[str, Any]],
                    obs: Observation, verdict: Verdict, state: WatchState, wall: str) -> Dict[str, Any]:
    """The status file: parameters, pid, first and last sample, and how the guard ended."""
    sample = {"time": wall, "mem_available_bytes": obs.mem_available, "container": obs.container}
    first = (previous or {}).get("first_sample") or sample
    doc = dict(config.params(), pid=pid, started_at=started_at, status=status_after(verdict, state),
               samples=state.samples, first_sample=first, last_sample=sample)
    if verdict.exit_code is not None:
        doc.update(event=verdict.event, exit_code=verdict.exit_code, detail=verdict.detail, killed=verdict.kill)
    return doc


def next_sleep(interval: float, began: float, now: float) -> float:
    """Keep the sampling cadence: a sample's own time (docker inspect takes tens of ms) comes off the sleep."""
    return max(0.0, interval - (now - began))


def should_write(verdict: Verdict, status_changed: bool, first: bool, now: float, last_write: float) -> bool:
    """Write the first sample, every status change and every ending; otherwise at most once a second."""
    return first or status_changed or verdict.exit_code is not None or now - last_write >= 1.0


# --- the module's decisions -----------------------------------------------------------------------

@dataclass(frozen=True)
class UnitStatus:
    """What `systemctl show` says about the guard unit."""

    load_state: str = "not-found"
    active_state: str = "inactive"
    main_pid: int = 0

    @property
    def running(self) -> bool:
        return self.active_state in RUNNING_UNIT_STATES

    @property
    def loaded(self) -> bool:
        return self.load_state == "loaded"


def parse_systemctl_show(text: str) -> UnitStatus:
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    pid = values.get("MainPID", "0")
    return UnitStatus(load_state=values.get("LoadState", "not-found"),
                      active_state=values.get("ActiveState", "inactive"),
                      main_pid=int(pid) if pid.isdigit() else 0)


def parse_status_document(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """The status file, or None when absent; an unreadable file counts as a stale leftover."""
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return {"status": "corrupt"}
    return doc if isinstance(doc, dict) else {"status": "corrupt"}


# Steps, in the order the module runs them.
STOP, RESET, REMOVE_STATE, INSTALL, START, CONFIRM, REMOVE_PROGRAM = (
    "stop-unit", "reset-failed", "remove-state", "install-program", "start-unit", "confirm-first-sample",
    "remove-program")


@dataclass(frozen=True)
class Plan:
    """What the module will do: steps, why, and any stale guard it found."""

    steps: Tuple[str, ...]
    reason: str
    stale: Optional[str] = None

    @property
    def changed(self) -> bool:
        return bool(self.steps)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _same_guard(config: GuardConfig, unit: UnitStatus, doc: Optional[Mapping[str, Any]]) -> bool:
    if not unit.running or doc is None or doc.get("status") not in LIVE_STATUSES:
        return False
    recorded = {key: doc.get(key) for key in config.params()}
    if recorded.get("interval") is not None:
        recorded["interval"] = float(recorded["interval"])
    return recorded == config.params() and doc.get("pid") == unit.main_pid


def _stale(unit: UnitStatus, doc: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Describe a guard left behind by an interrupted run, if that is what the unit and file show."""
    if unit.running and doc is None:
        return "the guard unit is active but has no status file (left by an interrupted run)"
    if unit.running and doc is not None and doc.get("pid") != unit.main_pid:
        return f"the status file belongs to pid {doc.get('pid')}, the unit runs pid {unit.main_pid}"
    if not unit.running and doc is not None and doc.get("status") in LIVE_STATUSES + ("corrupt",):
        return f"a status file says {doc.get('status')} but the guard unit is not running"
    if unit.loaded and not unit.running and unit.active_state == "failed":
        return "the guard unit failed and was not collected"
    return None


def _arm_reason(config: GuardConfig, unit: UnitStatus, doc: Optional[Mapping[str, Any]]) -> str:
    if not unit.running:
        return f"arm the {config.phase} guard"
    if doc is not None and doc.get("phase") != config.phase:
        return f"switch the guard from {doc.get('phase')} to {config.phase}"
    return f"re-arm the {config.phase} guard with new parameters"


def plan_guard(desired: str, config: GuardConfig, unit: UnitStatus, doc: Optional[Mapping[str, Any]],
               program_current: bool, program_installed: bool, other_guards: bool) -> Plan:
    """Steps that take the node from what it has (unit, status file, program) to the desired state."""
    stale = _stale(unit, doc)
    if desired == "armed":
        if _same_guard(config, unit, doc) and program_current:
            return Plan((), f"{config.phase} guard already armed", None)
        steps = [STOP] if unit.running else []
        steps += [RESET] if unit.loaded else []
        steps += [REMOVE_STATE] if doc is not None else []
        steps += [] if program_current else [INSTALL]
        reason = "update the guard program" if _same_guard(config, unit, doc) else _arm_reason(config, unit, doc)
        return Plan(tuple(steps + [START, CONFIRM]), reason, stale)
    steps = [STOP] if unit.running else []
    steps += [RESET] if unit.loaded else []
    steps += [REMOVE_STATE] if doc is not None else []
    if desired == "absent" and program_installed and not other_guards:
        steps.append(REMOVE_PROGRAM)
    reason = "disarm the guard" if steps else "guard already disarmed"
    return Plan(tuple(steps), reason, stale)


def confirmation(config: GuardConfig, unit: UnitStatus, doc: Optional[Mapping[str, Any]]) -> Tuple[str, str]:
    """('confirmed'|'pending'|'failed', message) while waiting for the guard's first sample."""
    ours = doc is not None and all(doc.get(k) == v for k, v in config.params().items() if k != "interval")
    if ours and doc.get("status") in LIVE_STATUSES and doc.get("first_sample"):
        if unit.running and doc.get("pid") not in (None, unit.main_pid):
            return "pending", "status file of another process"
        return "confirmed", (f"{config.phase} memguard active for {config.container} (threshold "
                             f"{format_gib(config.threshold_bytes)}, interval {config.interval:g}s, "
                             f"wait {config.wait_for_container}s, first MemAvailable "
                             f"{format_gib(doc['first_sample'].get('mem_available_bytes'))})")
    if ours and doc.get("status") in (TRIPPED, EXITED):
        first = doc.get("first_sample") or {}
        return "failed", (f"{config.phase} memguard for {config.container} ended at its first samples: "
                          f"{doc.get('event')} ({doc.get('detail')}; MemAvailable "
                          f"{format_gib(first.get('mem_available_bytes'))}, threshold {format_gib(config.threshold_bytes)})")
    if not unit.running:
        return "failed", f"{config.phase} memguard unit {unit_file(config.unit)} exited before its first sample"
    return "pending", "waiting for the first sample"


def describe(config: GuardConfig) -> Dict[str, Any]:
    return dict(config.params(), state_file=config.state_file, threshold=format_gib(config.threshold_bytes))


def other_guard_files(names: List[str], unit: str) -> bool:
    """Whether status files of other guards sit in the state directory (the program is shared)."""
    return any(name.endswith(".json") and name != f"{unit}.json" for name in names)

