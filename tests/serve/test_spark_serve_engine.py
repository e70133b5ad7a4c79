"""The serving engine (module_utils/spark_serve_engine.py): the group decision and the order of every step."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serve_engine as engine
from testlib import load_source

FILTER = load_source("filter", "sparkfleet_serve_engine")
ORDER3 = ["dgx1", "dgx2", "dgx3"]
ORDER4 = ["dgx1", "dgx2", "dgx3", "dgx4"]


def _probed(*states: str, guards: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    return {f"dgx{i + 1}": {"container": s, "guard_present": f"dgx{i + 1}" in guards, "image_id": "sha256:x"}
            for i, s in enumerate(states)}


# (containers per rank, in sync, head answers, replace asked) -> action
DECISIONS = [
    (("running",) * 3, True, True, False, engine.KEEP),
    (("running",) * 3, True, True, True, engine.REPLACE),
    (("absent",) * 3, True, False, False, engine.FRESH),
    (("absent",) * 3, True, False, True, engine.FRESH),
    (("exited", "exited", "absent"), True, False, False, engine.FRESH),
    (("running", "exited", "running"), True, False, False, engine.REFUSE),
    (("running", "exited", "running"), True, False, True, engine.REPLACE),
    (("running",) * 3, False, True, False, engine.REFUSE),
    (("running",) * 3, True, False, False, engine.REFUSE),
    (("running",) * 3, False, True, True, engine.REPLACE),
]


@pytest.mark.parametrize(("states", "in_sync", "answers", "replace", "action"), DECISIONS)
def test_the_group_decision(states: tuple[str, ...], in_sync: bool, answers: bool, replace: bool, action: str) -> None:
    plan = engine.group_plan(ORDER3, _probed(*states), [] if in_sync else ["dgx2"], answers, replace)
    assert plan["action"] == action
    assert plan["replacing"] == (action == engine.REPLACE)


def test_a_refusal_says_why_and_what_to_run() -> None:
    not_answering = engine.group_plan(ORDER3, _probed("running", "exited", "running"), [], False, False)
    assert not_answering["reason"] == (
        "a serving group is running but is not answering (containers: dgx1: running, dgx2: exited, dgx3: running); "
        "rerun with -e spark_serve_replace=true to replace it, or playbooks/stop.yml")
    stale = engine.group_plan(ORDER3, _probed("running", "running", "running"), ["dgx3"], True, False)
    assert "is not the planned one" in stale["reason"]


@pytest.mark.parametrize("order", [ORDER3, ORDER4])
def test_stop_head_first_start_head_last(order: list[str]) -> None:
    assert engine.stop_order(order) == order
    assert engine.start_order(order) == order[1:] + order[:1]


def test_a_replace_stops_keeps_and_restarts_only_what_ran() -> None:
    plan = engine.group_plan(ORDER4, _probed("running", "running", "exited", "absent", guards=("dgx4",)), [], True, True)
    assert plan["launch"] == {
        "disarm": ["dgx1", "dgx2", "dgx4"],
        "stop": ["dgx1", "dgx2"],
        "keep_previous": ["dgx1", "dgx2"],
        "remove_stopped": ["dgx3"],
        "start": ["dgx2", "dgx3", "dgx4", "dgx1"],
    }
    probed = _probed("running", "running", "exited", "absent", guards=("dgx4",))
    assert engine.rollback_plan(ORDER4, probed, True, plan["launch"]["keep_previous"]) == {
        "remove": ["dgx1", "dgx2", "dgx3", "dgx4"], "stop": [], "restore": ["dgx1", "dgx2"], "start": ["dgx2", "dgx1"]}
    assert plan["stop"] == ORDER4


def test_a_fresh_start_has_nothing_to_bring_back() -> None:
    plan = engine.group_plan(ORDER3, _probed("absent", "exited", "absent"), [], False, False)
    assert plan["launch"]["stop"] == [] and plan["launch"]["keep_previous"] == []
    assert plan["launch"]["remove_stopped"] == ["dgx2"]
    assert engine.rollback_plan(ORDER3, _probed("absent", "exited", "absent"), plan["replacing"],
                                plan["launch"]["keep_previous"]) == {"remove": ORDER3, "stop": [], "restore": [], "start": []}


def test_the_supervisors_restart_follows_the_same_order() -> None:
    assert engine.restart_steps(ORDER3) == [
        ("stop", "dgx1"), ("stop", "dgx2"), ("stop", "dgx3"),
        ("start", "dgx2"), ("start", "dgx3"), ("start", "dgx1"),
        ("wait", "dgx1"), ("steady", "dgx1"), ("steady", "dgx2"), ("steady", "dgx3")]


BAD_PROBES = [
    ({"dgx1": {"container": "running"}, "dgx2": {"container": "running"}}, "no probe result for dgx3"),
    ({**_probed("running", "running", "running"), "dgx2": {"container": ""}}, "dgx2: container state must be a word"),
    ({**_probed("running", "running", "running"), "dgx3": {"container": "running", "guard_present": "maybe"}},
     "dgx3: guard_present must be true or false, got 'maybe'"),
]


@pytest.mark.parametrize(("probed", "message"), BAD_PROBES)
def test_bad_probe_documents_name_the_host_and_field(probed: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        engine.group_plan(ORDER3, probed, [], True, False)


def test_a_differing_host_outside_the_group_is_an_error() -> None:
    with pytest.raises(ValueError, match="differing host.s. dgx9 are not in the group"):
        engine.group_plan(ORDER3, _probed("running", "running", "running"), ["dgx9"], True, False)


def test_the_filter_wraps_errors_and_refuses_non_booleans() -> None:
    assert FILTER.spark_serve_group(ORDER3, _probed("running", "running", "running", guards=("dgx1",)),
                                    [], True, False)["action"] == engine.KEEP
    assert FILTER.spark_serve_group(ORDER3, _probed("running", "running", "running"), [], True,
                                    False)["launch"]["disarm"] == ORDER3
    with pytest.raises(AnsibleFilterError, match="spark_serve_group: no probe result for dgx3"):
        FILTER.spark_serve_group(ORDER3, {"dgx1": {"container": "absent"}, "dgx2": {"container": "absent"}}, [], False,
                                 False)
    with pytest.raises(AnsibleFilterError, match="spark_serve_replace must be a boolean, got 'true'"):
        FILTER.spark_serve_group(ORDER3, _probed("absent", "absent", "absent"), [], False, "true")
    assert FILTER.spark_serve_stop_order(ORDER4) == ORDER4


# A replace of a running group that failed part way: (ranks renamed before the failure) -> the rollback
PARTIAL = [
    ([], {"remove": [], "stop": ["dgx1", "dgx2", "dgx3"], "restore": [], "start": ["dgx2", "dgx3", "dgx1"]}),
    (["dgx2"], {"remove": ["dgx2"], "stop": ["dgx1", "dgx3"], "restore": ["dgx2"], "start": ["dgx2", "dgx3", "dgx1"]}),
    (ORDER3, {"remove": ORDER3, "stop": [], "restore": ORDER3, "start": ["dgx2", "dgx3", "dgx1"]}),
]


@pytest.mark.parametrize(("renamed", "expected"), PARTIAL)
def test_a_partial_replace_never_removes_a_previous_container(renamed: list[str], expected: dict[str, list[str]]) -> None:
    running = _probed("running", "running", "running")
    assert engine.rollback_plan(ORDER3, running, True, renamed) == expected
    assert FILTER.spark_serve_rollback(ORDER3, running, True, renamed) == expected


def test_a_failed_fresh_start_removes_everything_it_made() -> None:
    assert engine.rollback_plan(ORDER3, _probed("absent", "exited", "absent"), False, []) == {
        "remove": ORDER3, "stop": [], "restore": [], "start": []}
    with pytest.raises(AnsibleFilterError, match="spark_serve_rollback: renamed host.s. dgx9 are not in the group"):
        FILTER.spark_serve_rollback(ORDER3, _probed("running", "running", "running"), True, ["dgx9"])


_RENAME = {"name": "Serve | Keep the previous containers as <name>-pre-<UTC> until the new group answers", "run_once": False}
_RESTART = {"name": "Serve | Restart", "run_once": True}
_DEAD = "dgx2: container is exited, exit code 3 | last log lines of dgx2: broken"
FAILURES = [
    # one rank's docker command failed; the others were sent to the rollback with the group (no result of their own)
    ({"dgx3": {"msg": "non-zero return code", "stderr": "Error: rename failed\n"}, "dgx1": None}, {"dgx3": _RENAME},
     f"dgx3: {_RENAME['name']}: non-zero return code: Error: rename failed"),
    # a check over the whole group (run_once) fails the first rank alone, with a message that names the ranks
    ({"dgx1": {"msg": _DEAD}}, {"dgx1": {"name": "Serve | Fail fast on a dead rank or the deadline", "run_once": True}},
     _DEAD),
    # the same step failed on two ranks, another step on a third
    ({"dgx1": {"msg": "boom"}, "dgx2": {"msg": "boom"}, "dgx3": {"msg": "other", "stderr": ""}},
     {"dgx1": {"name": "A"}, "dgx2": {"name": "A"}, "dgx3": {"name": "B"}}, "dgx1, dgx2: A: boom; dgx3: B: other"),
    # a run_once loop over the ranks names the rank of the failed item
    ({"dgx1": {"msg": "One or more items failed", "results": [
        {"serve_target": "dgx2", "ansible_loop_var": "serve_target", "failed": False},
        {"serve_target": "dgx3", "ansible_loop_var": "serve_target", "failed": True, "msg": "non-zero return code",
         "stderr": "docker start: refused"}]}},
     {"dgx1": _RESTART}, "dgx3: Serve | Restart: non-zero return code: docker start: refused"),
    # nobody's result is known (a rank left the play): still one clear line
    ({"dgx1": None}, {}, "a rank failed without a result (see the task above)"),
]


@pytest.mark.parametrize(("results", "tasks", "expected"), FAILURES)
def test_failure_text_says_what_failed_where(results: dict[str, Any], tasks: dict[str, Any], expected: str) -> None:
    assert FILTER.spark_serve_failure(ORDER3, results, tasks) == expected


def test_failure_text_keeps_the_end_of_a_long_stderr() -> None:
    text = engine.failure_text(ORDER3, {"dgx2": {"msg": "x", "stderr": "a" * 1000 + " the reason"}}, {})
    assert text.endswith(" the reason") and len(text) < 450


def test_failure_filter_refuses_what_is_not_a_mapping() -> None:
    with pytest.raises(AnsibleFilterError, match="spark_serve_failure: results and tasks must be mappings"):
        FILTER.spark_serve_failure(ORDER3, ["dgx1"], {})
