"""sparkfleet-bench: the spark_bench module's benchmark, by hand (same options as the playbook variables,
without the `spark_bench_` prefix). Needs only the standard library, plots
included. Installed as the `sparkfleet-bench` command (bench/pyproject.toml); also `python -m sparkfleet_bench`.

Exit status: 0 pass, 1 fail (abort, failed request, failed or unfinished suite, unforeseen error, stopped by
SIGINT or SIGTERM; the report is written either way), 3 regression, 2 bad options.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .client import API_KEY_ENV, read_api_key
from .suites import (
    BenchConfig, plan, run_bench, validate)
from . import __version__

EXIT = {"pass": 0, "fail": 1, "regression": 3}
_LIST_SEPARATORS = re.compile(r"[\s,\[\]]+")


def split_list(words: Sequence[str]) -> list[str]:
    """`1,2,4`, `1 2 4` (several arguments or one quoted), `[1, 2, 4]` -> ['1', '2', '4']."""
    return [item for word in words for item in _LIST_SEPARATORS.split(word) if item]


class _ListAction(argparse.Action):
    """A list option: takes one or more words and splits them on commas and spaces."""

    def __init__(self, option_strings: list[str], dest: str, convert: Callable[[str], Any] = str,
                 **kwargs: Any) -> None:
        self.convert = convert
        super().__init__(option_strings, dest, nargs="+", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        try:
            setattr(namespace, self.dest, [self.convert(item) for item in split_list(values)])
        except ValueError:
            parser.error(f"{option_string}: expected a list of {self.convert.__name__} values, got {' '.join(values)!r}")


class _RefuseKeyOnArgv(argparse.Action):
    """--api-key: refused without echoing the value (argv is visible to every user in ps)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs="?", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        parser.error(f"{option_string} is refused: a key on the command line is visible to every user of the host; "
                     f"set {API_KEY_ENV} or pass --api-key-file")


def json_object(text: str) -> dict[str, Any]:
    """--extra-body: a JSON object, else a clear error."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object ({{...}}), got a JSON {type(value).__name__}")
    return value


class _IdentityAction(argparse.Action):
    """--identity KEY=VALUE, repeatable; image_labels takes a JSON object."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        key, sep, value = str(values).partition("=")
        if not sep or not key:
            parser.error(f"{option_string}: expected KEY=VALUE, got {values!r}")
        identity = dict(getattr(namespace, self.dest) or {})
        if key == "image_labels":
            try:
                identity[key] = json.loads(value)
            except ValueError:
                parser.error(f"{option_string}: image_labels must be a JSON object")
        else:
            identity[key] = value
        setattr(namespace, self.dest, identity)


