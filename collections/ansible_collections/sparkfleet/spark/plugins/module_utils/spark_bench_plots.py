"""PNG plots of a bench report. matplotlib is imported lazily (Agg backend) so the rest of the bench,
and hosts without matplotlib, never pay for it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _errbar(summary: dict[str, Any]) -> tuple[float, float, float]:
    mean = summary["mean"]
    lo, hi = summary["ci95"]
    return mean, mean - lo, hi - mean


def _decode_series(report: dict[str, Any], metric: str) -> dict[str, list[tuple[int, float, float, float]]]:
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for p in (report.get("suites", {}).get("decode") or {}).get("points", []):
        summary = p["metrics"].get(metric)
        if summary and summary.get("mean") is not None:
            series.setdefault(p["case"], []).append((p["concurrency"], *_errbar(summary)))
    return {case: sorted(rows) for case, rows in series.items()}


def _prefill_series(report: dict[str, Any]) -> dict[str, list[tuple[int, float, float, float]]]:
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for p in (report.get("suites", {}).get("prefill") or {}).get("points", []):
        summary = p["metrics"].get("prefill_tps")
        tokens = p["metrics"].get("prompt_tokens") or {}
        if summary and summary.get("mean") is not None:
            series.setdefault(p["text"], []).append((int(tokens.get("mean") or p["size"]), *_errbar(summary)))
    return {text: sorted(rows) for text, rows in series.items()}


def _draw(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, Any],
          baseline: Optional[dict[str, Any]], logx: bool) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for name, rows in series.items():
        xs, ys, lo, hi = zip(*rows)
        line = ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
        if baseline and name in baseline:
            bxs, bys, blo, bhi = zip(*baseline[name])
            ax.errorbar(bxs, bys, yerr=[blo, bhi], marker="x", capsize=3, linestyle="--", alpha=0.6,
                        color=line[0].get_color(), label=f"{name} (baseline)")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def write_plots(out_dir: Path, report: dict[str, Any], baseline: Optional[dict[str, Any]] = None) -> list[str]:
    """decode_tps.png (tok/s vs streams per case, 95% CI bars) and prefill_tps.png, with baseline overlays."""
    written: list[str] = []
    for metric, label in (("tps", "aggregate tok/s"), ("decode_window_tps", "decode-window tok/s")):
        series = _decode_series(report, metric)
        if series:
            base = _decode_series(baseline, metric) if baseline else None
            written.append(_draw(out_dir / f"decode_{metric}.png", f"Decode: {label} vs streams", "streams",
                                 label, series, base, logx=True))
    prefill = _prefill_series(report)
    if prefill:
        base = _prefill_series(baseline) if baseline else None
        written.append(_draw(out_dir / "prefill_tps.png", "Cold prefill: tok/s vs prompt length", "prompt tokens",
                             "prefill tok/s", prefill, base, logx=True))
    return written
