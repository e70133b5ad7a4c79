"""The identity gate: the report records what was measured, and --compare refuses a baseline of another identity
or point set unless forced."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from sparkfleet_bench import cli
from sparkfleet_bench import report as rp
from sparkfleet_bench.stats import summarize
from sparkfleet_bench.suites import BenchConfig, run_bench, validate
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_version import sparkfleet_version

from conftest import MODEL, Standin

IDENTITY = {"image_id": "sha256:aaa", "image_labels": {"org.opencontainers.image.version": "r6d"},
            "serve_profile": "tp4-64k-r6d", "serve_profile_sha256": "beef", "kernel": "6.11.0-1016-nvidia",
            "driver": "580.95.05", "server_version": "0.11.1", "sparkfleet_version": "1.0.0"}


def _point(case: str, conc: int, tps: list[float]) -> dict[str, Any]:
    return {"case": case, "concurrency": conc, "n": len(tps), "failed_requests": 0,
            "metrics": {"tps": summarize(tps)}}


def _report(identity: dict[str, Any], points: tuple[tuple[str, int], ...] = (("prose", 1), ("prose", 8))) -> dict[str, Any]:
    rep = rp.new_report("http://h:8000", "m", "2026-12-01T00:00:00Z", {"suites": ["decode"]})
    rep["identity"] = dict(identity)
    rep["suites"] = {"decode": {"points": [_point(c, n, [50.0 * n, 50.5 * n, 49.5 * n]) for c, n in points],
                                "failed_requests": 0}}
    rep["completed_suites"] = ["decode"]
    return rep


def test_same_identity_compares() -> None:
    comparison = rp.compare(_report(IDENTITY), _report(IDENTITY), 3.0, "base.json")
    assert "error" not in comparison and comparison["points"] and comparison["warnings"] == []


@pytest.mark.parametrize("key", ["image_id", "serve_profile", "serve_profile_sha256", "kernel", "driver",
                                 "server_version"])
def test_another_identity_is_refused_unless_forced(key: str) -> None:
    other = {**IDENTITY, key: "something else"}
    refused = rp.compare(_report(other), _report(IDENTITY), 3.0, "base.json")
    assert refused["error"].startswith("baseline is not comparable: identity " + key) and not refused["points"]
    assert "--force-compare" in refused["error"]
    current = {**_report(other), "comparison": refused}
    assert rp.verdict(current) == "fail"
    assert "ERROR: baseline is not comparable" in rp.summary_markdown(current)
    forced = rp.compare(_report(other), _report(IDENTITY), 3.0, "base.json", force=True)
    assert "error" not in forced and forced["points"] and forced["forced"] is True
    assert any(w.startswith(f"forced: identity {key}") for w in forced["warnings"])


def test_client_version_and_labels_warn_and_unrecorded_fields_warn() -> None:
    other = {**IDENTITY, "sparkfleet_version": "1.1.0", "image_labels": {"x": "y"}}
    comparison = rp.compare(_report(other), _report(IDENTITY), 3.0)
    assert "error" not in comparison
    assert any("sparkfleet_version" in w for w in comparison["warnings"])
    assert any("image_labels" in w for w in comparison["warnings"])
    # a baseline from before identities were recorded: warnings, not a refusal
    old = rp.compare(_report(IDENTITY), _report({}), 3.0)
    assert "error" not in old and "identity image_id is not recorded in the baseline" in old["warnings"]


def test_another_point_set_is_refused_unless_forced() -> None:
    fewer = _report(IDENTITY, (("prose", 1),))
    refused = rp.compare(fewer, _report(IDENTITY), 3.0)
    assert "point set differs" in refused["error"] and "decode/prose-c8" in refused["error"]
    forced = rp.compare(fewer, _report(IDENTITY), 3.0, force=True)
    assert "error" not in forced and [r["point"] for r in forced["points"]] == ["decode/prose-c1"]
    # no shared point at all stays the older, plainer error
    assert "shares no points" in rp.compare(_report(IDENTITY, (("code", 2),)), _report(IDENTITY), 3.0)["error"]


def test_identity_options(tmp_path: Path) -> None:
    cfg, _ = cli.parse(["--url", "http://h", "--identity", "image_id=sha256:aaa", "--identity", "kernel=6.11",
                        "--identity", 'image_labels={"a": "b"}', "--force-compare"], {})
    assert cfg.identity == {"image_id": "sha256:aaa", "kernel": "6.11", "image_labels": {"a": "b"}}
    assert cfg.force_compare is True and not validate(cfg)
    bad = BenchConfig(url="http://h", output_dir="d", identity={"imageid": "x", "image_labels": "y"})
    problems = validate(bad)
    assert any("identity: unknown ['imageid']" in p for p in problems)
    assert any("image_labels must be a mapping" in p for p in problems)
    with pytest.raises(SystemExit):
        cli.parse(["--url", "http://h", "--identity", "no-equals-sign"], {})


def test_a_run_records_identity_and_the_gate_refuses_another(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    supplied = {"image_id": "sha256:aaa", "serve_profile": "tp3-64k-r6", "kernel": "6.11.0", "driver": "580.95.05"}

    def run(out: Path, **kw: Any) -> dict[str, Any]:
        return run_bench(BenchConfig(url=server.url, output_dir=str(out), model=MODEL, suites=["decode"],
                                     concurrency=[1], cases=["code-nothink"], max_tokens=16, min_samples=2,
                                     max_samples=2, settle=0.05, poll_interval=0.2, identity=kw.pop("identity", supplied),
                                     **kw))

    base = run(tmp_path / "base")
    identity = base["identity"]
    assert {k: identity[k] for k in supplied} == supplied
    assert identity["server_version"]  # the stand-in answers GET /version
    assert identity["sparkfleet_version"] == sparkfleet_version() != "unknown"
    changed = copy.deepcopy(supplied)
    changed["image_id"] = "sha256:bbb"
    refused = run(tmp_path / "refused", identity=changed, compare=str(tmp_path / "base" / "bench.json"))
    assert refused["verdict"] == "fail" and "identity image_id" in refused["comparison"]["error"]
    forced = run(tmp_path / "forced", identity=changed, compare=str(tmp_path / "base" / "bench.json"),
                 force_compare=True)
    assert forced["verdict"] in ("pass", "regression") and forced["comparison"]["points"]
    assert json.loads((tmp_path / "forced" / "bench.json").read_text())["comparison"]["forced"] is True


def test_a_suite_measured_on_one_side_only_warns() -> None:
    full = _report(IDENTITY)
    full["suites"]["prefill"] = {"points": [{"text": "filler", "size": 2048, "n": 3, "failed_requests": 0,
                                             "metrics": {"prefill_tps": summarize([4000.0, 4010.0, 3990.0])}}]}
    comparison = rp.compare(_report(IDENTITY), full, 3.0)
    assert "error" not in comparison and "suite prefill has points only in the baseline" in comparison["warnings"]