def build_parser() -> argparse.ArgumentParser:
    """Every option of the CLI, each with its help text (a test walks them)."""
    d = BenchConfig(url="", output_dir="")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    p = argparse.ArgumentParser(prog="sparkfleet-bench", description=__doc__, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"sparkfleet-bench {__version__}",
                   help="print sparkfleet's version (the collection's galaxy.yml) and exit")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://10.0.1.71:8000")
    p.add_argument("--model", default="", help="served model name (default: the first listed)")
    p.add_argument("--output-dir", default=f"bench-{stamp}", help="report directory (default bench-<UTC>)")
    lists = (("--suites", str, d.suites, "suites to run"), ("--concurrency", int, d.concurrency, "decode stream counts"),
             ("--cases", str, d.cases, "decode cases"),
             ("--depths", int, d.depths, "tokens of prior context before every decode point (llama-benchy --depth)"),
             ("--prefill-sizes", int, d.prefill_sizes, "cold prefill prompt sizes, tokens"),
             ("--prefill-texts", str, d.prefill_texts, "prefill texts (filler, source)"))
    for flag, convert, default, text in lists:
        shown = ",".join(str(v) for v in default)
        p.add_argument(flag, action=_ListAction, convert=convert, default=default, metavar="LIST",
                       help=f"{text}: 1,2,4 or 1 2 4 (default {shown})")
    p.add_argument("--min-samples", type=int, default=d.min_samples,
                   help=f"samples per point before it may stop (default {d.min_samples}, >= 2)")
    p.add_argument("--max-samples", type=int, default=d.max_samples,
                   help=f"samples per point at most (default {d.max_samples})")
    p.add_argument("--precision", type=float, default=d.precision,
                   help=f"CI half-width %% of the mean to stop at (default {d.precision:g})")
    p.add_argument("--tolerance", type=float, default=d.tolerance,
                   help=f"regression threshold %% against the baseline (default {d.tolerance:g})")
    p.add_argument("--compare", default="", help="baseline bench.json to compare with, or none")
    p.add_argument("--force-compare", action="store_true",
                   help="compare even with a baseline of another identity or point set (they become warnings)")
    p.add_argument("--identity", action=_IdentityAction, default={}, metavar="KEY=VALUE",
                   help="what is measured, recorded in the report and gated by --compare (repeat): image_id, "
                        "image_labels (JSON), serve_profile, serve_profile_sha256, kernel, driver")
    p.add_argument("--seed", type=int, default=d.seed, help=f"seed of sample order and nonces (default {d.seed})")
    p.add_argument("--timeout", type=float, default=d.timeout,
                   help=f"per-request timeout, seconds (default {d.timeout:g}, positive)")
    p.add_argument("--max-tokens", type=int, default=d.max_tokens,
                   help=f"output tokens per decode request, forced (default {d.max_tokens})")
    p.add_argument("--prefill-repeats", type=int, default=d.prefill_repeats,
                   help=f"samples per prefill point (default {d.prefill_repeats})")
    p.add_argument("--prefix-tokens", type=int, default=d.prefix_tokens,
                   help=f"prompt tokens of the prefix replay suite (default {d.prefix_tokens})")
    p.add_argument("--admission-tokens", type=int, default=d.admission_tokens,
                   help=f"context tokens of each admission request (default {d.admission_tokens})")
    p.add_argument("--needle-tokens", type=int, default=d.needle_tokens,
                   help=f"target prompt tokens of the needle suite (default {d.needle_tokens})")
    p.add_argument("--idle-timeout", type=float, default=d.idle_timeout,
                   help=f"seconds to wait for an idle engine before a sample (default {d.idle_timeout:g})")
    p.add_argument("--poll-interval", type=float, default=d.poll_interval,
                   help=f"seconds between /metrics polls during a sample (default {d.poll_interval:g})")
    p.add_argument("--extra-body", type=json_object, default={}, metavar="JSON",
                   help='JSON object merged into every request body, e.g. \'{"top_k": 1}\'')
    p.add_argument("--api-key-file", default="",
                   help=f"file holding the bearer token (default: ${API_KEY_ENV} when set)")
    p.add_argument("--api-key", action=_RefuseKeyOnArgv, metavar="KEY",
                   help=f"refused (argv is public): use ${API_KEY_ENV} or --api-key-file")
    p.add_argument("--hold-file", default="",
                   help="stop at the next point boundary (verdict fail, reason hold) once this file exists")
    p.add_argument("--check", action="store_true", help="print the planned points, send nothing")
    return p


def parse(argv: Optional[Sequence[str]], environ: Optional[dict[str, str]] = None) -> tuple[BenchConfig, bool]:
    parser = build_parser()
    a = vars(parser.parse_args(argv))
    a.pop("api_key", None)
    check = a.pop("check")
    key_file = a.pop("api_key_file")
    try:
        a["api_key"] = read_api_key(key_file, os.environ if environ is None else environ)
    except ValueError as exc:
        parser.error(str(exc))
    return BenchConfig(**a), check


def main(argv: Optional[Sequence[str]] = None) -> int:
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
    sys.exit(main())
