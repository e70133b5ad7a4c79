"""The serving group's engine: what to do with a group and the order of every step that touches its containers.

A tensor-parallel group only works as a whole, so every path that changes it follows one order: the head
stops first (its API goes away before any worker it drives), then the workers by ascending rank; workers start
by ascending rank and the head last (it connects to them). The serve role's start, rollback and stop, the
reboot path (through the role's stop) and the supervisor's restart all take their steps from here, and the
group decision (keep, fresh start, replace, refuse) is made here once per run from what the ranks reported.

Standard library only: the supervisor ships this file to the nodes next to its program.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple

KEEP, FRESH, REPLACE, REFUSE = "keep", "fresh", "replace", "refuse"
ACTIONS = (KEEP, FRESH, REPLACE, REFUSE)
RUNNING, ABSENT = "running", "absent"


@dataclass(frozen=True)
class RankState:
    """One rank as the run's probe saw it, in rank order (the head is rank 0)."""

    host: str
    container: str
    in_sync: bool = True
    guard_present: bool = False


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str

    @property
    def replacing(self) -> bool:
        return self.action == REPLACE


def stop_order(order: Sequence[str]) -> List[str]:
    """The head first, then the workers by ascending rank (order is the hosts in rank order)."""
    return list(order)


def start_order(order: Sequence[str]) -> List[str]:
    """The workers by ascending rank, the head last."""
    return list(order[1:]) + list(order[:1])


def decide(ranks: Sequence[RankState], answers: bool, replace: bool) -> Decision:
    """Keep a healthy group, start a group where nothing runs, replace when asked; refuse to touch a running
    group that is unhealthy or not the planned one unless a replace is asked for."""
    running = [r for r in ranks if r.container == RUNNING]
    healthy = len(running) == len(ranks) and all(r.in_sync for r in ranks) and answers
    states = ", ".join(f"{r.host}: {r.container}" for r in ranks)
    if healthy and not replace:
        return Decision(KEEP, f"the group runs as planned and answers ({states})")
    if not running:
        return Decision(FRESH, f"nothing serves ({states}): fresh start")
    if replace:
        return Decision(REPLACE, f"replacing the running group as asked ({states})")
    why = "is not answering" if not answers else "is not the planned one"
    return Decision(REFUSE, f"a serving group is running but {why} (containers: {states}); rerun with "
                            "-e spark_serve_replace=true to replace it, or playbooks/stop.yml")


def launch_steps(ranks: Sequence[RankState]) -> Dict[str, List[str]]:
    """What a fresh start or a replace does, in order: disarm every guard (stale ones too), stop the running
    containers head first, keep them aside under another name until the new group answers, remove the ones that
    had already stopped, start every rank's new container workers first, the head last."""
    order = [r.host for r in ranks]
    running = {r.host for r in ranks if r.container == RUNNING}
    return {
        "disarm": [r.host for r in ranks if r.guard_present or r.host in running],
        "stop": [h for h in stop_order(order) if h in running],
        "keep_previous": [h for h in order if h in running],
        "remove_stopped": [r.host for r in ranks if r.container not in (RUNNING, ABSENT)],
        "start": start_order(order),
    }


def rollback_steps(ranks: Sequence[RankState], replacing: bool, renamed: Sequence[str] = ()) -> Dict[str, List[str]]:
    """After a failed start, from what the launch did before it failed: `renamed` are the ranks whose previous
    container was already set aside as <name>-pre-<UTC>. The name belongs to a new (failed) container on those and
    on every rank that had no previous one: remove it there, and only there. A replaced group's ranks that still
    hold their previous container under the name (the failure came before their rename) stop in stop order, the
    set-aside ones get their name back, and the whole previous group starts workers first, the head last."""
    order = [r.host for r in ranks]
    previous = [h for h in order if replacing and any(r.host == h and r.container == RUNNING for r in ranks)]
    set_aside = [h for h in order if h in renamed and h in previous]
    return {
        "remove": [h for h in order if h not in previous or h in set_aside],
        "stop": [h for h in stop_order(order) if h in previous and h not in set_aside],
        "restore": set_aside,
        "start": [h for h in start_order(order) if h in previous],
    }


def restart_steps(order: Sequence[str]) -> List[Tuple[str, str]]:
    """The supervisor's coordinated restart of a group whose containers all exist: stop in stop order, start in
    start order under startup guards, wait until the head answers, steady guards everywhere."""
    steps = [("stop", h) for h in stop_order(order)] + [("start", h) for h in start_order(order)]
    return steps + [("wait", order[0])] + [("steady", h) for h in order]


