"""The pretend engine: admission, one sequential prefill lane, steady decode clock, prefix cache, counters.

Timing truth, per request:
  prefill_start = max(admission time, end of the previous prefill)      (prefills queue like one engine)
  prefill_s     = uncached_prompt_tokens / STANDIN_PREFILL_TPS
  first token   = prefill_start + prefill_s + STANDIN_TTFT_BASE_S (+ an injected stall)
  token k       = token k-1 + STANDIN_ITL_S + STANDIN_ITL_PER_STREAM_S * (decoding streams - 1)
  (token k is due then; it is written then or, grouped with later ones, soon after - see _decode)
Every wait sleeps until an absolute deadline on the loop's monotonic clock, so errors never accumulate.
"""
from __future__ import annotations

import asyncio
import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import AsyncGenerator, AsyncIterator, Deque, Dict, List, Sequence, Set, Tuple

Token = Tuple[int, str, str]  # (index in the output, "reasoning" | "content", text)

from .config import Behaviour, ServeConfig
from .text import OutputPlan, block_hashes

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)
FINISH_REASONS = ("stop", "length", "abort")


@dataclass
class Histogram:
    """A Prometheus histogram with fixed buckets."""

    buckets: Tuple[float, ...]
    counts: List[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1


@dataclass
class Counters:
    """Monotonic counters exported on /metrics and /standin/state."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted: int = 0
    preemptions: int = 0
    success: Dict[str, int] = field(default_factory=lambda: {r: 0 for r in FINISH_REASONS})
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))


class PrefixCache:
    """Chained block hashes in LRU order, bounded by the KV pool."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = max(capacity_blocks, 1)
        self.blocks: "OrderedDict[bytes, None]" = OrderedDict()

    def hit_blocks(self, hashes: Sequence[bytes], limit: int) -> int:
        """Leading blocks already cached (at most `limit`); touched so they stay warm."""
        hits = 0
        for h in hashes[:limit]:
            if h not in self.blocks:
                break
            self.blocks.move_to_end(h)
            hits += 1
        return hits

    def insert(self, hashes: Sequence[bytes]) -> None:
        for h in hashes:
            self.blocks[h] = None
            self.blocks.move_to_end(h)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)


@dataclass
class GenRequest:
    """One generation request as the engine sees it."""

    request_id: str
    pieces: Sequence[str]
    salt: str
    plan: OutputPlan
    stall_s: float = 0.0
    preempt: bool = False


@dataclass(eq=False)
class Stream:
    """Live state of one admitted request."""

    req: GenRequest
    arrived: float
    admitted: asyncio.Event = field(default_factory=asyncio.Event)
    cached_tokens: int = 0
    generated: int = 0
    decoding: bool = False
    spec_counted: Tuple[int, int] = (0, 0)
    block_hashes: List[bytes] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return len(self.req.pieces)

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.generated


async def sleep_until(deadline: float) -> None:
    """Sleep to an absolute point on the loop clock (never a relative, accumulating sleep)."""
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


