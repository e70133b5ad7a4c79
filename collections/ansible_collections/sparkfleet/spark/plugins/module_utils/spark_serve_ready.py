"""Pure logic of the serving readiness watch: what one rank's container, guard and the head's API say.

Every rank runs the watch at once (plugins/modules/spark_serve_ready.py). Each one polls the head's /v1/models and
checks its own container and memory guard at the same cadence, and returns when the API answers, when its
own rank is dead, at the overall deadline, or at the end of a short slice (so the controller can compare all
ranks and fail the group fast, naming the dead one). No I/O here.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

READY = "ready"
PENDING = "pending"
DEAD = "dead"
TIMEOUT = "timeout"
# Guard status-file states (spark_memguard) that mean the guard no longer protects the node.
GUARD_ENDED = ("tripped", "exited", "stopped")


@dataclass(frozen=True)
class ContainerState:
    """`docker inspect --format '{{json .State}}'` of the serving container, reduced to what matters."""

    exists: bool
    status: str = "missing"
    running: bool = False
    exit_code: Optional[int] = None
    oom_killed: bool = False
    error: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GuardState:
    """The memory guard unit's ActiveState and its status file's status (None when there is no file)."""

    active_state: str
    status: Optional[str]
    detail: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """Outcome of one watch slice."""

    state: str
    message: str


def parse_container_state(rc: int, stdout: str) -> ContainerState:
    """Parse `docker inspect --format '{{json .State}}' NAME`; rc != 0 means there is no such container."""
    if rc != 0 or not stdout.strip():
        return ContainerState(exists=False)
    try:
        state = json.loads(stdout)
    except ValueError:
        return ContainerState(exists=True, status="unreadable", error=stdout.strip()[:200])
    return ContainerState(
        exists=True,
        status=str(state.get("Status", "unknown")),
        running=bool(state.get("Running")),
        exit_code=state.get("ExitCode"),
        oom_killed=bool(state.get("OOMKilled")),
        error=str(state.get("Error") or ""),
    )


def parse_guard_status(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """The guard's JSON status file, or None when it is missing or unreadable."""
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def guard_state(active_state: str, doc: Optional[Dict[str, Any]]) -> GuardState:
    """Combine the unit's ActiveState with the status file the watcher keeps."""
    if doc is None:
        return GuardState(active_state=active_state, status=None)
    detail = str(doc.get("detail") or doc.get("event") or "")
    return GuardState(active_state=active_state, status=doc.get("status"), detail=detail)


def container_problem(container: ContainerState) -> Optional[str]:
    """Why the container counts as dead, or None while it runs."""
    if not container.exists:
        return "container does not exist"
    if container.running:
        return None
    parts = [f"container is {container.status}"]
    if container.exit_code is not None:
        parts.append(f"exit code {container.exit_code}")
    if container.oom_killed:
        parts.append("OOM-killed")
    if container.error:
        parts.append(container.error)
    return ", ".join(parts)


def guard_problem(unit: str, guard: GuardState) -> Optional[str]:
    """Why the memory guard no longer protects the rank, or None while it does."""
    if guard.active_state != "active" or guard.status in GUARD_ENDED:
        status = guard.status or "no status file"
        detail = f": {guard.detail}" if guard.detail else ""
        return f"memory guard {unit} is {guard.active_state} ({status}{detail}); refusing to continue an unguarded launch"
    return None


def models_ready(status: int, body: str, model: str) -> bool:
    """/v1/models answered 200 and lists the served model name."""
    if status != 200:
        return False
    try:
        doc = json.loads(body)
    except ValueError:
        return False
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return False
    return any(isinstance(m, dict) and m.get("id") == model for m in data)


def rank_problems(container: Optional[ContainerState], unit: str, guard: Optional[GuardState]) -> List[str]:
    """Every reason this rank is dead (the container is not judged while it may still start, None; the guard only
    when the watch was asked to check it)."""
    problems = [p for p in (container_problem(container),) if p] if container is not None else []
    if guard is not None:
        problem = guard_problem(unit, guard)
        if problem:
            problems.append(problem)
    return problems


# How long a watch waits for the guard to record a kill it just made (the guard kills, then writes its status).
GUARD_SETTLE_S = 3.0


def guard_may_lag(container: Optional[ContainerState], unit: str, guard: Optional[GuardState]) -> bool:
    """A container killed with SIGKILL (exit 137) while its guard still looks alive: the guard may have killed it
    and not yet recorded the trip, so the watch reads the guard again before it names the cause of death."""
    return (guard is not None and container is not None and container.exists and not container.running
            and container.exit_code == 137 and guard_problem(unit, guard) is None)


def not_started_yet(container: ContainerState, seen_running: bool, waited: float, wait_for_container: float) -> bool:
    """A watch started before its container (the launch starts every watch first, so none misses the API coming
    up) forgives a container that does not exist yet or was only created, until it has run once or the wait for
    it is over."""
    return (not seen_running and waited < wait_for_container
            and (not container.exists or container.status == "created"))


def verdict(host: str, ready: bool, problems: List[str], now: float, deadline: float,
            slice_end: float) -> Optional[Verdict]:
    """Decide after one poll; None means keep polling within this slice.

    Readiness wins over a problem seen in the same poll only when the rank still runs: a dead rank is
    reported even if the head answered in the same instant, because the group cannot serve without it.
    """
    if problems:
        return Verdict(DEAD, f"{host}: " + "; ".join(problems))
    if ready:
        return Verdict(READY, f"{host}: the head's API answers")
    if now >= deadline:
        return Verdict(TIMEOUT, f"{host}: the head's API did not answer before the deadline")
    if now >= slice_end:
        return Verdict(PENDING, f"{host}: alive, the head's API does not answer yet")
    return None


def log_excerpt(text: str, lines: int = 20, limit: int = 4000) -> str:
    """The last `lines` lines of a container log, at most `limit` characters (the reference's bound)."""
    tail = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return tail[-limit:]
