#!/usr/bin/python
"""Ansible module: benchmark an OpenAI-compatible endpoint and write bench.json, summary.md, points.csv, plots."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_bench
short_description: Benchmark an OpenAI-compatible inference endpoint (quality gate, decode, prefill, ...)
description:
  - Runs the sparkfleet benchmark suites against O(url) from the machine the module runs on (the
    controller in C(playbooks/bench.yml)) with one asyncio client, and writes C(bench.json) (schema
    C(sparkfleet-bench/1)), C(summary.md), C(points.csv) and PNG plots into O(output_dir).
  - C(bench.json) is rewritten after every suite, so an aborted run keeps its partial results.
  - A run that does not complete its suites (an abort, an unforeseen error, SIGINT or SIGTERM) returns
    RV(verdict) C(fail) with the reason in RV(aborted); C(completed_suites) in C(bench.json) lists the
    suites that ran to their end.
  - The module does not fail on a failed or regressed benchmark; it returns O(verdict) so the caller can
    show the summary first and then fail (the playbook does).
  - In check mode no request is sent; the planned points are returned.
version_added: "1.0.0"
author: sparkfleet
options:
  url:
    description: Base URL of the server (with or without C(/v1)).
    type: str
    required: true
  model:
    description: Served model name; empty takes the first model the server lists.
    type: str
    default: ""
  output_dir:
    description: Directory for the report files (created).
    type: path
    required: true
  suites:
    description:
      - Suites to run (at least one), in the fixed order quality, compliance, decode, sampled, prefill, prefix,
        admission, needle. C(full) names the reference's full run (quality, decode, sampled, prefill, prefix,
        admission); compliance and needle run only when named.
    type: list
    elements: str
    default: [quality, decode]
  concurrency:
    description: Stream counts of the decode matrix.
    type: list
    elements: int
    default: [1, 2, 4, 8]
  depths:
    description:
      - Tokens of prior context before every decode point (like llama-benchy's C(--depth)); every decode
        point runs at each depth. 0 is no context; with depth D each stream's request opens with a system
        message of about D tokens of filler that starts with a nonce of its own, so nothing is prefix-cached.
      - Each point carries C(depth); summary.md adds prefill and decode tok/s per depth and concurrency in
        llama-benchy's layout.
    type: list
    elements: int
    default: [0]
  cases:
    description: Decode cases (prose, code, json and their C(-nothink) variants).
    type: list
    elements: str
    default: [prose, code]
  min_samples:
    description: Samples per point before the convergence rule may stop it (>= 2).
    type: int
    default: 3
  max_samples:
    description: Samples per point at most.
    type: int
    default: 4
  precision:
    description: Convergence target, half-width of the 95% interval in % of the mean.
    type: float
    default: 2.0
  tolerance:
    description: A significant slowdown larger than this % is a regression.
    type: float
    default: 3.0
  compare:
    description: Path of a baseline C(bench.json) to compare with; empty or C(none) skips the comparison.
    type: str
    default: ""
  force_compare:
    description:
      - Compare even with a baseline of another identity (image ID, serve profile name or hash, kernel, driver,
        server version) or another point set; the differences become warnings. Without it such a baseline is
        refused and the verdict is C(fail).
    type: bool
    default: false
  identity:
    description:
      - What is measured, recorded in C(bench.json) C(identity) and gated by O(compare). Keys C(image_id),
        C(image_labels) (a mapping), C(serve_profile), C(serve_profile_sha256), C(kernel), C(driver); unknown
        keys are refused. The run adds C(server_version) (the server's C(/version)) and C(sparkfleet_version).
    type: dict
    default: {}
  sparkfleet_version:
    description:
      - sparkfleet's version for the report; empty takes the bench package's own (C(sparkfleet_bench.__version__),
        which a unit test holds equal to the collection's galaxy.yml). The playbook passes
        C(lookup('sparkfleet.spark.spark_version')), read from the collection's metadata.
    type: str
    default: ""
  seed:
    description: Seed for sample order and prompt nonces.
    type: int
    default: 0
  timeout:
    description: Per-request timeout in seconds (positive).
    type: float
    default: 1800
  max_tokens:
    description: Output tokens per decode request (forced with min_tokens and ignore_eos).
    type: int
    default: 256
  prefill_sizes:
    description: Cold prefill prompt sizes in tokens (sizes >= max_model_len - 64 are dropped).
    type: list
    elements: int
    default: [2048, 32768, 65536, 131072]
  prefill_texts:
    description: Prefill texts, C(filler) and/or C(source) (real text from the Python standard library).
    type: list
    elements: str
    default: [filler, source]
  prefill_repeats:
    description: Samples per prefill point.
    type: int
    default: 3
  prefix_tokens:
    description: Prompt size of the prefix replay suite.
    type: int
    default: 32768
  admission_tokens:
    description: Context tokens of each of the concurrent admission requests.
    type: int
    default: 65536
  needle_tokens:
    description: Target prompt size of the needle suite (clipped to max_model_len - 64).
    type: int
    default: 520000
  idle_timeout:
    description: Seconds to wait for an idle engine before a sample.
    type: float
    default: 300
  poll_interval:
    description: Seconds between C(/metrics) polls during a sample.
    type: float
    default: 1.0
  api_key_file:
    description:
      - File on the machine the module runs on holding the bearer token for the server, if it needs one.
      - Empty reads the token from the environment variable C(OPENAI_API_KEY) when that is set. There is no
        option taking the key itself, so it never appears in task arguments or logs.
    type: path
    default: ""
  extra_body:
    description:
      - "JSON object merged into every request body (nested objects key by key), for server-specific fields
        such as C({\"top_k\": 1}) or C({\"chat_template_kwargs\": {\"enable_thinking\": false}})."
      - C(model), C(messages), C(prompt) and C(stream) are the bench's own and are refused.
    type: dict
    default: {}
  progress_log:
    description:
      - File the run appends one line to per step it takes (suite, warm-up, each measured round with its point,
        depth, sample count, running mean and interval width), so a play that runs the module in the background
        can print them while it runs (spark_job_progress). Empty writes none.
    type: path
    default: ""
  monitors:
    description:
      - One stream per rank that samples it every second while the run lasts (bench method reference 1.6) --
        MemAvailable and swap, the hottest thermal zone and, every I(monitor_limits.gpu_interval_s), the GPU as
        C(nvidia-smi) reports it. The sampler is sent over the stream to the rank's C(python3) and ends with it;
        nothing is installed on the rank.
      - "The run halts (in-flight requests cancelled, the partial report written, verdict C(fail) with the reason)
        when a rank's MemAvailable falls below its floor, a GPU passes I(monitor_limits.gpu_temp_c) or comes within
        I(monitor_limits.gpu_headroom_c) of its slowdown temperature, a thermal zone passes
        I(monitor_limits.zone_c), a rank is silent for I(monitor_limits.silence_s), its stream ends, or a GPU that
        is required cannot be read. A busy GPU held below I(monitor_limits.latch_mhz) (the clock latch) is
        flagged; any thermal slowdown fails the run (its figures are not comparable)."
      - bench.json keeps per rank the extremes, the flags and a timeline (one sample per
        I(monitor_limits.timeline_s)). Empty runs unmonitored, and the report says so.
    type: list
    elements: dict
    default: []
    suboptions:
      node:
        description: The rank's name in the report.
        type: str
        required: true
      argv:
        description: The command that reaches the rank, e.g. C([ssh, -o, BatchMode=yes, admin@dgx1]) or
          C([docker, exec, -i, dgx1]); empty runs the sampler on this machine.
        type: list
        elements: str
        default: []
      remote_shell:
        description: The rank's command is passed as one shell word (ssh joins its arguments for a remote shell).
        type: bool
        default: false
      memory_floor_gib:
        description: MemAvailable below which the run halts (the steady memory guard plus a margin).
        type: float
        default: 4.0
      gpu_required:
        description: A GPU that cannot be read halts the run (device policy C(require)); false records why.
        type: bool
        default: true
      python:
        description: The rank's Python 3 interpreter.
        type: str
        default: python3
  monitor_limits:
    description:
      - "Limits and rates of the monitors, each a positive number: C(gpu_temp_c) (90), C(gpu_headroom_c) (5),
        C(zone_c) (98), C(silence_s) (15), C(latch_mhz) (1000), C(latch_util_pct) (50), C(interval_s) (1),
        C(gpu_interval_s) (15), C(timeline_s) (10)."
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: No request is sent; the planned points are returned.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Quick benchmark of the head's endpoint
  sparkfleet.spark.spark_bench:
    url: http://10.0.1.71:8000
    model: deepseek-v4.1-flash
    output_dir: /srv/bench/20261129T120000Z
    compare: /srv/bench/baseline.json
  register: bench
"""

