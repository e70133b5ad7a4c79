"""Pure parts of the client benchmark (tests/bench/compare_clients.py): its points, sample grouping, targets."""
from __future__ import annotations

from typing import Any

import pytest

import compare_clients as cc


def test_parse_points_and_labels() -> None:
    points = cc.parse_points("1, 8,16x5,64", 0.02)
    assert points == [(1, 0.02), (8, 0.02), (16, 0.005), (64, 0.02)]
    assert [cc.point_label(n, itl, 0.02) for n, itl in points] == ["1", "8", "16x5", "64"]
    assert cc.parse_points(cc.DEFAULT_POINTS, 0.02)[2] == (16, 0.005)
    for bad in ("0", "4x0", "x5", "8x"):
        with pytest.raises(ValueError):
            cc.parse_points(bad, 0.02)


def test_cli_argv_asks_for_one_point_with_exact_samples() -> None:
    argv = cc.cli_argv("http://h:1", 16, 3, 256, "/tmp/r")
    opts = dict(zip(argv[::2], argv[1::2]))
    assert opts["--suites"] == "decode" and opts["--concurrency"] == "16" and opts["--cases"] == "prose"
    assert opts["--min-samples"] == opts["--max-samples"] == "3" and opts["--max-tokens"] == "256"


def test_sample_groups_skip_the_warm_up_and_refuse_extra_samples() -> None:
    reqs = [{"id": i} for i in range(8)]
    assert cc.sample_groups(reqs, 2, 3) == [[{"id": 2}, {"id": 3}], [{"id": 4}, {"id": 5}], [{"id": 6}, {"id": 7}]]
    with pytest.raises(RuntimeError, match="expected 8"):
        cc.sample_groups(reqs + [{"id": 8}, {"id": 9}], 2, 3)


def _row(streams: int, itl_ms: float, ours_ttft: float, ours_vs: float, benchy_vs: float, ratio: float) -> dict[str, Any]:
    return {"streams": streams, "itl_ms": itl_ms, "label": cc.point_label(streams, itl_ms / 1000, 0.02),
            "ours": {"ttft_err_ms": ours_ttft, "ttft_err_vs_server_ttft_ms": ours_vs},
            "llama_benchy": {"ttft_err_vs_server_ttft_ms": benchy_vs}, "cpu_ratio_ours_over_benchy": ratio}


def test_targets() -> None:
    rows = [_row(1, 20, 0.2, 0.5, 1.3, 0.45), _row(16, 5, 0.4, 3.1, 15.0, 0.52), _row(64, 20, 0.5, 20, 40, 0.8)]
    assert cc.targets(rows) == {"cpu_ratio_le_0_5": {"1": True, "16x5": False, "64": False},
                                "ttft_err_le_1ms_1": True, "ttft_below_benchy_16x5": True}
    worse = [_row(1, 20, -1.2, 0.5, 1.3, 0.3), _row(16, 5, 0.4, 16.0, 15.0, 0.4)]
    got = cc.targets(worse)
    assert got["ttft_err_le_1ms_1"] is False and got["ttft_below_benchy_16x5"] is False
