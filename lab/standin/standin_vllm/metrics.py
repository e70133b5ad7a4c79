"""Prometheus text exposition of the engine's counters, with vLLM's metric names and model_name label."""
from __future__ import annotations

from typing import List

from .engine import Engine, Histogram

COUNTERS = (
    ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "prompt_tokens"),
    ("vllm:generation_tokens_total", "Number of generation tokens processed.", "generation_tokens"),
    ("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
     "prefix_queries"),
    ("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", "prefix_hits"),
    ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", "spec_drafts"),
    ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "spec_draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", "spec_accepted"),
    ("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", "preemptions"),
)
GAUGES = (
    ("vllm:num_requests_running", "Number of requests in model execution batches.", "num_requests_running"),
    ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "num_requests_waiting"),
    ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_cache_usage_perc"),
)
HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
    ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", "queue"),
)


def fmt(value: float) -> str:
    """Prometheus number formatting (floats always carry a decimal point)."""
    return repr(float(value))


def histogram_lines(name: str, label: str, hist: Histogram) -> List[str]:
    counts = hist.counts or [0] * len(hist.buckets)
    lines = [f'{name}_bucket{{{label},le="{fmt(b)}"}} {fmt(c)}' for b, c in zip(hist.buckets, counts)]
    lines.append(f'{name}_bucket{{{label},le="+Inf"}} {fmt(hist.n)}')
    lines.append(f"{name}_count{{{label}}} {fmt(hist.n)}")
    lines.append(f"{name}_sum{{{label}}} {fmt(hist.total)}")
    return lines


def render(engine: Engine) -> str:
    """The whole /metrics body."""
    label = f'engine="0",model_name="{engine.cfg.served_names[0]}"'
    lines: List[str] = []
    gauges = engine.gauges()
    for name, help_text, key in GAUGES:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{label}}} {fmt(gauges[key])}"]
    c = engine.counters
    lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
              "# TYPE vllm:request_success_total counter"]
    lines += [f'vllm:request_success_total{{{label},finished_reason="{r}"}} {fmt(n)}' for r, n in c.success.items()]
    for name, help_text, attr in COUNTERS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter",
                  f"{name}{{{label}}} {fmt(getattr(c, attr))}"]
    for name, help_text, attr in HISTOGRAMS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        lines += histogram_lines(name, label, getattr(c, attr))
    return "\n".join(lines) + "\n"
