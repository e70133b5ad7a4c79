"""Server-side hygiene for benchmarks: Prometheus text parsing, counter deltas, sample validity.

Pure functions; fetching `/metrics` is the caller's business. Series are summed over their label sets
(one value per metric name) because a benchmark only needs engine-wide totals.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
SUCCESS = "vllm:request_success_total"
COUNTERS = (
    SUCCESS,
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {metric name: value summed over label sets}."""
    out: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, value = _split_sample(line)
        if name is None:
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def _split_sample(line: str) -> tuple[Optional[str], float]:
    brace = line.find("{")
    if brace >= 0:
        name = line[:brace]
        rest = line[line.rfind("}") + 1:].split()
    else:
        parts = line.split()
        name, rest = parts[0], parts[1:]
    if not rest:
        return None, 0.0
    try:
        value = float(rest[0])
    except ValueError:
        return None, 0.0
    return (name, value) if math.isfinite(value) else (None, 0.0)


def gauge(snapshot: Mapping[str, float], *names: str) -> Optional[float]:
    """First present gauge among names (vLLM renamed the KV usage gauge between versions)."""
    for name in names:
        if name in snapshot:
            return snapshot[name]
    return None


def is_idle(snapshot: Mapping[str, float]) -> bool:
    """Zero running and zero waiting requests (absent series count as zero)."""
    return snapshot.get(RUNNING, 0.0) == 0 and snapshot.get(WAITING, 0.0) == 0


def deltas(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counter growth for the counters the bench reports; absent counters are left out."""
    return {name.replace("vllm:", ""): after[name] - before.get(name, 0.0)
            for name in COUNTERS if name in after}


class Peaks:
    """Peak gauges seen by the during-sample poller."""

    def __init__(self) -> None:
        self.running = 0.0
        self.active = 0.0
        self.kv_usage = 0.0
        self.readings = 0

    def observe(self, snapshot: Mapping[str, float]) -> None:
        if not snapshot:
            return
        self.readings += 1
        running = snapshot.get(RUNNING, 0.0)
        self.running = max(self.running, running)
        self.active = max(self.active, running + snapshot.get(WAITING, 0.0))
        self.kv_usage = max(self.kv_usage, gauge(snapshot, *KV_USAGE) or 0.0)

    def as_dict(self) -> dict[str, Optional[float]]:
        """Peaks, or None for each when the poller never got a reading (sample shorter than its interval)."""
        if not self.readings:
            return {"peak_running": None, "peak_active": None, "peak_kv_usage": None}
        return {"peak_running": self.running, "peak_active": self.active, "peak_kv_usage": self.kv_usage}


def foreign_traffic(delta: Mapping[str, float], peaks: Peaks, sent: int, concurrency: int) -> Optional[str]:
    """Why a sample saw traffic that was not ours, or None.

    More successes than requests we sent, or more active requests than our concurrency (+1 slack for a
    closed loop refilling a slot), means someone else used the engine during the sample.
    """
    grown = delta.get("request_success_total")
    if grown is not None and grown > sent:
        return f"{int(grown)} requests finished on the server, {sent} were ours"
    if peaks.active > concurrency + 1:
        return f"peak active requests {int(peaks.active)} > concurrency {concurrency} + 1"
    return None


def spec_decode(delta: Mapping[str, float]) -> dict[str, Any]:
    """Acceptance figures from spec-decode counter deltas; empty when no drafts were made."""
    drafts = delta.get("spec_decode_num_drafts_total", 0.0)
    draft_tokens = delta.get("spec_decode_num_draft_tokens_total", 0.0)
    accepted = delta.get("spec_decode_num_accepted_tokens_total", 0.0)
    if drafts <= 0:
        return {}
    return {
        "drafts": drafts,
        "accepted_per_draft": accepted / drafts,
        "verified_per_draft": draft_tokens / drafts,
        "accepted_per_verified": accepted / draft_tokens if draft_tokens else None,
        "tokens_per_step": 1.0 + accepted / drafts,
    }


def prefix_hit_rate(delta: Mapping[str, float]) -> Optional[float]:
    """Prefix cache hits / queries over a sample, None when nothing was queried."""
    queries = delta.get("prefix_cache_queries_total", 0.0)
    return delta.get("prefix_cache_hits_total", 0.0) / queries if queries else None
