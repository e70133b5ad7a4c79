"""Supervised serving (opt-in): the decisions of the supervisor on the head, free of I/O.

The supervisor (spark_serve_supervisor.py, a systemd service on rank 0) looks at every rank's serving
container at a fixed interval. These functions decide what to do with what it saw: nothing, wait (a rank
cannot be reached: a management-path loss is not a dead rank and must not trigger a coordinated relaunch),
restart the whole group in order, or give up (rate limit reached, a memory guard tripped, a container is
gone) with a message for the journal. This file also runs on the nodes next to the program, so it imports
nothing but the standard library and the serving engine (spark_serve_engine.py, shipped beside it), whose order
every restart follows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

# The collection's module_utils/spark_serve_engine.py, installed beside this file: the filters order by it too.
import spark_serve_engine as engine

RUNNING, STOPPED, ABSENT, UNREACHABLE = "running", "stopped", "absent", "unreachable"
NONE, WAIT, RESTART, GIVE_UP = "none", "wait", "restart", "give-up"
# The memory guard's status-file state after it killed the container (spark_memguard.TRIPPED).
GUARD_TRIPPED = "tripped"
CONFIG_KEYS = ("container", "ranks", "api_url", "model", "max_restarts", "window", "interval", "ready_timeout",
               "stop_timeout", "guard_startup", "guard_steady", "history_file", "ssh", "program", "python",
               "state_dir", "docker")


@dataclass(frozen=True)
class Rank:
    """One rank as the supervisor reaches it: local (the head itself) or over SSH at its management address."""

    host: str
    rank: int
    address: str
    local: bool


@dataclass(frozen=True)
class Seen:
    """What one check saw on one rank."""

    host: str
    state: str
    exit_code: Optional[int] = None
    guard_status: Optional[str] = None
    detail: str = ""


@dataclass(frozen=True)
class Decision:
    """What to do after a check, and the journal line that says why."""

    action: str
    message: str
    dead: Tuple[str, ...] = ()


def parse_config(doc: Mapping[str, Any]) -> Tuple[List[Rank], Dict[str, Any]]:
    """Ranks in rank order and the settings; ValueError naming every missing or bad field."""
    missing = [k for k in CONFIG_KEYS if k not in doc]
    if missing:
        raise ValueError(f"supervisor config lacks {', '.join(missing)}")
    ranks = sorted((Rank(str(r["host"]), int(r["rank"]), str(r["address"]), bool(r["local"])) for r in doc["ranks"]),
                   key=lambda r: r.rank)
    errors = []
    if [r.rank for r in ranks] != list(range(len(ranks))) or len(ranks) < 2:
        errors.append(f"ranks must be 0..n-1 with n >= 2, got {[r.rank for r in ranks]}")
    if [r.local for r in ranks].count(True) != 1 or not ranks[0].local:
        errors.append("exactly the head (rank 0) must be local")
    for key in ("max_restarts", "window", "interval", "ready_timeout"):
        if not isinstance(doc[key], (int, float)) or isinstance(doc[key], bool) or doc[key] <= 0:
            errors.append(f"{key} must be a positive number, got {doc[key]!r}")
    if errors:
        raise ValueError("; ".join(errors))
    return ranks, dict(doc)


def recent(history: Sequence[float], now: float, window: float) -> List[float]:
    """The restart times that still count against the rate limit."""
    return [t for t in history if now - t < window]


def decide(seen: Sequence[Seen], history: Sequence[float], now: float, max_restarts: int, window: float) -> Decision:
    """One check's verdict. Unreachable ranks block any action; dead ranks restart the group within the limit."""
    unreachable = [s.host for s in seen if s.state == UNREACHABLE]
    dead = [s for s in seen if s.state in (STOPPED, ABSENT)]
    if unreachable:
        return Decision(WAIT, f"cannot reach {', '.join(unreachable)}; not restarting anything while a rank is "
                              "unreachable (a management-path loss is not a dead rank)")
    if not dead:
        return Decision(NONE, "every rank's container runs")
    names = tuple(s.host for s in dead)
    described = "; ".join(_describe(s) for s in dead)
    tripped = [s.host for s in dead if s.guard_status == GUARD_TRIPPED]
    if tripped:
        return Decision(GIVE_UP, f"dead rank(s) {described}: the memory guard killed {', '.join(tripped)}; not "
                                 "restarting under memory pressure, giving up (operator action: find the cause, then "
                                 "serve.yml -e spark_serve_replace=true)", names)
    gone = [s.host for s in dead if s.state == ABSENT]
    if gone:
        return Decision(GIVE_UP, f"dead rank(s) {described}: no container to restart on {', '.join(gone)}; giving up "
                                 "(run serve.yml)", names)
    counted = recent(history, now, window)
    if len(counted) >= max_restarts:
        return Decision(GIVE_UP, f"dead rank(s) {described}: rate limit reached ({len(counted)} restart(s) in the last "
                                 f"{window:g} s, at most {max_restarts}); giving up, the group stays down (operator "
                                 "action: serve.yml -e spark_serve_replace=true)", names)
    return Decision(RESTART, f"dead rank(s) {described}: restarting the whole group in order (restart "
                             f"{len(counted) + 1} of at most {max_restarts} in {window:g} s)", names)


def _describe(seen: Seen) -> str:
    if seen.state == ABSENT:
        return f"{seen.host} (container absent)"
    code = f", exit code {seen.exit_code}" if seen.exit_code is not None else ""
    return f"{seen.host} (container {seen.state}{code})"


def restart_steps(ranks: Sequence[Rank]) -> List[Tuple[str, str]]:
    """The coordinated restart, in the serving engine's order (stop head first, start workers first), then a
    wait until the head answers and steady guards everywhere."""
    return engine.restart_steps([r.host for r in ranks])


def parse_state(text: str) -> Seen:
    """The program's `rank state` line: '<host> <running|stopped|absent> <exit code|-> <guard status|->'."""
    parts = text.split()
    if len(parts) != 4 or parts[1] not in (RUNNING, STOPPED, ABSENT):
        return Seen(parts[0] if parts else "?", UNREACHABLE, detail=text.strip()[:200])
    code = None if parts[2] == "-" else int(parts[2])
    return Seen(parts[0], parts[1], code, None if parts[3] == "-" else parts[3])


def format_state(host: str, state: str, exit_code: Optional[int], guard_status: Optional[str]) -> str:
    return f"{host} {state} {'-' if exit_code is None else exit_code} {guard_status or '-'}"


def container_state(rc: int, stdout: str) -> Tuple[str, Optional[int]]:
    """`docker inspect --format '{{.State.Running}} {{.State.ExitCode}}'` -> (running|stopped|absent, exit code)."""
    if rc != 0:
        return ABSENT, None
    running, _, code = stdout.strip().partition(" ")
    return (RUNNING if running == "true" else STOPPED), (int(code) if code.strip().lstrip("-").isdigit() else None)


def ssh_argv(ssh: Mapping[str, Any], address: str, command: Sequence[str]) -> List[str]:
    """SSH to a rank with the transfer key, host keys pinned (never trust on first use), no prompts."""
    return ["ssh", "-i", str(ssh["key"]), "-o", f"UserKnownHostsFile={ssh['known_hosts']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(ssh['connect_timeout'])}",
            "-l", str(ssh["user"]), address, "--"] + [_quote(c) for c in command]


def _quote(word: str) -> str:
    """The remote side runs the command through its login shell: quote every word."""
    if word and all(c.isalnum() or c in "@%+=:,./-_" for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"
