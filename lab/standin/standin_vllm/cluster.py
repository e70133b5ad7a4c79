"""Multi-node rendezvous and liveness, shaped like vLLM's native (mp, --nnodes) launch.

Rank 0 listens on --master-addr:--master-port; headless ranks connect (retrying until
STANDIN_JOIN_TIMEOUT_S), announce rank and engine arguments, then both sides exchange a heartbeat every
STANDIN_HEARTBEAT_S. A lost connection or a heartbeat silent for STANDIN_HEARTBEAT_TIMEOUT_S fails the
whole group: the head tells the remaining workers to abort and every rank exits non-zero.
Messages are JSON objects, one per line.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

log = logging.getLogger("standin.cluster")

# Arguments every rank must agree on; real vLLM hangs at startup when they differ, the double says why.
ENGINE_SHAPING = (
    "model", "tensor_parallel_size", "pipeline_parallel_size", "nnodes", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "block_size", "dtype", "kv_cache_dtype", "quantization", "load_format",
    "speculative_config", "compilation_config", "enable_prefix_caching", "distributed_executor_backend",
)


def engine_fingerprint(args: Any) -> str:
    """Hash of the engine-shaping arguments of one rank."""
    shaped = {name: getattr(args, name, None) for name in ENGINE_SHAPING}
    return hashlib.sha256(json.dumps(shaped, sort_keys=True, default=str).encode()).hexdigest()[:16]


class GroupFailure:
    """First failure seen by this rank; the main loop exits non-zero once it is set."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason = ""
        self.closing = False

    def fail(self, reason: str) -> None:
        """Record a failure, unless this rank is already shutting down on purpose."""
        if not self.event.is_set() and not self.closing:
            self.reason = reason
            log.error("%s", reason)
            self.event.set()


async def send(writer: asyncio.StreamWriter, message: Dict[str, Any]) -> None:
    writer.write((json.dumps(message) + "\n").encode())
    await writer.drain()


async def receive(reader: asyncio.StreamReader, timeout: float) -> Optional[Dict[str, Any]]:
    """Next message, or None on EOF; asyncio.TimeoutError when silent too long."""
    line = await asyncio.wait_for(reader.readline(), timeout)
    if not line:
        return None
    return json.loads(line)


@dataclass(frozen=True)
class GroupSpec:
    """This rank's view of the group."""

    nnodes: int
    rank: int
    tp: int
    master_addr: str
    master_port: int
    fingerprint: str
    join_timeout_s: float
    heartbeat_s: float
    heartbeat_timeout_s: float


class Head:
    """Rank 0: accepts workers, watches their heartbeats, tells them when the group fails."""

    def __init__(self, spec: GroupSpec, failure: GroupFailure) -> None:
        self.spec = spec
        self.failure = failure
        self.workers: Dict[int, asyncio.StreamWriter] = {}
        self.all_joined = asyncio.Event()
        self.server: Optional[asyncio.AbstractServer] = None
        self.tasks: "set[asyncio.Task[None]]" = set()
        if spec.nnodes == 1:
            self.all_joined.set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.on_connect, self.spec.master_addr, self.spec.master_port)
        log.info("rank 0 listening for %d worker rank(s) on %s:%d", self.spec.nnodes - 1,
                 self.spec.master_addr, self.spec.master_port)
        self.spawn(self.heartbeat())

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def wait_joined(self) -> None:
        try:
            await asyncio.wait_for(self.all_joined.wait(), self.spec.join_timeout_s)
        except asyncio.TimeoutError:
            self.failure.fail(f"timed out after {self.spec.join_timeout_s:g} s: {len(self.workers) + 1}/"
                              f"{self.spec.nnodes} ranks joined (missing: {self.missing()})")

    def missing(self) -> str:
        return ", ".join(str(r) for r in range(1, self.spec.nnodes) if r not in self.workers) or "none"

    def check_join(self, hello: Optional[Dict[str, Any]]) -> Optional[Tuple[str, bool]]:
        """(why a join is refused, whether that breaks the whole group), or None when it is accepted."""
        if not hello or hello.get("type") != "join":
            return "expected a join message", False
        rank = hello.get("rank")
        if not isinstance(rank, int) or not 1 <= rank < self.spec.nnodes:
            return f"rank {rank!r} is outside 1..{self.spec.nnodes - 1}", False
        if rank in self.workers:
            return f"rank {rank} has already joined", False
        if hello.get("nnodes") != self.spec.nnodes or hello.get("tp") != self.spec.tp:
            return (f"rank {rank} has --nnodes {hello.get('nnodes')} --tensor-parallel-size {hello.get('tp')}, "
                    f"rank 0 has {self.spec.nnodes}/{self.spec.tp}"), True
        if hello.get("fingerprint") != self.spec.fingerprint:
            return f"rank {rank} was started with different engine arguments than rank 0", True
        return None

    async def on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            hello = await receive(reader, self.spec.heartbeat_timeout_s * 5)
        except (asyncio.TimeoutError, ValueError, ConnectionError):
            hello = None
        refused = self.check_join(hello)
        if refused or hello is None:
            problem, fatal = refused or ("no join message", False)
            log.error("refusing connection from %s: %s", peer, problem)
            await self.close_quietly(writer, {"type": "reject", "reason": problem})
            if fatal:
                self.failure.fail(f"group configuration mismatch: {problem}")
            return
        rank = int(hello["rank"])
        self.workers[rank] = writer
        await send(writer, {"type": "welcome", "nnodes": self.spec.nnodes})
        log.info("rank %d joined from %s (%d/%d ranks)", rank, peer[0] if peer else "?", len(self.workers) + 1,
                 self.spec.nnodes)
        if len(self.workers) == self.spec.nnodes - 1:
            log.info("all %d ranks joined", self.spec.nnodes)
            self.all_joined.set()
        await self.watch(rank, reader)

    async def watch(self, rank: int, reader: asyncio.StreamReader) -> None:
        """Fail the group when this worker goes silent or its connection drops."""
        while not self.failure.event.is_set():
            try:
                message = await receive(reader, self.spec.heartbeat_timeout_s)
            except asyncio.TimeoutError:
                self.lost(rank, f"no heartbeat for {self.spec.heartbeat_timeout_s:g} s")
                return
            except (ConnectionError, ValueError) as exc:
                self.lost(rank, f"connection error: {exc}")
                return
            if message is None:
                self.lost(rank, "connection closed")
                return

    def lost(self, rank: int, why: str) -> None:
        self.workers.pop(rank, None)
        self.failure.fail(f"rank {rank} lost ({why}); the group cannot continue")

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.spec.heartbeat_s)
            for writer in list(self.workers.values()):
                try:
                    await send(writer, {"type": "hb"})
                except ConnectionError:
                    continue

    async def broadcast(self, message: Dict[str, Any]) -> None:
        for writer in list(self.workers.values()):
            try:
                await send(writer, message)
            except ConnectionError:
                continue

    async def close_quietly(self, writer: asyncio.StreamWriter, message: Optional[Dict[str, Any]] = None) -> None:
        try:
            if message:
                await send(writer, message)
            writer.close()
        except ConnectionError:
            return

    async def stop(self) -> None:
        """Tell workers why the group ends, then close everything."""
        reason = self.failure.reason or "rank 0 shutting down"
        self.failure.closing = True
        await self.broadcast({"type": "abort", "reason": reason})
        for writer in list(self.workers.values()):
            await self.close_quietly(writer)
        for task in list(self.tasks):
            task.cancel()
        if self.server is not None:
            self.server.close()


