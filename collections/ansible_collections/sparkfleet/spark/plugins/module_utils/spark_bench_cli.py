"""sparkfleet-bench: the spark_bench module's benchmark, by hand (same options as the playbook variables,
without the `spark_bench_` prefix). Needs only the standard library; with matplotlib (the repo's .venv)
it also draws plots. Run as `python -m ansible_collections.sparkfleet.spark.plugins.module_utils.spark_bench_cli`
with the collections directory on PYTHONPATH (what bin/sparkfleet-bench does).

Exit status: 0 pass, 1 fail (abort, failed request, failed or unfinished suite, unforeseen error, stopped by
SIGINT or SIGTERM; the report is written either way), 3 regression, 2 bad options.
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_bench_suites import (
    BenchConfig, plan, run_bench, validate)

EXIT = {"pass": 0, "fail": 1, "regression": 3}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.replace("[", "").replace("]", "").split(",") if x.strip()]


def _strs(text: str) -> list[str]:
    return [x.strip() for x in text.replace("[", "").replace("]", "").split(",") if x.strip()]


def parse(argv: list[str]) -> tuple[BenchConfig, bool]:
    d = BenchConfig(url="", output_dir="")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    p = argparse.ArgumentParser(prog="sparkfleet-bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="server base URL, e.g. http://10.0.1.71:8000")
    p.add_argument("--model", default="", help="served model name (default: the first listed)")
    p.add_argument("--output-dir", default=f"bench-{stamp}", help="report directory (default bench-<UTC>)")
    p.add_argument("--suites", type=_strs, default=d.suites, help="comma list (default quality,decode)")
    p.add_argument("--concurrency", type=_ints, default=d.concurrency, help="comma list (default 1,2,4,8)")
    p.add_argument("--cases", type=_strs, default=d.cases, help="comma list (default prose,code)")
    p.add_argument("--min-samples", type=int, default=d.min_samples)
    p.add_argument("--max-samples", type=int, default=d.max_samples)
    p.add_argument("--precision", type=float, default=d.precision, help="CI half-width %% to stop at")
    p.add_argument("--tolerance", type=float, default=d.tolerance, help="regression threshold %%")
    p.add_argument("--compare", default="", help="baseline bench.json, or none")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--timeout", type=float, default=d.timeout, help="per-request timeout, s")
    p.add_argument("--max-tokens", type=int, default=d.max_tokens)
    p.add_argument("--prefill-sizes", type=_ints, default=d.prefill_sizes)
    p.add_argument("--prefill-texts", type=_strs, default=d.prefill_texts)
    p.add_argument("--prefill-repeats", type=int, default=d.prefill_repeats)
    p.add_argument("--prefix-tokens", type=int, default=d.prefix_tokens)
    p.add_argument("--admission-tokens", type=int, default=d.admission_tokens)
    p.add_argument("--needle-tokens", type=int, default=d.needle_tokens)
    p.add_argument("--idle-timeout", type=float, default=d.idle_timeout)
    p.add_argument("--poll-interval", type=float, default=d.poll_interval)
    p.add_argument("--api-key-file", default="", help="file holding a bearer token (kept out of argv)")
    p.add_argument("--check", action="store_true", help="print the planned points, send nothing")
    a = vars(p.parse_args(argv))
    check = a.pop("check")
    key_file = a.pop("api_key_file")
    a["api_key"] = Path(key_file).read_text(encoding="utf-8").strip() if key_file else None
    return BenchConfig(**a), check


def main(argv: list[str]) -> int:
    cfg, check = parse(argv)
    problems = validate(cfg)
    if problems:
        for problem in problems:
            print(f"sparkfleet-bench: {problem}", file=sys.stderr)
        return 2
    if check:
        print("\n".join(plan(cfg)))
        return 0
    report = run_bench(cfg, log=lambda m: print(f"[bench] {m}", file=sys.stderr, flush=True))
    print((Path(cfg.output_dir) / "summary.md").read_text(encoding="utf-8"))
    print(f"report: {Path(cfg.output_dir) / 'bench.json'}  verdict: {report['verdict']}")
    return EXIT.get(report["verdict"], 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