class Engine:
    """Admission, prefill lane and decode clock shared by every request of one server."""

    def __init__(self, cfg: ServeConfig, beh: Behaviour) -> None:
        self.cfg = cfg
        self.beh = beh
        self.counters = Counters()
        self.cache = PrefixCache(cfg.kv_tokens // cfg.block_size)
        self.running: Set[Stream] = set()
        self.waiting: Deque[Stream] = deque()
        self.prefill_free_at = 0.0

    @property
    def kv_used(self) -> int:
        return sum(s.kv_tokens for s in self.running)

    @property
    def decoding(self) -> int:
        return sum(1 for s in self.running if s.decoding)

    def step_s(self) -> float:
        """Time between two tokens of one stream given how many streams decode now (counted only when the
        coupling is on: counting costs a pass over every running stream, per token)."""
        if not self.beh.itl_per_stream_s:
            return self.beh.itl_s
        return self.beh.itl_s + self.beh.itl_per_stream_s * max(self.decoding - 1, 0)

    def _fits(self, stream: Stream) -> bool:
        if len(self.running) >= self.cfg.max_num_seqs:
            return False
        return not self.running or self.kv_used + stream.prompt_tokens <= self.cfg.kv_tokens

    def _pump(self) -> None:
        """Admit waiting requests in arrival order while a slot and KV room exist."""
        while self.waiting and self._fits(self.waiting[0]):
            stream = self.waiting.popleft()
            self.running.add(stream)
            stream.admitted.set()

    def _schedule_prefill(self, stream: Stream, now: float) -> float:
        """Reserve the prefill lane; returns the first-token time."""
        req = stream.req
        hashes = block_hashes(req.pieces, self.cfg.block_size, req.salt) if self.cfg.prefix_caching else []
        if hashes:
            limit = (stream.prompt_tokens - 1) // self.cfg.block_size
            stream.cached_tokens = self.cache.hit_blocks(hashes, limit) * self.cfg.block_size
            self.counters.prefix_queries += stream.prompt_tokens
            self.counters.prefix_hits += stream.cached_tokens
        elif self.cfg.prefix_caching:
            self.counters.prefix_queries += stream.prompt_tokens
        start = max(now, self.prefill_free_at)
        self.prefill_free_at = start + (stream.prompt_tokens - stream.cached_tokens) / self.beh.prefill_tps
        stream.block_hashes = hashes
        return self.prefill_free_at + self.beh.ttft_base_s + req.stall_s

    def _count_spec(self, stream: Stream) -> None:
        """Spec-decode counters: each step yields 1 + accepted tokens, so steps = decoded / (1 + a)."""
        if self.cfg.spec_tokens <= 0:
            return
        decoded = max(stream.generated - 1, 0)
        drafts = math.floor(decoded / (1.0 + self.cfg.spec_accept))
        accepted = decoded - drafts
        old_drafts, old_accepted = stream.spec_counted
        self.counters.spec_drafts += drafts - old_drafts
        self.counters.spec_draft_tokens += (drafts - old_drafts) * self.cfg.spec_tokens
        self.counters.spec_accepted += accepted - old_accepted
        stream.spec_counted = (drafts, accepted)

    def _finish(self, stream: Stream, reason: str, now: float) -> None:
        self.running.discard(stream)
        if stream in self.waiting:
            self.waiting.remove(stream)
        self.counters.success[reason] += 1
        self.counters.e2e.observe(now - stream.arrived)
        self._pump()

    async def generate(self, req: GenRequest) -> AsyncGenerator[Tuple[Stream, List[Token], float], None]:
        """Yield (stream, tokens, due) per write: the output tokens due now, and the due time of the last."""
        loop = asyncio.get_running_loop()
        stream = Stream(req=req, arrived=loop.time())
        self.waiting.append(stream)
        self._pump()
        reason = "abort"
        try:
            await stream.admitted.wait()
            admitted_at = loop.time()
            self.counters.queue.observe(admitted_at - stream.arrived)
            if req.preempt:
                self.counters.preemptions += 1
            deadline = self._schedule_prefill(stream, admitted_at)
            async for item in self._decode(stream, deadline):
                yield item
            reason = req.plan.finish_reason
        finally:
            self._finish(stream, reason, loop.time())

    async def _decode(self, stream: Stream, first: float) -> AsyncIterator[Tuple[Stream, List[Token], float]]:
        """Tokens grouped into writes. Every token is released at or after its due time; tokens due while
        the server was late (or, with STANDIN_DECODE_TICK_S, due since the stream's previous wake-up) go out
        together. The first token leaves alone and the last one at its own due time, so TTFT and the
        decode rate (last - first) keep their truth whatever the grouping."""
        loop = asyncio.get_running_loop()
        await sleep_until(first)
        self.counters.prompt_tokens += stream.prompt_tokens
        self.counters.ttft.observe(first - stream.arrived)
        self.cache.insert(stream.block_hashes)
        stream.decoding = True
        tick = self.beh.decode_tick_s
        last_index = stream.req.plan.total - 1
        deadline = woke = first
        group: List[Token] = []
        for index, (kind, text) in enumerate(stream.req.plan.pieces()):
            if index:
                step = self.step_s()
                deadline += step
                self.counters.itl.observe(step)
                if deadline > woke:  # not due yet at the last wake-up
                    wake = deadline
                    if tick > 0:  # group, but never past the last token's due time (at this step)
                        wake = min(max(deadline, woke + tick), deadline + (last_index - index) * step)
                    if wake > loop.time():
                        if group:
                            yield stream, group, deadline - step
                            group = []
                        await sleep_until(wake)
                    woke = wake
            stream.generated += 1
            self.counters.generation_tokens += 1
            self._count_spec(stream)
            group.append((index, kind, text))
            if index == 0 or index == last_index:
                yield stream, group, deadline
                group = []
        if group:
            yield stream, group, deadline

    def gauges(self) -> Dict[str, float]:
        return {
            "num_requests_running": float(len(self.running)),
            "num_requests_waiting": float(len(self.waiting)),
            "kv_cache_usage_perc": min(self.kv_used / self.cfg.kv_tokens, 1.0),
        }
