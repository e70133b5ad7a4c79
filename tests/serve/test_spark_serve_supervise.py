"""Supervised mode: the supervisor's decisions (roles/serve/files/spark_serve_supervise.py) and its rank actions."""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard, spark_serve_engine
from testlib import load_role_file

sup = load_role_file("serve", "spark_serve_supervise", {"spark_serve_engine": spark_serve_engine})

RUNNING = [sup.Seen("dgx1", sup.RUNNING), sup.Seen("dgx2", sup.RUNNING), sup.Seen("dgx3", sup.RUNNING)]
DEAD_WORKER = [sup.Seen("dgx1", sup.RUNNING), sup.Seen("dgx2", sup.STOPPED, 137, "exited"), sup.Seen("dgx3", sup.RUNNING)]


def test_all_running_needs_nothing() -> None:
    assert sup.decide(RUNNING, [], 1000.0, 3, 3600).action == sup.NONE


def test_a_dead_worker_restarts_the_group_within_the_limit() -> None:
    decision = sup.decide(DEAD_WORKER, [100.0], 1000.0, 3, 3600)
    assert decision.action == sup.RESTART and decision.dead == ("dgx2",)
    assert decision.message == ("dead rank(s) dgx2 (container stopped, exit code 137): restarting the whole group in "
                                "order (restart 2 of at most 3 in 3600 s)")


def test_the_rate_limit_gives_up_and_says_so() -> None:
    decision = sup.decide(DEAD_WORKER, [900.0], 1000.0, 1, 3600)
    assert decision.action == sup.GIVE_UP
    assert "rate limit reached (1 restart(s) in the last 3600 s, at most 1); giving up" in decision.message


def test_restarts_outside_the_window_no_longer_count() -> None:
    assert sup.recent([10.0, 500.0, 990.0], 1000.0, 600) == [500.0, 990.0]
    assert sup.decide(DEAD_WORKER, [10.0, 20.0], 4000.0, 2, 3600).action == sup.RESTART


def test_an_unreachable_rank_blocks_any_restart() -> None:
    seen = DEAD_WORKER[:2] + [sup.Seen("dgx3", sup.UNREACHABLE, detail="ssh: connect timed out")]
    decision = sup.decide(seen, [], 1000.0, 3, 3600)
    assert decision.action == sup.WAIT and "cannot reach dgx3" in decision.message


def test_a_guard_kill_or_a_missing_container_is_left_to_the_operator() -> None:
    tripped = [sup.Seen("dgx1", sup.RUNNING), sup.Seen("dgx2", sup.STOPPED, 137, sup.GUARD_TRIPPED)]
    decision = sup.decide(tripped, [], 1000.0, 3, 3600)
    assert decision.action == sup.GIVE_UP and "the memory guard killed dgx2" in decision.message
    gone = sup.decide([sup.Seen("dgx1", sup.RUNNING), sup.Seen("dgx2", sup.ABSENT)], [], 1000.0, 3, 3600)
    assert gone.action == sup.GIVE_UP and "no container to restart on dgx2" in gone.message


@pytest.mark.parametrize("size", [3, 4])
def test_restart_order_head_stops_first_and_starts_last(size: int) -> None:
    ranks = [sup.Rank(f"dgx{i + 1}", i, f"10.0.1.{71 + i}", i == 0) for i in range(size)]
    steps = sup.restart_steps(ranks)
    workers = [f"dgx{i + 1}" for i in range(1, size)]
    assert steps == ([("stop", "dgx1")] + [("stop", w) for w in workers] + [("start", w) for w in workers]
                     + [("start", "dgx1"), ("wait", "dgx1")] + [("steady", f"dgx{i + 1}") for i in range(size)])