RETURN = r"""
verdict:
  description: pass, fail or regression.
  returned: success
  type: str
bench_json:
  description: Path of bench.json.
  returned: success, not in check mode
  type: str
summary:
  description: Contents of summary.md.
  returned: success, not in check mode
  type: str
failed_requests:
  description: Requests that failed (any class).
  returned: success, not in check mode
  type: int
monitors:
  description: Per rank what the monitors sampled (extremes, flags, timeline), the limits, and the halt reason.
  returned: success, not in check mode, when monitors were given
  type: dict
aborted:
  description: Why the run stopped early, or null.
  returned: success, not in check mode
  type: str
planned_points:
  description: Points the run measures (from the configuration alone in check mode).
  returned: always
  type: list
  elements: str
files:
  description: Paths of the written reports and plots.
  returned: success, not in check mode
  type: dict
"""

import os  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench.client import read_api_key  # noqa: E402
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_bench_options import argument_spec  # noqa: E402
from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench.suites import (  # noqa: E402
    BenchConfig, plan, run_bench, validate)

# The defaults are the bench library's (BenchConfig, MonitorSpec), declared once; DOCUMENTATION repeats them for
# ansible-doc, and a unit test holds the two equal.
ARGS: dict[str, Any] = argument_spec()


def run_logged(cfg: BenchConfig, progress_log: str) -> dict[str, Any]:
    """run_bench, appending each step's line to `progress_log` (line-buffered, so a reader sees it at once)."""
    if not progress_log:
        return run_bench(cfg)
    Path(progress_log).parent.mkdir(parents=True, exist_ok=True)
    with open(progress_log, "a", encoding="utf-8", buffering=1) as handle:
        return run_bench(cfg, lambda line: handle.write(line.rstrip("\n") + "\n"))