def rank_states(order: Sequence[str], probed: Mapping[str, Mapping[str, Any]],
                differs: Sequence[str] = ()) -> List[RankState]:
    """RankStates from the per-host probe documents ({container, guard_present}, other keys ignored) and the
    hosts whose running container differs from its spec; ValueError naming a host that has no document or a
    field of the wrong kind."""
    missing = [h for h in order if not isinstance(probed.get(h), Mapping)]
    if missing:
        raise ValueError(f"no probe result for {', '.join(missing)}")
    states = []
    for host in order:
        doc = probed[host]
        container = doc.get("container")
        if not isinstance(container, str) or not container:
            raise ValueError(f"{host}: container state must be a word, got {container!r}")
        states.append(RankState(host, container, host not in differs, _flag(host, doc, "guard_present", False)))
    return states


def _flag(host: str, doc: Mapping[str, Any], key: str, default: bool) -> bool:
    value = doc.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{host}: {key} must be true or false, got {value!r}")


def rollback_plan(order: Sequence[str], probed: Mapping[str, Mapping[str, Any]], replacing: bool,
                  renamed: Sequence[str]) -> Dict[str, List[str]]:
    """rollback_steps for the ranks as the run's probe saw them and the ranks renamed before the failure."""
    unknown = sorted(set(renamed) - set(order))
    if unknown:
        raise ValueError(f"renamed host(s) {', '.join(unknown)} are not in the group")
    return rollback_steps(rank_states(order, probed), replacing, renamed)


def group_plan(order: Sequence[str], probed: Mapping[str, Mapping[str, Any]], differs: Sequence[str],
               answers: bool, replace: bool) -> Dict[str, Any]:
    """The whole decision of one run for one group, with every ordered step it may take."""
    unknown = sorted(set(differs) - set(order))
    if unknown:
        raise ValueError(f"differing host(s) {', '.join(unknown)} are not in the group")
    ranks = rank_states(order, probed, differs)
    decision = decide(ranks, answers, replace)
    return {
        "action": decision.action,
        "reason": decision.reason,
        "replacing": decision.replacing,
        "launch": launch_steps(ranks),
        "stop": stop_order(order),
    }


# The end of a failed command's stderr is the part that says why.
STDERR_TAIL = 400


def _failure_line(task: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    msg = str(result.get("msg") or "failed").strip()
    stderr = str(result.get("stderr") or "").strip()[-STDERR_TAIL:]
    name = str(task.get("name") or "").strip()
    line = f"{name}: {msg}" if name else msg
    return f"{line}: {stderr}" if stderr else line


def _failed_items(result: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    return [r for r in result.get("results") or [] if isinstance(r, Mapping) and r.get("failed")]


def _item_target(item: Mapping[str, Any]) -> Any:
    """The rank a loop item ran for: the serve role loops over ranks with the loop variable serve_target."""
    return item.get(str(item.get("ansible_loop_var") or "item"))


def _entries(host: str, task: Mapping[str, Any], result: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """(where, line) per failure in one rank's result; where is empty for a check over the whole group (a
    run_once task), whose message names the ranks itself and is given as it is."""
    items = _failed_items(result)
    if items:
        return [(str(_item_target(r) or host), _failure_line(task, r)) for r in items]
    if task.get("run_once") is True:
        return [("", str(result.get("msg") or "failed").strip())]
    return [(host, _failure_line(task, result))]


def failure_text(order: Sequence[str], results: Mapping[str, Any], tasks: Mapping[str, Any]) -> str:
    """What failed, from each rank's own failed result and task (None for a rank the group's failure sent to the
    rollback without one): a check over the whole group (run_once) gives its message as it is, which names the
    ranks; any other failure is given with the ranks it happened on, the step and a command's stderr; a loop
    over the ranks (a run_once docker command per rank) names the rank of each failed item.
    """
    failed = [h for h in order if results.get(h)]
    if not failed:
        return "a rank failed without a result (see the task above)"
    grouped: Dict[str, List[str]] = {}
    for host in failed:
        for where, line in _entries(host, tasks.get(host) or {}, results[host]):
            hosts = grouped.setdefault(line, [])
            if where and where not in hosts:
                hosts.append(where)
    return "; ".join(f"{', '.join(hosts)}: {line}" if hosts else line for line, hosts in grouped.items())