def _config(**change: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "container": "c", "api_url": "http://10.0.1.71:8000/v1/models", "model": "m", "max_restarts": 1,
        "window": 3600, "interval": 5, "ready_timeout": 120, "stop_timeout": 60,
        "guard_startup": {"threshold": "5GiB", "interval": 0.25, "wait": 120},
        "guard_steady": {"threshold": "3GiB", "interval": 2, "wait": 0}, "history_file": "/tmp/h.json",
        "ssh": {"key": "/k", "known_hosts": "/kh", "user": "root", "connect_timeout": 10},
        "program": "/p/supervise.py", "python": "/usr/bin/python3", "state_dir": "/run/x", "docker": "docker",
        "ranks": [{"host": f"dgx{i + 1}", "rank": i, "address": f"10.0.1.{71 + i}", "local": i == 0} for i in (2, 0, 1, 3)]}
    doc.update(change)
    return doc


def test_config_sorts_ranks_and_accepts_four() -> None:
    ranks, _ = sup.parse_config(_config())
    assert [r.host for r in ranks] == ["dgx1", "dgx2", "dgx3", "dgx4"] and ranks[0].local


@pytest.mark.parametrize(("change", "expected"), [
    ({"max_restarts": 0}, "max_restarts must be a positive number, got 0"),
    ({"ranks": [{"host": "a", "rank": 0, "address": "x", "local": False}, {"host": "b", "rank": 1, "address": "y",
                                                                          "local": True}]},
     "exactly the head (rank 0) must be local"),
    ({"ranks": [{"host": "a", "rank": 0, "address": "x", "local": True}, {"host": "b", "rank": 2, "address": "y",
                                                                         "local": False}]},
     "ranks must be 0..n-1 with n >= 2, got [0, 2]"),
])
def test_bad_config_names_the_field(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        sup.parse_config(_config(**change))
    doc = _config()
    del doc["ssh"]
    with pytest.raises(ValueError, match="supervisor config lacks ssh"):
        sup.parse_config(doc)


def test_state_lines_round_trip_and_garbage_is_unreachable() -> None:
    line = sup.format_state("dgx2", sup.STOPPED, 137, "exited")
    assert line == "dgx2 stopped 137 exited"
    assert sup.parse_state(line) == sup.Seen("dgx2", sup.STOPPED, 137, "exited")
    assert sup.parse_state(sup.format_state("dgx1", sup.RUNNING, 0, None)) == sup.Seen("dgx1", sup.RUNNING, 0, None)
    assert sup.parse_state("Permission denied (publickey).").state == sup.UNREACHABLE
    assert sup.container_state(0, "false 137\n") == (sup.STOPPED, 137)
    assert sup.container_state(1, "") == (sup.ABSENT, None)


def test_ssh_pins_host_keys_and_quotes_the_remote_command() -> None:
    argv = sup.ssh_argv({"key": "/k", "known_hosts": "/kh", "user": "root", "connect_timeout": 10}, "10.0.1.72",
                        ["/usr/bin/python3", "-B", "/p/supervise.py", "rank", "state", "--host", "it's"])
    assert argv[:12] == ["ssh", "-i", "/k", "-o", "UserKnownHostsFile=/kh", "-o", "StrictHostKeyChecking=yes", "-o",
                         "BatchMode=yes", "-o", "ConnectTimeout=10", "-l"]
    assert shlex.split(" ".join(argv[argv.index("--") + 1:])) == [
        "/usr/bin/python3", "-B", "/p/supervise.py", "rank", "state", "--host", "it's"]


def test_history_survives_a_restart_of_the_supervisor(tmp_path: Path) -> None:
    program = load_role_file("serve", "spark_serve_supervisor",
                             {"spark_memguard": spark_memguard, "spark_serve_supervise": sup})
    path = str(tmp_path / "state" / "history.json")
    assert program.load_history(path) == []
    program.save_history(path, [1.5, 2.5])
    assert json.loads(Path(path).read_text()) == [1.5, 2.5] and program.load_history(path) == [1.5, 2.5]
    Path(path).write_text("not json")
    assert program.load_history(path) == []
