"""Process behaviour: multi-node rendezvous and failure, SIGTERM, held memory."""
from __future__ import annotations

import signal
import threading
import time
from typing import Dict, List, Optional

from standin_client import MODEL, Server, free_port, is_serving, stream, wait_ready

GROUP_ENV = {"STANDIN_STARTUP_S": "0.3", "STANDIN_JOIN_TIMEOUT_S": "20"}


def group_args(master_port: int, rank: int, extra: Optional[List[str]] = None) -> List[str]:
    args = ["--tensor-parallel-size", "3", "--nnodes", "3", "--node-rank", str(rank), "--master-addr",
            "127.0.0.1", "--master-port", str(master_port), "--distributed-executor-backend", "mp"]
    return args + (["--headless"] if rank else []) + (extra or [])


def wait_exit(servers: List[Server], timeout: float) -> Dict[str, Optional[int]]:
    """Return codes after at most `timeout` seconds (None = still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(s.proc.poll() is None for s in servers):
        time.sleep(0.05)
    return {s.log_path.stem: s.proc.poll() for s in servers}


def wait_for_log(server: Server, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in server.log():
        assert time.monotonic() < deadline and server.proc.poll() is None, server.log()
        time.sleep(0.05)


def test_group_serves_only_after_the_last_rank_and_dies_with_a_worker(spawn) -> None:  # type: ignore
    master = free_port()
    head = spawn(group_args(master, 0), GROUP_ENV, "head", ready=False)
    first = spawn(group_args(master, 1), GROUP_ENV, "rank1", ready=False)
    wait_for_log(head, "rank 1 joined", timeout=15)
    time.sleep(0.6)  # two startup delays' worth: an incomplete group must still not serve
    assert not is_serving(head) and head.proc.poll() is None and first.proc.poll() is None
    joined_at = time.monotonic()
    second = spawn(group_args(master, 2), GROUP_ENV, "rank2", ready=False)
    wait_ready(head, timeout=10)
    assert time.monotonic() - joined_at >= 0.3
    assert "all 3 ranks joined" in head.log() and "Application startup complete." in head.log()
    assert not is_serving(first) and not is_serving(second)
    assert stream(head, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 2}).done

    first.proc.kill()
    codes = wait_exit([head, second], timeout=5.0)
    assert codes["head-0"] not in (None, 0) and codes["rank2-2"] not in (None, 0), codes
    assert "rank 1 lost" in head.log()
    assert "rank 2" in second.log() and ("aborted" in second.log() or "rank 0" in second.log())


def test_workers_first_then_head_and_head_stop_ends_the_workers(spawn) -> None:  # type: ignore
    master = free_port()
    workers = [spawn(group_args(master, r), GROUP_ENV, f"w{r}", ready=False) for r in (1, 2)]
    time.sleep(0.6)
    head = spawn(group_args(master, 0), GROUP_ENV, "head")
    assert all(w.proc.poll() is None for w in workers)
    assert head.stop(signal.SIGTERM) == 0
    codes = wait_exit(workers, timeout=5.0)
    assert all(code == 1 for code in codes.values()), codes
    assert all("rank 0 shutting down" in w.log() for w in workers)


def test_mismatched_engine_arguments_fail_the_group(spawn) -> None:  # type: ignore
    master = free_port()
    head = spawn(group_args(master, 0), GROUP_ENV, "head", ready=False)
    worker = spawn(group_args(master, 1, ["--max-model-len", "8192"]), GROUP_ENV, "w1", ready=False)
    codes = wait_exit([head, worker], timeout=8.0)
    assert codes == {"head-0": 1, "w1-1": 1}
    assert "different engine arguments" in head.log() and "refused" in worker.log()


def test_worker_gives_up_when_no_head_answers(spawn) -> None:  # type: ignore
    worker = spawn(group_args(free_port(), 1), {"STANDIN_JOIN_TIMEOUT_S": "1"}, "lonely", ready=False)
    assert wait_exit([worker], timeout=6.0) == {"lonely-0": 1}
    assert "not reachable within 1 s" in worker.log()


def test_sigterm_mid_stream_exits_zero(spawn) -> None:  # type: ignore
    server = spawn([], {"STANDIN_ITL_S": "0.02"})
    result: dict = {}
    reader = threading.Thread(target=lambda: result.update(r=stream(
        server, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 200, "ignore_eos": True})))
    reader.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert server.stop(signal.SIGTERM, timeout=10) == 0
    assert time.monotonic() - started < 5
    reader.join(10)
    assert not result["r"].done
    assert "received SIGTERM" in server.log()


def rss_mib(server: Server) -> float:
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_memory_is_held_resident(spawn) -> None:  # type: ignore
    plain = spawn([], {})
    heavy = spawn([], {"STANDIN_MEMORY_MB": "256"})
    assert rss_mib(heavy) - rss_mib(plain) > 240
    assert "holding 256 MiB" in heavy.log()