def _number(value: Any) -> Any:
    """A limit given as a string (-e, templating) as its number; anything else as given, for validate to name."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _monitors_brief(monitors: Any) -> Any:
    """The report's monitors without the timelines (those stay in bench.json)."""
    if not monitors:
        return monitors
    nodes = {n: {k: v for k, v in rec.items() if k != "timeline"} for n, rec in monitors["nodes"].items()}
    return {**monitors, "nodes": nodes}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGS, supports_check_mode=True)
    params = {k: v for k, v in module.params.items()}
    progress_log = params.pop("progress_log")
    params["monitor_limits"] = {k: _number(v) for k, v in params["monitor_limits"].items()}
    try:
        params["api_key"] = read_api_key(params.pop("api_key_file"), os.environ)
    except ValueError as exc:
        module.fail_json(msg=f"spark_bench: {exc}")
    cfg = BenchConfig(**params)
    problems = validate(cfg)
    if problems:
        module.fail_json(msg="spark_bench: invalid options: " + "; ".join(problems), problems=problems)
    if module.check_mode:
        module.exit_json(changed=False, verdict=None, planned_points=plan(cfg))
    report = run_logged(cfg, progress_log)
    out = Path(cfg.output_dir)
    module.exit_json(
        changed=True, verdict=report["verdict"], failed_requests=report["failed_requests"],
        aborted=report["aborted"], monitors=_monitors_brief(report.get("monitors")), planned_points=report["identity"].get("planned_points", plan(cfg)),
        bench_json=str(out / "bench.json"), summary=(out / "summary.md").read_text(encoding="utf-8"),
        files={"bench_json": str(out / "bench.json"), "summary": str(out / "summary.md"),
               "csv": str(out / "points.csv"), "plots": report.get("plots", [])})


if __name__ == "__main__":
    main()
