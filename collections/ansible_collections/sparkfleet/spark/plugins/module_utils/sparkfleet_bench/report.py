"""The bench report contract (`bench.json`, schema sparkfleet-bench/1): writing, verdict, comparison, tables.

Everything here is pure except `write_json_atomic`/`write_outputs`, which only write files. Other tools
read `bench.json`, so the shape is fixed by the schema string; change it only with a new schema version.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Optional

from .stats import is_regression, welch, direction
from .monitor import monitor_reasons

SCHEMA = "sparkfleet-bench/1"
# metric -> higher is better; only these take part in the regression rule (the reference gates on
# throughput, prefill rate and step time; latency figures swing with queueing and stay informational).
GATED = {"tps": True, "decode_window_tps": True, "step_ms": False, "prefill_tps": True}
DECODE_METRICS = ("tps", "decode_window_tps", "per_stream_tps", "ttft_s", "ttfat_s", "ttfr_s", "step_ms", "itl_s",
                  "e2e_s", "pp_tps", "prompt_tokens")
# Latency metrics whose summaries also carry percentiles of single observations (requests, chunk gaps).
LATENCY_METRICS = (("ttft_s", "TTFT ms", 1000.0), ("itl_s", "ITL ms", 1000.0), ("e2e_s", "E2E s", 1.0))
PERCENTILE_KEYS = ("p50", "p90", "p95", "p99")


def new_report(url: str, model: str, started: str, workload: dict[str, Any]) -> dict[str, Any]:
    """An empty report; suites fill `suites`, the runner fills identity/client/finished and lists each suite in
    `completed_suites` once it has run to its end."""
    return {"schema": SCHEMA, "started": started, "finished": None, "url": url, "model": model,
            "identity": {}, "workload": workload, "client": {}, "server_metrics": None, "suites": {},
            "completed_suites": [], "discarded_samples": [], "failed_requests": 0, "failures_by_class": {},
            "errors": [], "aborted": None, "comparison": None, "verdict": None, "monitors": None}


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON next to the target and rename, so readers never see a half-written report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=False, default=str)
            handle.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def suite_failed(name: str, suite: dict[str, Any]) -> bool:
    """A suite that reports ok=False, or any failed request inside it."""
    return suite.get("ok") is False or bool(suite.get("failed_requests"))


def _completion_reasons(report: dict[str, Any]) -> list[str]:
    # A report on disk mid-run, or left by a run killed outright, lacks suites: it must not read as a pass.
    completed = report.get("completed_suites")
    if completed is None:
        return ["the report records no completed suites"]
    missing = [s for s in (report.get("workload") or {}).get("suites") or [] if s not in completed]
    if missing:
        return [f"suites not completed: {', '.join(missing)}"]
    return [] if completed else ["no suite completed"]


def verdict_reasons(report: dict[str, Any]) -> list[str]:
    """Why a report is a fail: abort, failed requests, suites not completed, a failed suite, a comparison
    that could not compare (empty for a pass or a regression)."""
    reasons = [f"aborted: {report['aborted']}"] if report.get("aborted") else []
    if report.get("failed_requests"):
        reasons.append(f"{report['failed_requests']} failed requests")
    elif report.get("errors"):
        reasons.append(f"error: {report['errors'][0]}")
    reasons += _completion_reasons(report)
    reasons += [f"suite {name} failed" for name, suite in report.get("suites", {}).items() if suite_failed(name, suite)]
    error = (report.get("comparison") or {}).get("error")
    if error:
        reasons.append(f"comparison: {error}")
    return reasons + monitor_reasons(report.get("monitors"))


def verdict(report: dict[str, Any]) -> str:
    """fail (any of `verdict_reasons`) > regression > pass."""
    if verdict_reasons(report):
        return "fail"
    comparison = report.get("comparison") or {}
    if comparison.get("regressions"):
        return "regression"
    return "pass"


def point_label(point: dict[str, Any]) -> str:
    """A decode point's name: case-cN, with @dDEPTH when it ran after prior context."""
    depth = point.get("depth") or 0
    return f"{point['case']}-c{point['concurrency']}" + (f"@d{depth}" if depth else "")