class Worker:
    """A headless rank: joins the head, then only heartbeats until the group ends."""

    def __init__(self, spec: GroupSpec, failure: GroupFailure) -> None:
        self.spec = spec
        self.failure = failure
        self.writer: Optional[asyncio.StreamWriter] = None
        self.tasks: "set[asyncio.Task[None]]" = set()

    async def connect(self) -> Optional[asyncio.StreamReader]:
        """Retry until the head answers or the join timeout passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.join_timeout_s
        attempts = 0
        while loop.time() < deadline:
            try:
                reader, self.writer = await asyncio.open_connection(self.spec.master_addr, self.spec.master_port)
                return reader
            except OSError:
                attempts += 1
                if attempts % 20 == 1:
                    log.info("rank %d waiting for rank 0 at %s:%d", self.spec.rank, self.spec.master_addr,
                             self.spec.master_port)
                await asyncio.sleep(0.5)
        self.failure.fail(f"rank {self.spec.rank}: rank 0 at {self.spec.master_addr}:{self.spec.master_port} not "
                          f"reachable within {self.spec.join_timeout_s:g} s")
        return None

    async def join(self) -> None:
        reader = await self.connect()
        if reader is None or self.writer is None:
            return
        await send(self.writer, {"type": "join", "rank": self.spec.rank, "nnodes": self.spec.nnodes,
                                 "tp": self.spec.tp, "fingerprint": self.spec.fingerprint})
        try:
            answer = await receive(reader, self.spec.join_timeout_s)
        except (asyncio.TimeoutError, ConnectionError, ValueError) as exc:
            self.failure.fail(f"rank {self.spec.rank}: no answer from rank 0 ({exc!r})")
            return
        if not answer or answer.get("type") != "welcome":
            reason = (answer or {}).get("reason", "connection closed")
            self.failure.fail(f"rank {self.spec.rank}: rank 0 refused the join: {reason}")
            return
        log.info("rank %d joined the group at %s:%d", self.spec.rank, self.spec.master_addr, self.spec.master_port)
        for coro in (self.heartbeat(), self.watch(reader)):
            task = asyncio.ensure_future(coro)
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def heartbeat(self) -> None:
        while self.writer is not None:
            await asyncio.sleep(self.spec.heartbeat_s)
            try:
                await send(self.writer, {"type": "hb"})
            except ConnectionError:
                return

    async def watch(self, reader: asyncio.StreamReader) -> None:
        while not self.failure.event.is_set():
            try:
                message = await receive(reader, self.spec.heartbeat_timeout_s)
            except asyncio.TimeoutError:
                self.failure.fail(f"rank {self.spec.rank}: rank 0 silent for {self.spec.heartbeat_timeout_s:g} s")
                return
            except (ConnectionError, ValueError) as exc:
                self.failure.fail(f"rank {self.spec.rank}: lost rank 0 ({exc})")
                return
            if message is None:
                self.failure.fail(f"rank {self.spec.rank}: rank 0 closed the connection")
                return
            if message.get("type") == "abort":
                self.failure.fail(f"rank {self.spec.rank}: group aborted by rank 0: {message.get('reason')}")
                return
            if message.get("type") == "ready":
                log.info("rank %d: rank 0 is serving", self.spec.rank)

    async def stop(self) -> None:
        self.failure.closing = True
        for task in list(self.tasks):
            task.cancel()
        if self.writer is not None:
            try:
                self.writer.close()
            except ConnectionError:
                pass
