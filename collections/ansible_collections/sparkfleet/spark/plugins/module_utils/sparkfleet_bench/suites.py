"""Benchmark suites and their runner: quality gate, decode matrix, cold prefill, prefix replay, admission,
needle in a haystack. One asyncio process, one BenchClient session, server hygiene from /metrics.

The order and rules follow the bench method reference (section 1): the quality gate must pass first,
every decode point gets a discarded warm-up and then shuffled rounds until its interval converges,
cold prefill samples that hit the prefix cache are discarded, and bench.json is rewritten after every
suite so an abort keeps what was measured.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import random
import resource
import signal
import socket
import time
import traceback
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Optional, Sequence

from .client import READ_BYTES, BenchClient, RequestResult
from .compliance import (
    ARMS, RECORDS, response_format, score)
from .compliance import prompt as compliance_prompt
from .compliance import (
    prompts_sha256 as compliance_sha256)
from .monitor import (
    MonitorLimits, Monitors, MonitorSpec, monitor_warnings, spec_problems)
from .metrics import (
    Peaks, deltas, foreign_traffic, is_idle, parse_prometheus, prefix_hit_rate, spec_decode)
from .prompts import (
    ADMISSION_TAIL, DECODE_CASES, SAMPLED_CASES, sampled_sha256, NEEDLE_PHRASE, NEEDLE_QUESTION, PREFILL_TAIL, QUALITY_PROMPT, REASONING_OFF,
    check_quality, needle_haystack, nonce_prefix, prompts_sha256, text_of_chars)
from .report import (
    compare, new_report, verdict, write_outputs)
from .stats import (
    converged, percentiles, summarize)
from . import __version__

SUITE_ORDER = ("quality", "compliance", "decode", "sampled", "prefill", "prefix", "admission", "needle")
QUICK = ("quality", "decode")
# The reference's full run; compliance and needle run only when named.
FULL = ("quality", "decode", "sampled", "prefill", "prefix", "admission")
# Ctrl-C, and how systemd stops the scheduled run: both end the run as a fail with a written report.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Identity fields a caller supplies (module args, CLI --identity KEY=VALUE); server_version and
# sparkfleet_version are the run's own.
SUPPLIED_IDENTITY = ("image_id", "image_labels", "serve_profile", "serve_profile_sha256", "kernel", "driver")
# Request fields an --extra-body may not replace: the bench's timing and parsing depend on them.
BENCH_OWNED_KEYS = ("model", "messages", "prompt", "stream")


@dataclass
class BenchConfig:
    """Every knob of a run; names match the playbook variables without the `spark_bench_` prefix."""

    url: str
    output_dir: str
    model: str = ""
    suites: list[str] = field(default_factory=lambda: list(QUICK))
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    # Tokens of prior context before each decode prompt (llama-benchy's --depth); 0 = none.
    depths: list[int] = field(default_factory=lambda: [0])
    cases: list[str] = field(default_factory=lambda: ["prose", "code"])
    min_samples: int = 3
    max_samples: int = 4
    precision: float = 2.0
    tolerance: float = 3.0
    compare: str = ""
    seed: int = 0
    timeout: float = 1800.0
    max_tokens: int = 256
    quality_runs: int = 5
    prefill_sizes: list[int] = field(default_factory=lambda: [2048, 32768, 65536, 131072])
    prefill_texts: list[str] = field(default_factory=lambda: ["filler", "source"])
    prefill_repeats: int = 3
    prefix_tokens: int = 32768
    prefix_runs: int = 3
    admission_tokens: int = 65536
    admission_requests: int = 4
    needle_tokens: int = 520000
    needle_depths: list[int] = field(default_factory=lambda: [10, 50, 90])
    idle_timeout: float = 300.0
    settle: float = 0.5
    poll_interval: float = 1.0
    max_retries: int = 3
    compliance_concurrency: int = 4
    compliance_tokens: int = 4096
    sampled_requests: int = 32
    sampled_concurrency: list[int] = field(default_factory=lambda: [1, 4])
    api_key: Optional[str] = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    # What is measured, as the caller knows it (image ID and labels, serve profile name and hash, kernel,
    # driver); the run adds the server's /version and sparkfleet's version. The client reads no inventory.
    identity: dict[str, Any] = field(default_factory=dict)
    force_compare: bool = False
    sparkfleet_version: str = ""
    # A file whose appearance stops the run at the next point boundary (an operator's or another job's hold).
    hold_file: str = ""
    # One stream per rank that samples memory, thermals and the GPU during the run (MonitorSpec fields), and the
    # limits that halt it (MonitorLimits fields); none: the run is not monitored, and the report says so.
    monitors: list[dict[str, Any]] = field(default_factory=list)
    monitor_limits: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # `full` names the reference's full run; expanded here so the report lists the suites it ran.
        if "full" in self.suites:
            expanded: list[str] = []
            for suite in self.suites:
                for name in (FULL if suite == "full" else (suite,)):
                    if name not in expanded:
                        expanded.append(name)
            self.suites = expanded


def validate(cfg: BenchConfig) -> list[str]:
    """Every problem with the configuration, named by field (empty when it is usable)."""
    problems = []
    if not cfg.url.startswith(("http://", "https://")):
        problems.append(f"url: {cfg.url!r} is not an http(s) URL")
    if not cfg.output_dir:
        problems.append("output_dir: required")
    if not cfg.suites:
        problems.append("suites: at least one suite is required")
    unknown = [s for s in cfg.suites if s not in SUITE_ORDER]
    if unknown:
        problems.append(f"suites: unknown {unknown} (known: {', '.join(SUITE_ORDER)}, or full)")
    bad_cases = [c for c in cfg.cases if c not in DECODE_CASES]
    if bad_cases:
        problems.append(f"cases: unknown {bad_cases} (known: {', '.join(DECODE_CASES)})")
    if not cfg.sampled_concurrency or any(c < 1 for c in cfg.sampled_concurrency) or cfg.sampled_requests < 1:
        problems.append(f"sampled: needs positive requests and stream counts, got {cfg.sampled_requests} requests at "
                        f"{cfg.sampled_concurrency}")
    if not cfg.concurrency or any(c < 1 for c in cfg.concurrency):
        problems.append(f"concurrency: needs positive stream counts, got {cfg.concurrency}")
    if not cfg.depths or any(d < 0 for d in cfg.depths) or len(set(cfg.depths)) != len(cfg.depths):
        problems.append(f"depths: needs distinct context sizes >= 0 (tokens), got {cfg.depths}")
    if cfg.min_samples < 2 or cfg.max_samples < cfg.min_samples:
        problems.append(f"min_samples/max_samples: need 2 <= min <= max, got {cfg.min_samples}/{cfg.max_samples}")
    if cfg.precision <= 0 or cfg.tolerance <= 0:
        problems.append("precision/tolerance: must be positive percentages")
    if not cfg.timeout > 0:  # written so that NaN is refused too
        problems.append(f"timeout: must be a positive number of seconds, got {cfg.timeout:g}")
    bad_texts = [t for t in cfg.prefill_texts if t not in ("filler", "source")]
    if bad_texts:
        problems.append(f"prefill_texts: unknown {bad_texts} (known: filler, source)")
    if not isinstance(cfg.extra_body, dict):
        problems.append(f"extra_body: must be a JSON object, got {type(cfg.extra_body).__name__}")
    else:
        owned = sorted(k for k in cfg.extra_body if k in BENCH_OWNED_KEYS)
        if owned:
            problems.append(f"extra_body: {owned} are set by the bench itself (model, prompt and streaming are "
                            "what it measures)")
    if not isinstance(cfg.identity, dict):
        problems.append(f"identity: must be a mapping, got {type(cfg.identity).__name__}")
    else:
        unknown_identity = sorted(k for k in cfg.identity if k not in SUPPLIED_IDENTITY)
        if unknown_identity:
            problems.append(f"identity: unknown {unknown_identity} (known: {', '.join(SUPPLIED_IDENTITY)})")
        labels = cfg.identity.get("image_labels")
        if labels is not None and not isinstance(labels, dict):
            problems.append("identity: image_labels must be a mapping of label to value")
    if cfg.compare and cfg.compare != "none" and not Path(cfg.compare).is_file():
        problems.append(f"compare: baseline {cfg.compare!r} is not a file")
    return problems + _monitor_problems(cfg)


def _monitor_problems(cfg: BenchConfig) -> list[str]:
    problems = spec_problems(cfg.monitors)
    known = set(MonitorLimits.__dataclass_fields__)
    unknown = sorted(k for k in cfg.monitor_limits if k not in known)
    if unknown:
        problems.append(f"monitor_limits: unknown {unknown} (known: {', '.join(sorted(known))})")
    for key, value in cfg.monitor_limits.items():
        if key in known and not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
            problems.append(f"monitor_limits.{key}: must be a positive number, got {value!r}")
    return problems


def plan(cfg: BenchConfig, max_model_len: Optional[int] = None) -> list[str]:
    """The points a run would measure, in suite order (check mode reports this without requests)."""
    points: list[str] = []
    for suite in (s for s in SUITE_ORDER if s in cfg.suites):
        if suite == "decode":
            points += [f"decode/{decode_label(case, c, d)}" for case, c, d in decode_points(cfg)]
        elif suite == "sampled":
            points += [f"sampled/{case}-c{c}" for case in SAMPLED_CASES for c in cfg.sampled_concurrency]
        elif suite == "compliance":
            points += [f"compliance/{arm}" for arm in ARMS]
        elif suite == "prefill":
            points += [f"prefill/{t}-{s}" for t in cfg.prefill_texts for s in prefill_sizes(cfg, max_model_len)]
        else:
            points.append(suite)
    return points


DecodePoint = tuple[str, int, int]  # (case, concurrency, depth)


def decode_points(cfg: BenchConfig) -> list[DecodePoint]:
    """Every decode point: case x concurrency x depth of prior context."""
    return [(case, c, d) for d in cfg.depths for case in cfg.cases for c in cfg.concurrency]


def decode_label(case: str, concurrency: int, depth: int) -> str:
    """case-cN, with @dDEPTH after prior context (the same names as the report's points)."""
    return f"{case}-c{concurrency}" + (f"@d{depth}" if depth else "")


def prefill_sizes(cfg: BenchConfig, max_model_len: Optional[int]) -> list[int]:
    """Sizes that fit: the reference drops sizes >= max_model_len - 64."""
    return [s for s in cfg.prefill_sizes if max_model_len is None or s < max_model_len - 64]


def merge_body(body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` merged into a request body: nested objects merge key by key, anything else replaces."""
    merged = dict(body)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_body(merged[key], value)
        else:
            merged[key] = value
    return merged


class Abort(Exception):
    """Stops the run; the reason lands in bench.json as `aborted`."""


def model_cards(text: str) -> list[dict[str, Any]]:
    """The model cards of a /v1/models answer; Abort when it is not an OpenAI model list (a proxy's HTML
    login page answers 200 too)."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    cards = data.get("data") if isinstance(data, dict) else None
    if not isinstance(cards, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in cards):
        raise Abort(f"GET /v1/models answered 200 but not an OpenAI model list: {text[:80]!r}")
    return cards


def unexpected(exc: BaseException) -> str:
    """One line naming an unforeseen exception and the innermost frame that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    return f"unexpected {type(exc).__name__}: {exc}{where}"


# ---------------------------------------------------------------- pure sample metrics

def _tokens_by(times: Sequence[float], t: float, per_chunk: float) -> float:
    """Tokens emitted after a stream's first token chunk up to time t, linear between chunk stamps."""
    if t <= times[0]:
        return 0.0
    if t >= times[-1]:
        return (len(times) - 1) * per_chunk
    j = bisect_right(times, t) - 1
    return (j + (t - times[j]) / (times[j + 1] - times[j])) * per_chunk


def decode_window_tps(results: Sequence[RequestResult]) -> Optional[float]:
    """Token rate while every stream is decoding: window [latest first token, earliest last token]."""
    streams = [r for r in results if len(r.token_times) >= 2 and r.completion_tokens >= 2]
    if not streams or len(streams) != len(results):
        return None
    start = max(r.token_times[0] for r in streams)
    end = min(r.token_times[-1] for r in streams)
    if end <= start:
        return None
    total = 0.0
    for r in streams:
        per_chunk = (r.completion_tokens - 1) / (len(r.token_times) - 1)
        total += _tokens_by(r.token_times, end, per_chunk) - _tokens_by(r.token_times, start, per_chunk)
    return total / (end - start)


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def chunk_gaps(result: RequestResult) -> list[float]:
    """Gaps between a stream's token-bearing chunks (ITL per chunk: with speculative decoding one chunk can
    carry several tokens, so this measures jitter and stalls, not the per-token rate)."""
    times = result.token_times
    return [b - a for a, b in zip(times, times[1:])]


def e2e(result: RequestResult) -> Optional[float]:
    """Send to the last token-bearing chunk (the usage chunk and [DONE] are not part of the answer)."""
    return None if result.t_last_token is None else result.t_last_token - result.t_send


def distributions(results: Sequence[RequestResult]) -> dict[str, list[float]]:
    """Per-observation latencies of one sample: TTFT and E2E per request, ITL per chunk gap."""
    return {"ttft_s": [r.ttft for r in results if r.ttft is not None],
            "e2e_s": [v for v in (e2e(r) for r in results) if v is not None],
            "itl_s": [gap for r in results for gap in chunk_gaps(r)]}


def sample_metrics(results: Sequence[RequestResult], spec: dict[str, Any]) -> dict[str, Optional[float]]:
    """One decode sample -> its metric values (all requests must be ok)."""
    wall = max(r.t_end for r in results) - min(r.t_send for r in results)
    window = decode_window_tps(results)
    gaps = [gap for r in results for gap in chunk_gaps(r)]
    step = None
    if spec.get("tokens_per_step") and window:
        step = 1000.0 * spec["tokens_per_step"] * len(results) / window
    return {
        "tps": sum(r.completion_tokens for r in results) / wall if wall > 0 else None,
        "decode_window_tps": window,
        "per_stream_tps": _mean([r.decode_tps for r in results]),
        "ttft_s": _mean([r.ttft for r in results]),
        "ttfat_s": _mean([r.ttfat for r in results]),
        "ttfr_s": _mean([None if r.t_first_chunk is None else r.t_first_chunk - r.t_send for r in results]),
        "step_ms": step,
        "itl_s": sum(gaps) / len(gaps) if gaps else None,
        "pp_tps": _mean([r.prompt_tokens / r.ttft if r.ttft and r.prompt_tokens else None for r in results]),
        "prompt_tokens": _mean([float(r.prompt_tokens) if r.prompt_tokens else None for r in results]),
        "e2e_s": _mean([e2e(r) for r in results]),
    }


def progress_line(point: str, depth: int, values: Sequence[float], metric: str = "tps") -> str:
    """One line per measured round: point, depth, samples so far, running mean and the interval's width."""
    summary = summarize(values)
    if not summary["n"]:
        return f"{point} depth {depth}: n=0 (no usable sample yet)"
    lo, hi = summary["ci95"]
    width = f"±{(hi - lo) / 2:.2f} ({summary['ci95_pct']:.1f}%)" if summary["ci95_pct"] is not None else "± –"
    return f"{point} depth {depth}: n={summary['n']} {metric} mean {summary['mean']:.2f} {width}"


def with_percentiles(metrics: dict[str, dict[str, Any]], dist: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Add p50/p90/p95/p99 of the observations to the summaries of the sample means they belong to."""
    for name, observations in dist.items():
        if name in metrics:
            metrics[name].update(percentiles(observations))
    return metrics


# ---------------------------------------------------------------- server hygiene

class Hygiene:
    """Idle waits, counter snapshots and the during-sample poller; a no-op when there is no /metrics."""

    def __init__(self, client: BenchClient, cfg: BenchConfig) -> None:
        self.client = client
        self.cfg = cfg
        self.available = False

    async def probe(self) -> bool:
        try:
            status, text = await self.client.get_text("/metrics")
        except Exception:  # noqa: BLE001 - any failure means "no usable /metrics", which is reported
            status, text = 0, ""
        self.available = status == 200 and "vllm:" in text
        return self.available

    async def snapshot(self) -> dict[str, float]:
        if not self.available:
            return {}
        status, text = await self.client.get_text("/metrics")
        return parse_prometheus(text) if status == 200 else {}

    async def wait_idle(self, timeout: Optional[float] = None) -> dict[str, float]:
        """Wait for zero running and waiting requests; Abort after the timeout."""
        if not self.available:
            return {}
        deadline = time.monotonic() + (timeout if timeout is not None else self.cfg.idle_timeout)
        # Right after a sample the engine retires requests within milliseconds: poll fast, then back off
        # to the reference's 2 s so a long wait for foreign work costs no CPU.
        pause = 0.02
        while True:
            snap = await self.snapshot()
            if is_idle(snap):
                return snap
            if time.monotonic() > deadline:
                raise Abort(f"engine not idle after {self.cfg.idle_timeout:g} s (running/waiting requests)")
            await asyncio.sleep(pause)
            pause = min(2.0, pause * 2)

    async def measure(self, work: Callable[[], Awaitable[Any]], sent: int,
                      concurrency: int) -> tuple[Any, dict[str, Any]]:
        """Run work between idle snapshots with a peak poller; return (result, hygiene info)."""
        if not self.available:
            return await work(), {"delta": {}, "foreign": None}
        await self.wait_idle()
        await asyncio.sleep(self.cfg.settle)
        before = await self.snapshot()
        peaks = Peaks()
        poller = asyncio.ensure_future(self._poll(peaks))
        try:
            result = await work()
        finally:
            poller.cancel()
        # Counters settle only once the engine has retired our requests; snapshot after idle.
        after = await self.wait_idle()
        delta = deltas(before, after)
        return result, {"delta": delta, "foreign": foreign_traffic(delta, peaks, sent, concurrency),
                        **peaks.as_dict()}

    async def _poll(self, peaks: Peaks) -> None:
        while True:
            await asyncio.sleep(self.cfg.poll_interval)
            try:
                peaks.observe(await self.snapshot())
            except Exception:  # noqa: BLE001 - a missed poll only loses one peak reading
                continue


class LoopLag:
    """50 ms ticker measuring event-loop lateness (a busy loop delays the requests it starts; the report shows it).
    A timer callback re-arms itself rather than a task sleeping: no task, future or extra loop pass per tick.
    Every tick is a wake-up of its own, ~0.1 ms of CPU on a 2-core box: at 10 ms that was 10 ms of CPU a
    second, a third of a whole one-stream run; the socket reads, whose lateness would bias a stamp, run on
    the client's reader thread, not on this loop."""

    PERIOD = 0.05

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._timer: Optional[asyncio.TimerHandle] = None
        self._due = 0.0

    def start(self) -> None:
        self._arm(asyncio.get_running_loop())

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = time.perf_counter() + self.PERIOD
        self._timer = loop.call_later(self.PERIOD, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lags.append(time.perf_counter() - self._due)
        self._arm(loop)

    def stop(self) -> dict[str, Optional[float]]:
        if self._timer:
            self._timer.cancel()
        if not self.lags:
            return {"loop_lag_p99_ms": None, "loop_lag_max_ms": None}
        ordered = sorted(self.lags)
        return {"loop_lag_p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))],
                "loop_lag_max_ms": 1000 * ordered[-1]}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the runner

class Runner:
    """Runs the configured suites in the reference order and keeps bench.json current."""

    def __init__(self, cfg: BenchConfig, log: Callable[[str], None] = lambda _m: None) -> None:
        self.cfg = cfg
        self.log = log
        self.rng = random.Random(cfg.seed)
        self.out_dir = Path(cfg.output_dir)
        self.report = new_report(cfg.url, cfg.model, _utc(), self._workload())
        self.baseline: Optional[dict[str, Any]] = None
        self.max_model_len: Optional[int] = None
        self.tokens_per_char: dict[str, float] = {}
        self.contexts: dict[int, str] = {}
        self.has_tokenize: Optional[bool] = None
        self.stop_reason: Optional[str] = None
        self.task: Optional["asyncio.Task[Any]"] = None
        self.monitors: Optional[Monitors] = None
        self.client: BenchClient
        self.hygiene: Hygiene

    def _workload(self) -> dict[str, Any]:
        cfg = self.cfg
        return {"suites": cfg.suites, "concurrency": cfg.concurrency, "cases": cfg.cases, "depths": cfg.depths,
                "min_samples": cfg.min_samples, "max_samples": cfg.max_samples, "precision_pct": cfg.precision,
                "tolerance_pct": cfg.tolerance, "seed": cfg.seed, "max_tokens": cfg.max_tokens,
                "prefill_sizes": cfg.prefill_sizes, "prefill_texts": cfg.prefill_texts,
                "prefill_repeats": cfg.prefill_repeats, "prefix_tokens": cfg.prefix_tokens,
                "admission_tokens": cfg.admission_tokens, "needle_tokens": cfg.needle_tokens,
                "reasoning_off_knob": {"chat_template_kwargs": REASONING_OFF}, "prompts_sha256": prompts_sha256(),
                "extra_body": cfg.extra_body, "compliance_prompts_sha256": compliance_sha256(),
                "sampled_prompts_sha256": sampled_sha256(),
                "sampled_requests": cfg.sampled_requests, "sampled_concurrency": cfg.sampled_concurrency}

    # -- bookkeeping
    def save(self) -> None:
        self.report["finished"] = _utc()
        self.report["verdict"] = verdict(self.report)
        write_outputs(self.out_dir, self.report)

    def count_failures(self, results: Sequence[RequestResult]) -> int:
        failed = [r for r in results if not r.ok]
        by_class = self.report["failures_by_class"]
        for r in failed:
            by_class[r.error_class] = by_class.get(r.error_class, 0) + 1
            if len(self.report["errors"]) < 20:
                self.report["errors"].append(f"request failed ({r.error_class}): {r.error}")
        self.report["failed_requests"] += len(failed)
        return len(failed)

    def boundary(self) -> None:
        """A point boundary: stop here (verdict fail, reason "hold: ...") when the hold file has appeared."""
        hold = self.cfg.hold_file
        if hold and Path(hold).exists():
            raise Abort(f"hold: {hold} appeared; stopped at a point boundary")

    def abort(self, reason: str) -> None:
        self.report["aborted"] = reason
        self.log(f"aborted: {reason}")

    async def run(self) -> dict[str, Any]:
        """Run the suites; whatever stops them (abort, signal, unforeseen error), the report is written as a
        fail with the reason, and returned."""
        cpu0, wall0 = _cpu_seconds(), time.perf_counter()
        lag = LoopLag()
        self.task = asyncio.current_task()
        with self._stopped_by_signals():
            try:
                await self._run_suites(lag)
            except Abort as exc:
                self.abort(str(exc))
            except (asyncio.CancelledError, KeyboardInterrupt):
                self.abort(self.stop_reason or "interrupted")
            except Exception as exc:  # noqa: BLE001 - a run that crashed must still end as a reported fail
                self.log(traceback.format_exc())
                self.abort(unexpected(exc))
            finally:
                self.report["client"] = {"cpu_s": _cpu_seconds() - cpu0, "wall_s": time.perf_counter() - wall0,
                                         "host": socket.gethostname(), "python": platform.python_version(),
                                         "read_bytes": READ_BYTES, **lag.stop()}
        self._finish()
        return self.report

    async def _run_suites(self, lag: LoopLag) -> None:
        cfg = self.cfg
        self.baseline = self._load_baseline()
        streams = cfg.concurrency + cfg.sampled_concurrency + [cfg.admission_requests, cfg.compliance_concurrency]
        max_conn = max(streams) + 4
        async with BenchClient(cfg.url, cfg.timeout, cfg.api_key, max_conn) as client:
            self.client, self.hygiene = client, Hygiene(client, cfg)
            lag.start()
            try:
                await self._start_monitors()
                await self._identify()
                self.save()
                for suite in (s for s in SUITE_ORDER if s in cfg.suites):
                    self.boundary()
                    self.log(f"suite {suite}")
                    await getattr(self, f"suite_{suite}")()
                    self.report["completed_suites"].append(suite)
                    self.save()
            finally:
                await self._stop_monitors()

    async def _start_monitors(self) -> None:
        """Every rank's stream, each with a first sample, before the first request; a rank without one aborts."""
        if not self.cfg.monitors:
            return
        specs = [MonitorSpec(**m) for m in self.cfg.monitors]
        self.log("monitors: starting on " + ", ".join(s.node for s in specs))
        self.monitors = Monitors(specs, MonitorLimits(**self.cfg.monitor_limits), self._monitor_halt, self.log)
        reason = await self.monitors.start()
        if reason:
            raise Abort(f"monitor halt: {reason}")

    def _monitor_halt(self, reason: str) -> None:
        """A monitor's rule tripped: cancel the run (in-flight requests too); it ends as a fail with the reason."""
        self._cancel(f"monitor halt: {reason}", self.task)

    async def _stop_monitors(self) -> None:
        if self.monitors is None:
            return
        self.report["monitors"] = await self.monitors.stop()
        warnings = monitor_warnings(self.report["monitors"])
        if warnings:
            self.report.setdefault("warnings", []).extend(warnings)

    def _load_baseline(self) -> Optional[dict[str, Any]]:
        if not self.cfg.compare or self.cfg.compare == "none":
            return None
        try:
            baseline = json.loads(Path(self.cfg.compare).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise Abort(f"baseline {self.cfg.compare}: unreadable ({exc})") from exc
        if not isinstance(baseline, dict):
            raise Abort(f"baseline {self.cfg.compare}: not a bench report")
        return baseline

    @contextlib.contextmanager
    def _stopped_by_signals(self) -> Iterator[None]:
        """While the suites run, a stop signal cancels them so the run ends through the abort path."""
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        installed = []
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self._stop, sig, task)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread: signals belong to whoever runs us there
            installed.append(sig)
        try:
            yield
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
                if previous[sig] is not None:
                    signal.signal(sig, previous[sig])

    def _stop(self, sig: int, task: Optional["asyncio.Task[Any]"]) -> None:
        self._cancel(f"stopped by {signal.Signals(sig).name}", task)

    def _cancel(self, reason: str, task: Optional["asyncio.Task[Any]"]) -> None:
        """Cancel the run once; the first reason is the one the report keeps."""
        if self.stop_reason is None and task is not None:
            self.stop_reason = reason
            task.cancel()

    def _finish(self) -> None:
        if self.baseline is not None:
            self.report["comparison"] = compare(self.report, self.baseline, self.cfg.tolerance, self.cfg.compare,
                                                force=self.cfg.force_compare)
        self.save()
        try:
            from .plots import write_plots

            self.report["plots"] = write_plots(self.out_dir, self.report, self.baseline)
        except ImportError as exc:
            self.report["plots"] = []
            self.report.setdefault("warnings", []).append(f"plots skipped: {exc}")
        self.save()

    async def _identify(self) -> None:
        try:
            status, text = await self.client.get_text("/v1/models")
        except Exception as exc:  # noqa: BLE001 - report the unreachable server as the abort reason
            raise Abort(f"server {self.cfg.url} unreachable: {type(exc).__name__}: {exc}") from exc
        if status != 200:
            raise Abort(f"GET /v1/models answered HTTP {status}")
        models = model_cards(text)
        ids = [m.get("id") for m in models]
        if not self.cfg.model:
            if not ids:
                raise Abort("server lists no models and no model was given")
            self.cfg.model = self.report["model"] = ids[0]
        elif self.cfg.model not in ids:
            raise Abort(f"model {self.cfg.model!r} not served (server has {ids})")
        card = next(m for m in models if m.get("id") == self.cfg.model)
        self.max_model_len = card.get("max_model_len")
        metrics = await self.hygiene.probe()
        self.report["server_metrics"] = metrics
        self.report["identity"] = {"served_models": ids, "max_model_len": self.max_model_len,
                                   "owned_by": card.get("owned_by"), "root": card.get("root"),
                                   "metrics_endpoint": metrics, "planned_points": plan(self.cfg, self.max_model_len),
                                   **self.cfg.identity, "server_version": await self._server_version(),
                                   "sparkfleet_version": self.cfg.sparkfleet_version or __version__}
        if not metrics:
            self.log("server has no /metrics: hygiene checks skipped")

    async def _server_version(self) -> Optional[str]:
        """The server's GET /version (vLLM answers {"version": ...}), or None when it does not answer one."""
        try:
            status, text = await self.client.get_text("/version")
            data = json.loads(text) if status == 200 else None
        except Exception:  # noqa: BLE001 - a server without /version is recorded as such, not an error
            return None
        version = data.get("version") if isinstance(data, dict) else None
        return str(version) if version not in (None, "") else None

    # -- request bodies
    def chat_body(self, prompt: str, max_tokens: int, reasoning: bool, forced: bool,
                  salt: Optional[str] = None, overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.cfg.model, "messages": [{"role": "user", "content": prompt}],
                                "stream": True, "stream_options": {"include_usage": True}, "temperature": 0,
                                "seed": 42, "max_tokens": max_tokens}
        if not reasoning:
            body["chat_template_kwargs"] = REASONING_OFF
        if forced:
            body.update(min_tokens=max_tokens, ignore_eos=True)
        if salt:
            body["cache_salt"] = salt
        body.update(overrides or {})
        return merge_body(body, self.cfg.extra_body)

    def completion_body(self, prompt: str, salt: str, max_tokens: int = 1) -> dict[str, Any]:
        body = {"model": self.cfg.model, "prompt": prompt, "stream": True, "stream_options": {"include_usage": True},
                "temperature": 0, "max_tokens": max_tokens, "cache_salt": salt}
        return merge_body(body, self.cfg.extra_body)

    def salt(self) -> str:
        return f"{self.rng.getrandbits(64):016x}"

    # -- quality gate
    async def suite_quality(self) -> None:
        runs = []
        for _ in range(self.cfg.quality_runs):
            self.boundary()
            res = await self.client.stream("/v1/chat/completions",
                                           self.chat_body(QUALITY_PROMPT, 256, reasoning=False, forced=False),
                                           keep_content=True)
            self.count_failures([res])
            runs.append({"verdict": check_quality(res.content) if res.ok else f"request failed: {res.error}",
                         "content": res.content[:2000], "finish_reason": res.finish_reason})
        passed = sum(r["verdict"] == "pass" for r in runs)
        self.report["suites"]["quality"] = {"runs": runs, "passed": passed, "ok": passed == len(runs)}
        if passed != len(runs):
            self.save()
            raise Abort(f"quality gate {passed}/{len(runs)}: performance numbers would be meaningless")

    # -- compliance (opt-in): structured output, prompt-only then constrained
    async def suite_compliance(self) -> None:
        cfg = self.cfg
        arms: dict[str, Any] = {}
        failed = 0
        for arm in ARMS:
            self.boundary()
            self.log(f"compliance {arm}")
            gate = asyncio.Semaphore(cfg.compliance_concurrency)

            async def ask(record: str, arm: str = arm, gate: asyncio.Semaphore = gate) -> RequestResult:
                extra = {"response_format": response_format(record)} if arm == "constrained" else None
                body = self.chat_body(compliance_prompt(record), cfg.compliance_tokens, reasoning=False,
                                      forced=False, overrides=extra)
                async with gate:
                    return await self.client.stream("/v1/chat/completions", body, keep_content=True)

            records = list(RECORDS)
            results = list(await asyncio.gather(*(ask(r) for r in records)))
            failed += self.count_failures(results)
            answers = []
            for record, res in zip(records, results):
                verdict = score(record, res.content, res.finish_reason) if res.ok else f"request failed: {res.error}"
                self._write_output(f"compliance-{arm}", f"{record}.json", res.content)
                answers.append({"record": record, "verdict": verdict, "finish_reason": res.finish_reason,
                                "completion_tokens": res.completion_tokens})
            arms[arm] = {"passed": sum(a["verdict"] == "pass" for a in answers), "total": len(answers),
                         "answers": answers}
        passed, total = sum(a["passed"] for a in arms.values()), sum(a["total"] for a in arms.values())
        self.report["suites"]["compliance"] = {"arms": arms, "passed": passed, "total": total,
                                               "failed_requests": failed, "ok": passed == total}

    def _write_output(self, folder: str, name: str, content: str) -> None:
        """An answer kept beside the report (outputs/<folder>/<name>) for a reader to inspect."""
        path = self.out_dir / "outputs" / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")

    # -- sampled: realistic sampling (T=1, top_p 0.95), acceptance under it
    async def suite_sampled(self) -> None:
        points = []
        for case, prompt in SAMPLED_CASES.items():
            for conc in self.cfg.sampled_concurrency:
                self.boundary()
                self.log(f"sampled {case}-c{conc}")
                points.append(await self._sampled_point(case, prompt, conc))
        self.report["suites"]["sampled"] = {"points": points,
                                            "failed_requests": sum(p["failed_requests"] for p in points)}

    async def _sampled_point(self, case: str, prompt: str, conc: int) -> dict[str, Any]:
        cfg = self.cfg
        bodies = [self.chat_body(prompt, cfg.max_tokens, reasoning=False, forced=False,
                                 overrides={"temperature": 1.0, "top_p": 0.95, "seed": 1000 + i})
                  for i in range(cfg.sampled_requests)]

        async def work() -> list[RequestResult]:
            gate = asyncio.Semaphore(conc)

            async def one(body: dict[str, Any]) -> RequestResult:
                async with gate:
                    return await self.client.stream("/v1/chat/completions", body)

            return list(await asyncio.gather(*(one(b) for b in bodies)))

        for attempt in range(cfg.max_retries + 1):
            results, info = await self.hygiene.measure(work, len(bodies), conc)
            if not info["foreign"]:
                break
            self.report["discarded_samples"].append({"point": f"sampled/{case}-c{conc}", "reason": info["foreign"]})
            if attempt == cfg.max_retries:
                raise Abort(f"sampled {case}-c{conc}: foreign traffic in {attempt + 1} samples in a row")
        failed = self.count_failures(results)
        ok = [r for r in results if r.ok]
        wall = (max(r.t_end for r in ok) - min(r.t_send for r in ok)) if ok else 0.0
        spec = spec_decode(info["delta"])
        return {"case": case, "concurrency": conc, "requests": len(results), "failed_requests": failed,
                "output_tokens": sum(r.completion_tokens for r in ok),
                "tps": sum(r.completion_tokens for r in ok) / wall if wall > 0 else None,
                "per_stream_tps": _mean([r.decode_tps for r in ok]), "ttft_s": _mean([r.ttft for r in ok]),
                "drafts": spec.get("drafts"), "accepted_per_draft": spec.get("accepted_per_draft"),
                "acceptance_rate": spec.get("accepted_per_verified"), "spec_decode": spec or None}

    # -- decode matrix
    async def suite_decode(self) -> None:
        cfg = self.cfg
        points = decode_points(cfg)
        state = {p: {"values": {}, "attempts": 0, "failed": 0, "discarded": 0, "spec": [], "full_length": 0,
                     "requests": 0, "reasoning_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
                     "dist": {"ttft_s": [], "e2e_s": [], "itl_s": []}} for p in points}
        self.report["suites"]["decode"] = {"points": [], "failed_requests": 0}
        warm = list(points)
        self.rng.shuffle(warm)
        for point in warm:
            self.boundary()
            self.log(f"decode warm-up {decode_label(*point)}")
            await self._decode_sample(point, state[point], keep=False)
        while True:
            pending = [p for p in points if not self._point_done(state[p])]
            if not pending:
                break
            self.rng.shuffle(pending)
            for point in pending:
                self.boundary()
                await self._decode_sample(point, state[point], keep=True)
                self.log(progress_line(f"decode {point[0]}-c{point[1]}", point[2],
                                       state[point]["values"].get("tps", [])))
            self._decode_summary(points, state)
            self.save()
        self._decode_summary(points, state)

    def _point_done(self, st: dict[str, Any]) -> bool:
        cfg = self.cfg
        if st["attempts"] >= cfg.max_samples + cfg.max_retries:
            return True
        return converged(st["values"].get("tps", []), cfg.min_samples, cfg.max_samples, cfg.precision)

    async def _decode_sample(self, point: DecodePoint, st: dict[str, Any], keep: bool) -> None:
        case, conc, depth = point
        prompt, reasoning = DECODE_CASES[case]
        bodies = [await self._decode_body(prompt, reasoning, depth) for _ in range(conc)]
        label = decode_label(case, conc, depth)

        async def work() -> list[RequestResult]:
            return list(await asyncio.gather(*(self.client.stream("/v1/chat/completions", body)
                                               for body in bodies)))

        for attempt in range(self.cfg.max_retries + 1):
            results, info = await self.hygiene.measure(work, conc, conc)
            if not info["foreign"]:
                break
            st["discarded"] += 1
            self.report["discarded_samples"].append({"point": label, "reason": info["foreign"]})
            if attempt == self.cfg.max_retries:
                raise Abort(f"decode {label}: foreign traffic in {attempt + 1} samples in a row")
        # A failed request fails the run even in a warm-up sample; only the numbers of a warm-up are dropped.
        failed = self.count_failures(results)
        st["failed"] += failed
        if not keep:
            return
        st["attempts"] += 1
        st["requests"] += conc
        if failed:
            return
        spec = spec_decode(info["delta"])
        if spec:
            st["spec"].append(spec)
        st["full_length"] += sum(r.completion_tokens == self.cfg.max_tokens for r in results)
        st["reasoning_tokens"] += sum(r.reasoning_tokens for r in results)
        st["completion_tokens"] += sum(r.completion_tokens for r in results)
        st["cached_tokens"] += sum(r.cached_tokens for r in results)
        for name, value in sample_metrics(results, spec).items():
            if value is not None:
                st["values"].setdefault(name, []).append(value)
        for name, values in distributions(results).items():
            st["dist"][name].extend(values)

    def _decode_summary(self, points: Sequence[DecodePoint], state: dict[Any, dict[str, Any]]) -> None:
        out = []
        for case, conc, depth in points:
            st = state[(case, conc, depth)]
            specs = st["spec"]
            out.append({
                "case": case, "concurrency": conc, "depth": depth, "max_tokens": self.cfg.max_tokens,
                "n": len(st["values"].get("tps", [])),
                "cached_prompt_tokens": st["cached_tokens"],
                "failed_requests": st["failed"], "discarded": st["discarded"], "requests": st["requests"],
                "full_length_outputs": st["full_length"],
                "reasoning_share": st["reasoning_tokens"] / st["completion_tokens"] if st["completion_tokens"] else None,
                "metrics": with_percentiles({name: summarize(vals) for name, vals in st["values"].items()},
                                            st["dist"]),
                "spec_decode": {k: _mean([s.get(k) for s in specs]) for k in specs[0]} if specs else None,
            })
        suite = self.report["suites"]["decode"]
        suite["points"] = out
        suite["failed_requests"] = sum(p["failed_requests"] for p in out)

    async def _decode_body(self, prompt: str, reasoning: bool, depth: int) -> dict[str, Any]:
        """A decode request; with depth > 0 a system message of ~depth tokens of prior context comes first (as in
        llama-benchy), opened by a nonce of its own so no stream or sample reuses another's cached prefix."""
        body = self.chat_body(prompt, self.cfg.max_tokens, reasoning, forced=True)
        if depth:
            if depth not in self.contexts:
                self.contexts[depth] = await self.text_for_tokens("filler", depth, depth)
            context = nonce_prefix(self.rng) + self.contexts[depth]
            body["messages"] = [{"role": "system", "content": context}, *body["messages"]]
        return body

    # -- prompt sizing
    async def tokenize(self, text: str) -> Optional[int]:
        """Prompt tokens from /tokenize, or None when the server does not offer it."""
        if self.has_tokenize is False:
            return None
        status, data = await self.client.post_json("/tokenize", {"model": self.cfg.model, "prompt": text})
        self.has_tokenize = status == 200 and isinstance(data, dict) and ("count" in data or "tokens" in data)
        if not self.has_tokenize:
            return None
        return int(data.get("count") or len(data.get("tokens") or []))

    async def count_tokens(self, text: str) -> int:
        """Prompt tokens of a text: /tokenize when served, else a one-token completion's usage."""
        counted = await self.tokenize(text)
        if counted is not None:
            return counted
        res = await self.client.stream("/v1/completions", self.completion_body(text, self.salt()))
        if not res.ok:
            raise Abort(f"cannot size prompts: no /tokenize and the probe failed ({res.error})")
        return res.prompt_tokens

    async def text_for_tokens(self, kind: str, tokens: int, seed: int) -> str:
        """A text of about `tokens` tokens: a chars-per-token ratio measured once per text kind, then one
        correction through /tokenize when served (real text varies in density from file to file)."""
        if kind not in self.tokens_per_char:
            sample = text_of_chars(kind, 8000, self.cfg.seed)
            self.tokens_per_char[kind] = await self.count_tokens(sample) / len(sample)
            self.report.setdefault("identity", {})[f"tokens_per_char_{kind}"] = self.tokens_per_char[kind]
        chars = int(tokens / self.tokens_per_char[kind])
        text = text_of_chars(kind, chars, seed)
        counted = await self.tokenize(text)
        if counted and abs(counted - tokens) > 0.01 * tokens:
            text = text_of_chars(kind, int(chars * tokens / counted), seed)
        return text

    # -- cold prefill
    async def suite_prefill(self) -> None:
        cfg = self.cfg
        sizes = prefill_sizes(cfg, self.max_model_len)
        keys = [(t, s) for t in cfg.prefill_texts for s in sizes]
        samples: dict[tuple[str, int], dict[str, Any]] = {k: {"ttft_s": [], "prefill_tps": [], "prompt_tokens": [],
                                                              "failed": 0, "discarded": 0} for k in keys}
        order = [k for k in keys for _ in range(cfg.prefill_repeats)]
        self.rng.shuffle(order)
        self.report["suites"]["prefill"] = {"points": [], "failed_requests": 0}
        for text, size in order:
            self.boundary()
            self.log(f"prefill {text}-{size}")
            await self._prefill_sample(text, size, samples[(text, size)])
        points = [{"text": t, "size": s, "n": len(samples[(t, s)]["ttft_s"]), "failed_requests": samples[(t, s)]["failed"],
                   "discarded": samples[(t, s)]["discarded"],
                   "metrics": with_percentiles(
                       {m: summarize(samples[(t, s)][m]) for m in ("ttft_s", "prefill_tps", "prompt_tokens")},
                       {"ttft_s": samples[(t, s)]["ttft_s"]})}
                  for t, s in keys]
        self.report["suites"]["prefill"] = {"points": points,
                                            "failed_requests": sum(p["failed_requests"] for p in points)}

    async def _prefill_sample(self, text: str, size: int, acc: dict[str, Any]) -> None:
        for _ in range(self.cfg.max_retries + 1):
            body_text = await self.text_for_tokens(text, int(0.97 * size), self.rng.randrange(1 << 30))
            prompt = nonce_prefix(self.rng) + body_text + PREFILL_TAIL
            body = self.completion_body(prompt, self.salt())

            async def work() -> RequestResult:
                return await self.client.stream("/v1/completions", body)

            res, info = await self.hygiene.measure(work, 1, 1)
            if self.count_failures([res]):
                acc["failed"] += 1
                return
            reason = info["foreign"] or (f"{res.cached_tokens} cached prompt tokens" if res.cached_tokens else None)
            if reason is None and info["delta"].get("prefix_cache_hits_total"):
                reason = "prefix cache hits during a cold sample"
            if reason is None and res.ttft:
                acc["ttft_s"].append(res.ttft)
                acc["prompt_tokens"].append(float(res.prompt_tokens))
                acc["prefill_tps"].append(res.prompt_tokens / res.ttft)
                return
            acc["discarded"] += 1
            self.report["discarded_samples"].append({"point": f"prefill/{text}-{size}", "reason": reason})
        raise Abort(f"prefill {text}-{size}: {self.cfg.max_retries + 1} samples in a row were not cold")

    # -- prefix replay
    async def suite_prefix(self) -> None:
        cfg = self.cfg
        tokens = min(cfg.prefix_tokens, (self.max_model_len or cfg.prefix_tokens + 128) - 128)
        cold, warm, hits, runs = [], [], [], []
        for i in range(cfg.prefix_runs):
            self.boundary()
            prompt = nonce_prefix(self.rng) + await self.text_for_tokens("filler", int(0.97 * tokens), i) + PREFILL_TAIL
            salt = self.salt()
            run: dict[str, Any] = {"requests": []}
            for replay in range(3):
                async def work() -> RequestResult:
                    return await self.client.stream("/v1/completions", self.completion_body(prompt, salt))

                res, info = await self.hygiene.measure(work, 1, 1)
                self.count_failures([res])
                rate = prefix_hit_rate(info["delta"])
                run["requests"].append({"ttft_s": res.ttft, "cached_tokens": res.cached_tokens,
                                        "prompt_tokens": res.prompt_tokens, "hit_rate": rate, "ok": res.ok})
                if res.ok and res.ttft:
                    (cold if replay == 0 else warm).append(res.ttft)
                    if replay:
                        hits.append(rate if rate is not None else res.cached_tokens / max(1, res.prompt_tokens))
            runs.append(run)
        failed = sum(not r["ok"] for run in runs for r in run["requests"])
        self.report["suites"]["prefix"] = {
            "prompt_tokens": tokens, "runs": runs, "failed_requests": failed,
            "metrics": {"cold_ttft_s": summarize(cold), "warm_ttft_s": summarize(warm)},
            "warm_hit_rate": _mean(hits)}

    # -- admission (long contexts side by side)
    async def suite_admission(self) -> None:
        cfg = self.cfg
        room = (self.max_model_len or cfg.admission_tokens + cfg.max_tokens + 1024) - cfg.max_tokens - 1024
        context = int(0.97 * min(cfg.admission_tokens, room))
        prompts = [nonce_prefix(self.rng) + await self.text_for_tokens("filler", context, i) + ADMISSION_TAIL
                   for i in range(cfg.admission_requests)]
        bodies = [self.chat_body(p, cfg.max_tokens, reasoning=False, forced=False, salt=self.salt()) for p in prompts]

        async def work() -> list[RequestResult]:
            return list(await asyncio.gather(*(self.client.stream("/v1/chat/completions", b) for b in bodies)))

        results, info = await self.hygiene.measure(work, len(bodies), len(bodies))
        failed = self.count_failures(results)
        preemptions = info["delta"].get("num_preemptions_total")
        peak = info.get("peak_running")
        checks = [failed == 0]
        if self.hygiene.available:
            checks += [not preemptions, peak is None or peak >= len(bodies)]
        self.report["suites"]["admission"] = {
            "requests": len(bodies), "context_tokens": context, "ok_requests": len(bodies) - failed,
            "failed_requests": failed, "preemptions": preemptions, "peak_running": peak,
            "peak_kv_usage": info.get("peak_kv_usage"), "prompt_tokens": [r.prompt_tokens for r in results],
            "metrics_checked": self.hygiene.available, "ok": all(checks)}

    # -- needle in a haystack
    async def suite_needle(self) -> None:
        cfg = self.cfg
        target = min(cfg.needle_tokens, (self.max_model_len or cfg.needle_tokens + 64) - 64)
        runs = []
        for depth in cfg.needle_depths:
            self.boundary()
            prompt, sized = await self._needle_prompt(target, depth)
            res = await self.client.stream("/v1/chat/completions",
                                           self.chat_body(prompt, 32, reasoning=False, forced=False, salt=self.salt()),
                                           keep_content=True)
            self.count_failures([res])
            found = NEEDLE_PHRASE.format(depth=depth) in res.content
            in_window = target - 1024 - 64 < res.prompt_tokens <= target + 64
            runs.append({"depth_pct": depth, "target_tokens": target, "sized_tokens": sized,
                         "prompt_tokens": res.prompt_tokens, "found": found, "answer": res.content[:200],
                         "ok": res.ok, "passed": res.ok and found and in_window})
        self.report["suites"]["needle"] = {"runs": runs, "failed_requests": sum(not r["ok"] for r in runs),
                                           "ok": all(r["passed"] for r in runs)}

    async def _needle_prompt(self, target: int, depth: int) -> tuple[str, int]:
        """Narrow the haystack until the prompt is within 1,024 tokens under the target."""
        goal = target - 512
        chars = int(goal / (self.tokens_per_char.get("source") or 0.27))
        count = 0
        prompt = ""
        for _ in range(8):
            prompt = needle_haystack(text_of_chars("source", chars, self.cfg.seed + depth), depth) + NEEDLE_QUESTION
            count = await self.count_tokens(prompt)
            if target - 1024 < count <= target:
                break
            chars = int(chars * goal / max(1, count))
        return prompt, count


def run_bench(cfg: BenchConfig, log: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Synchronous entry point for the module and the CLI."""
    return asyncio.run(Runner(cfg, log).run())