def _decode_points(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    points = (report.get("suites", {}).get("decode") or {}).get("points") or []
    return {f"decode/{point_label(p)}": p["metrics"] for p in points}


def _prefill_points(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    points = (report.get("suites", {}).get("prefill") or {}).get("points") or []
    return {f"prefill/{p['text']}-{p['size']}": p["metrics"] for p in points}


def comparable_points(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Point key -> metrics summaries, for every point a comparison can use."""
    return {**_decode_points(report), **_prefill_points(report)}


# What was measured: a baseline that differs in any of these is another system, and comparing with it is refused
# unless forced. The client's own version and the image labels are recorded and only warned about: they do not
# change what the server does (the image ID does).
GATED_IDENTITY = ("image_id", "serve_profile", "serve_profile_sha256", "kernel", "driver", "server_version")
WARNED_IDENTITY = ("image_labels", "sparkfleet_version")


def identity_differences(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(refusals, warnings) between two reports' identities. A field recorded on one side only warns (older
    reports did not record it); a field recorded on both sides with other values refuses (gated) or warns."""
    refusals, warnings = [], []
    for key in GATED_IDENTITY + WARNED_IDENTITY:
        mine, other = ours.get(key), theirs.get(key)
        if mine in (None, "", {}) and other in (None, "", {}):
            continue
        if mine in (None, "", {}) or other in (None, "", {}):
            side = "this run" if mine in (None, "", {}) else "the baseline"
            warnings.append(f"identity {key} is not recorded in {side}")
        elif mine != other:
            line = f"identity {key}: baseline {other!r}, this run {mine!r}"
            (refusals if key in GATED_IDENTITY else warnings).append(line)
    return refusals, warnings


def _by_suite(points: dict[str, Any]) -> dict[str, set[str]]:
    suites: dict[str, set[str]] = {}
    for key in points:
        suites.setdefault(key.split("/", 1)[0], set()).add(key)
    return suites


def point_set_difference(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[Optional[str], list[str]]:
    """(why the point sets differ, warnings). Per suite both sides measured, the points must be the same set (other
    concurrency, cases, depths or sizes are another workload); a suite measured on one side only is a warning (a
    decode-only run may compare with a full baseline's decode points)."""
    mine, other = _by_suite(ours), _by_suite(theirs)
    differences, warnings = [], []
    for suite in sorted(set(mine) | set(other)):
        if suite not in other or suite not in mine:
            warnings.append(f"suite {suite} has points only in {'this run' if suite in mine else 'the baseline'}")
            continue
        only_here, only_there = sorted(mine[suite] - other[suite]), sorted(other[suite] - mine[suite])
        if only_here or only_there:
            differences.append(f"only in this run: {only_here or 'none'}; only in the baseline: {only_there or 'none'}")
    return ("point set differs (" + "; ".join(differences) + ")" if differences else None), warnings


def compare(report: dict[str, Any], baseline: dict[str, Any], tolerance_pct: float,
            source: str = "", force: bool = False) -> dict[str, Any]:
    """Welch comparison of every shared point and metric; regressions counted by the reference rule.

    A baseline of another identity (image, serve profile, kernel, driver, server version) or another point set
    is refused (an error, so the verdict is fail) unless `force`, which turns those into warnings."""
    result: dict[str, Any] = {"baseline": source, "baseline_started": baseline.get("started"),
                              "tolerance_pct": tolerance_pct, "points": [], "regressions": 0, "warnings": [],
                              "forced": force}
    if baseline.get("schema") != SCHEMA:
        result["error"] = f"baseline schema {baseline.get('schema')!r} is not {SCHEMA}"
        return result
    if baseline.get("model") != report.get("model"):
        result["warnings"].append(f"baseline model {baseline.get('model')!r} differs from {report.get('model')!r}")
    ours, theirs = comparable_points(report), comparable_points(baseline)
    shared = [key for key in ours if key in theirs]
    if not shared:
        result["error"] = f"baseline shares no points with this run (this run {len(ours)}, baseline {len(theirs)})"
        return result
    refusals, warnings = identity_differences(report.get("identity") or {}, baseline.get("identity") or {})
    differs, suite_warnings = point_set_difference(ours, theirs)
    refusals += [differs] if differs else []
    result["warnings"] += warnings + suite_warnings
    if refusals and not force:
        result["error"] = ("baseline is not comparable: " + "; ".join(refusals)
                           + " (force_compare / --force-compare compares anyway)")
        result["refusals"] = refusals
        return result
    result["warnings"] += [f"forced: {r}" for r in refusals]
    for key in shared:
        for metric, higher in GATED.items():
            row = _compare_metric(key, metric, ours[key].get(metric), theirs[key].get(metric), higher, tolerance_pct)
            if row:
                result["points"].append(row)
                result["regressions"] += int(row["regression"])
    if not result["points"]:
        result["error"] = "no shared point has two samples or more on both sides"
    return result


def _compare_metric(key: str, metric: str, cur: Optional[dict[str, Any]], base: Optional[dict[str, Any]],
                    higher: bool, tolerance_pct: float) -> Optional[dict[str, Any]]:
    if not cur or not base or len(cur.get("values") or []) < 2 or len(base.get("values") or []) < 2:
        return None
    cmp = welch(cur["values"], base["values"])
    return {"point": key, "metric": metric, "current": cmp["current_mean"], "baseline": cmp["baseline_mean"],
            "change_pct": cmp["change_pct"], "change_ci95_pct": cmp["change_ci95_pct"], "df": cmp["df"],
            "direction": direction(cmp), "regression": is_regression(cmp, higher, tolerance_pct)}


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cell(summary: Optional[dict[str, Any]], digits: int = 2, scale: float = 1.0) -> str:
    if not summary or summary.get("mean") is None:
        return "–"
    mean = summary["mean"] * scale
    lo, hi = (v * scale for v in summary["ci95"])
    pct = summary.get("ci95_pct")
    tail = f" ±{pct:.1f}%" if pct is not None else ""
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]{tail}"


def summary_markdown(report: dict[str, Any]) -> str:
    """The human summary: run facts, then one table per suite, then the comparison."""
    out = io.StringIO()
    out.write(f"# Benchmark {report.get('started')}\n\n")
    reasons = "; ".join(verdict_reasons(report)) if report.get("verdict") == "fail" else ""
    out.write(f"- verdict: **{report.get('verdict')}**{' — ' + reasons if reasons else ''}\n"
              f"- url: {report.get('url')}\n- model: {report.get('model')}\n")
    identity = report.get("identity") or {}
    recorded = [f"{key} {identity[key]}" for key in GATED_IDENTITY + WARNED_IDENTITY if identity.get(key)]
    if recorded:
        out.write(f"- identity: {'; '.join(recorded)}\n")
    client = report.get("client") or {}
    out.write(f"- client CPU: {_fmt(client.get('cpu_s'))} s over {_fmt(client.get('wall_s'))} s wall\n")
    if report.get("server_metrics") is False:
        out.write("- server has no /metrics: idle checks, foreign-traffic checks and counter deltas were skipped\n")
    out.write(f"- failed requests: {report.get('failed_requests')} {report.get('failures_by_class') or ''}\n")
    if report.get("aborted"):
        out.write(f"- ABORTED: {report['aborted']}\n")
    for err in report.get("errors") or []:
        out.write(f"- error: {err}\n")
    suites = report.get("suites", {})
    for name, writer in (("quality", _md_quality), ("compliance", _md_compliance), ("decode", _md_decode),
                         ("sampled", _md_sampled), ("prefill", _md_prefill),
                         ("prefix", _md_prefix), ("admission", _md_admission), ("needle", _md_needle)):
        if name in suites:
            if name == "decode":
                _md_decode(out, suites[name], str(report.get("model") or ""))
            else:
                writer(out, suites[name])
    _md_monitors(out, report.get("monitors"))
    _md_comparison(out, report.get("comparison"))
    return out.getvalue()


def _md_monitors(out: io.StringIO, monitors: Optional[dict[str, Any]]) -> None:
    out.write("\n## Monitors\n\n")
    if not monitors:
        out.write("none: no rank was named to sample (memory, thermals and GPU were not watched)\n")
        return
    if monitors.get("halted"):
        out.write(f"HALTED: {monitors['halted']}\n\n")
    out.write("| rank | samples | min MemAvailable GiB (floor) | swap growth GiB | max zone °C | max GPU °C | "
              "min headroom °C | SM clock MHz | power W | flags |\n|---|---|---|---|---|---|---|---|---|---|\n")
    for node, rec in monitors.get("nodes", {}).items():
        flags = [f for f, on in (("clock latch", rec.get("clock_latch")),
                                 ("thermal slowdown", rec.get("thermal_slowdown"))) if on]
        gpu = rec.get("gpu") or "not sampled"
        clocks = f"{_fmt(rec.get('min_sm_clock_mhz'), 0)}–{_fmt(rec.get('max_sm_clock_mhz'), 0)}"
        out.write(f"| {node} | {rec.get('samples')} | {_fmt(rec.get('min_available_gib'))} "
                  f"({_fmt(rec.get('memory_floor_gib'))}) | {_fmt(rec.get('swap_growth_gib'))} | "
                  f"{_fmt(rec.get('max_zone_c'), 1)} | {_fmt(rec.get('max_gpu_c'), 1)} | "
                  f"{_fmt(rec.get('min_headroom_c'), 1)} | {clocks} | {_fmt(rec.get('max_power_w'), 1)} | "
                  f"{', '.join(flags) or ('GPU ' + gpu if gpu != 'sampled' else '')} |\n")


def _md_quality(out: io.StringIO, suite: dict[str, Any]) -> None:
    out.write(f"\n## Quality gate\n\n{suite.get('passed')}/{len(suite.get('runs', []))} passed — "
              f"{'ok' if suite.get('ok') else 'FAILED'}\n")
    for i, run in enumerate(suite.get("runs", []), 1):
        if run.get("verdict") != "pass":
            out.write(f"- run {i}: {run.get('verdict')}\n")


def _mean_sd(summary: Optional[dict[str, Any]], digits: int = 2, scale: float = 1.0) -> str:
    if not summary or summary.get("mean") is None:
        return "–"
    return f"{summary['mean'] * scale:.{digits}f} ± {(summary.get('sd') or 0.0) * scale:.{digits}f}"


def depth_rows(suite: dict[str, Any], model: str) -> Iterator[list[str]]:
    """llama-benchy's rows (model, test, t/s, ttfr ms, e2e_ttft ms) for every decode point: `ppP @ dD (cN)` with
    prompt tokens / TTFT per request, `tgT @ dD (cN)` with the decode-window rate of all N streams."""
    for p in suite.get("points", []):
        m = p["metrics"]
        depth, conc = p.get("depth") or 0, p["concurrency"]
        tail = (f" @ d{depth}" if depth else "") + (f" (c{conc})" if conc > 1 else "")
        prompt = (m.get("prompt_tokens") or {}).get("mean")
        own = max(0, round(prompt - depth)) if prompt is not None else "?"
        ttfr, ttft = _mean_sd(m.get("ttfr_s"), 1, 1000), _mean_sd(m.get("ttft_s"), 1, 1000)
        yield [model, f"pp{own}{tail}", _mean_sd(m.get("pp_tps")), ttfr, ttft]
        tokens = p.get("max_tokens") or "?"
        yield [model, f"tg{tokens}{tail}", _mean_sd(m.get("decode_window_tps")), "", ""]


def _md_depth(out: io.StringIO, suite: dict[str, Any], model: str) -> None:
    out.write("\n## Prefill and decode by depth (llama-benchy layout; mean ± sd over samples)\n\n"
              "| model | test | t/s | ttfr (ms) | e2e_ttft (ms) |\n|:---|---:|---:|---:|---:|\n")
    for row in depth_rows(suite, model):
        out.write("| " + " | ".join(row) + " |\n")


def _md_decode(out: io.StringIO, suite: dict[str, Any], model: str = "") -> None:
    out.write("\n## Decode (mean [95% CI] ±half-width)\n\n| point | n | tok/s | decode-window tok/s | per-stream tok/s "
              "| TTFT ms | TTFAT ms | step ms | failed |\n|---|---|---|---|---|---|---|---|---|\n")
    for p in suite.get("points", []):
        m = p["metrics"]
        out.write(f"| {point_label(p)} | {p['n']} | {_cell(m.get('tps'), 1)} | "
                  f"{_cell(m.get('decode_window_tps'), 1)} | {_cell(m.get('per_stream_tps'), 2)} | "
                  f"{_cell(m.get('ttft_s'), 1, 1000)} | {_cell(m.get('ttfat_s'), 1, 1000)} | "
                  f"{_cell(m.get('step_ms'), 2)} | {p.get('failed_requests', 0)} |\n")
    _md_latency(out, suite)
    _md_depth(out, suite, model)


def _quantiles(summary: Optional[dict[str, Any]], scale: float, digits: int) -> str:
    if not summary or summary.get("p50") is None:
        return "–"
    return " / ".join(f"{summary[k] * scale:.{digits}f}" for k in PERCENTILE_KEYS)


def _md_latency(out: io.StringIO, suite: dict[str, Any]) -> None:
    """Mean [95% CI] of the per-sample means beside p50/p90/p95/p99 of single observations."""
    out.write("\n## Decode latency (mean [95% CI]; p50 / p90 / p95 / p99 of requests, ITL of chunk gaps)\n\n"
              "| point | " + " | ".join(f"{label} mean | {label} p50/p90/p95/p99" for _, label, _ in LATENCY_METRICS)
              + " |\n|---|" + "---|---|" * len(LATENCY_METRICS) + "\n")
    for p in suite.get("points", []):
        m = p["metrics"]
        cells = []
        for name, _, scale in LATENCY_METRICS:
            digits = 3 if scale == 1.0 else 1
            cells += [_cell(m.get(name), digits, scale), _quantiles(m.get(name), scale, digits)]
        out.write(f"| {point_label(p)} | " + " | ".join(cells) + " |\n")


def _md_compliance(out: io.StringIO, suite: dict[str, Any]) -> None:
    out.write(f"\n## Compliance (JSON array of exactly 12 objects)\n\n{suite.get('passed')}/{suite.get('total')} "
              f"passed — {'ok' if suite.get('ok') else 'FAILED'}\n\n| arm | passed | failures |\n|---|---|---|\n")
    for arm, result in (suite.get("arms") or {}).items():
        failures = "; ".join(f"{a['record']}: {a['verdict']}" for a in result.get("answers", []) if a["verdict"] != "pass")
        out.write(f"| {arm} | {result.get('passed')}/{result.get('total')} | {failures or '–'} |\n")


def _md_sampled(out: io.StringIO, suite: dict[str, Any]) -> None:
    out.write("\n## Sampled (T=1.0, top_p 0.95)\n\n| point | requests | tok/s | per-stream tok/s | TTFT ms | "
              "accepted/draft | acceptance rate | drafts | failed |\n|---|---|---|---|---|---|---|---|---|\n")
    for p in suite.get("points", []):
        ttft = p.get("ttft_s")
        out.write(f"| {p['case']}-c{p['concurrency']} | {p['requests']} | {_fmt(p.get('tps'), 1)} | "
                  f"{_fmt(p.get('per_stream_tps'), 2)} | {_fmt(None if ttft is None else 1000 * ttft, 1)} | "
                  f"{_fmt(p.get('accepted_per_draft'), 3)} | {_fmt(p.get('acceptance_rate'), 3)} | "
                  f"{_fmt(p.get('drafts'), 0)} | {p.get('failed_requests', 0)} |\n")


def _md_prefill(out: io.StringIO, suite: dict[str, Any]) -> None:
    out.write("\n## Cold prefill\n\n| text | size | prompt tokens | TTFT s | prefill tok/s | discarded | failed |\n"
              "|---|---|---|---|---|---|---|\n")
    for p in suite.get("points", []):
        m = p["metrics"]
        out.write(f"| {p['text']} | {p['size']} | {_cell(m.get('prompt_tokens'), 0)} | {_cell(m.get('ttft_s'), 3)} | "
                  f"{_cell(m.get('prefill_tps'), 0)} | {p.get('discarded', 0)} | {p.get('failed_requests', 0)} |\n")


def _md_prefix(out: io.StringIO, suite: dict[str, Any]) -> None:
    m = suite.get("metrics", {})
    out.write(f"\n## Prefix replay ({suite.get('prompt_tokens')} tokens)\n\n| cold TTFT s | warm TTFT s | warm hit rate |\n"
              f"|---|---|---|\n| {_cell(m.get('cold_ttft_s'), 3)} | {_cell(m.get('warm_ttft_s'), 3)} | "
              f"{_fmt(suite.get('warm_hit_rate'), 3)} |\n")


def _md_admission(out: io.StringIO, suite: dict[str, Any]) -> None:
    out.write(f"\n## Admission\n\n{suite.get('requests')} × {suite.get('context_tokens')} context tokens: "
              f"{'ok' if suite.get('ok') else 'FAILED'} — ok {suite.get('ok_requests')}, preemptions "
              f"{_fmt(suite.get('preemptions'), 0)}, peak running {_fmt(suite.get('peak_running'), 0)}\n")


def _md_needle(out: io.StringIO, suite: dict[str, Any]) -> None:
    out.write("\n## Needle in a haystack\n\n| depth % | prompt tokens | found | passed |\n|---|---|---|---|\n")
    for run in suite.get("runs", []):
        out.write(f"| {run['depth_pct']} | {run.get('prompt_tokens')} | {run.get('found')} | {run.get('passed')} |\n")


def _md_comparison(out: io.StringIO, comparison: Optional[dict[str, Any]]) -> None:
    if not comparison:
        return
    out.write(f"\n## Comparison with {comparison.get('baseline')} (tolerance {comparison.get('tolerance_pct')}%)\n\n")
    if comparison.get("error"):
        out.write(f"ERROR: {comparison['error']}\n")
        return
    for warning in comparison.get("warnings", []):
        out.write(f"- warning: {warning}\n")
    out.write("| point | metric | baseline | current | change % [95% CI] | result |\n|---|---|---|---|---|---|\n")
    for row in comparison.get("points", []):
        lo, hi = row["change_ci95_pct"]
        result = "REGRESSION" if row["regression"] else row["direction"]
        out.write(f"| {row['point']} | {row['metric']} | {_fmt(row['baseline'])} | {_fmt(row['current'])} | "
                  f"{row['change_pct']:+.2f} [{lo:+.2f}, {hi:+.2f}] | {result} |\n")


CSV_FIELDS = ("suite", "point", "case", "concurrency", "size", "metric", "n", "mean", "sd", "ci95_lo", "ci95_hi",
              "failed_requests", "p50", "p90", "p95", "p99", "depth")


def _csv_rows(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    suites = report.get("suites", {})
    for p in (suites.get("decode") or {}).get("points", []):
        base = {"suite": "decode", "point": point_label(p), "case": p["case"],
                "concurrency": p["concurrency"], "depth": p.get("depth", 0), "size": "", "failed_requests": p.get("failed_requests", 0)}
        yield from _metric_rows(base, p["metrics"])
    for p in (suites.get("prefill") or {}).get("points", []):
        base = {"suite": "prefill", "point": f"{p['text']}-{p['size']}", "case": p["text"], "concurrency": 1, "depth": "",
                "size": p["size"], "failed_requests": p.get("failed_requests", 0)}
        yield from _metric_rows(base, p["metrics"])


def _metric_rows(base: dict[str, Any], metrics: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for name, summary in metrics.items():
        if not summary or summary.get("mean") is None:
            continue
        lo, hi = summary["ci95"]
        yield {**base, "metric": name, "n": summary["n"], "mean": summary["mean"], "sd": summary["sd"],
               "ci95_lo": lo, "ci95_hi": hi, **{k: summary.get(k, "") for k in PERCENTILE_KEYS}}


def points_csv(report: dict[str, Any]) -> str:
    """One row per point and metric (flattened for spreadsheets)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in _csv_rows(report):
        writer.writerow(row)
    return out.getvalue()


def write_outputs(out_dir: Path, report: dict[str, Any]) -> dict[str, str]:
    """bench.json (atomically), summary.md and points.csv; returns their paths."""
    paths = {"json": out_dir / "bench.json", "summary": out_dir / "summary.md", "csv": out_dir / "points.csv"}
    write_json_atomic(paths["json"], report)
    paths["summary"].write_text(summary_markdown(report), encoding="utf-8")
    paths["csv"].write_text(points_csv(report), encoding="utf-8")
    return {key: str(path) for key, path in paths.items()}
