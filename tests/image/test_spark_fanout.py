"""spark_fanout: waves over the cabled fabric, from the rendered tp3 and tp4 plans."""
from __future__ import annotations

import copy
import json
from typing import Any, Dict, List

import pytest
from conftest import FIXTURES

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_fanout import (
    FanoutError, cable_addresses, fanout_waves)

TRIANGLE = json.loads((FIXTURES / "plan-tp3-triangle.json").read_text())["nodes"]
RING = json.loads((FIXTURES / "plan-tp4-ring.json").read_text())["nodes"]


def edges(waves: List[List[Dict[str, Any]]]) -> List[List[str]]:
    return [[f"{t['from']}->{t['to']}@{t['address']}" for t in wave] for wave in waves]


def test_cable_addresses_are_the_receivers_own_per_path() -> None:
    links = cable_addresses(RING)
    assert links[("dgx1", "dgx2")] == ["10.12.1.2", "10.12.2.2"]
    assert links[("dgx2", "dgx1")] == ["10.12.1.1", "10.12.2.1"]
    assert ("dgx1", "dgx3") not in links  # ring non-neighbours have no cable


def test_triangle_is_one_wave_from_the_head() -> None:
    waves = fanout_waves(TRIANGLE, "dgx1", ["dgx2", "dgx3"])
    assert edges(waves) == [["dgx1->dgx2@10.12.1.2", "dgx1->dgx3@10.13.1.3"]]
    assert {t["network"] for t in waves[0]} == {"fabric"}


def test_ring_reaches_the_non_neighbour_in_a_second_wave() -> None:
    waves = fanout_waves(RING, "dgx1", ["dgx2", "dgx3", "dgx4"])
    assert edges(waves) == [["dgx1->dgx2@10.12.1.2", "dgx1->dgx4@10.14.1.4"], ["dgx2->dgx3@10.23.1.3"]]


def test_ring_from_dgx4_matches_the_reference_copy_of_r6d() -> None:
    waves = fanout_waves(RING, "dgx4", ["dgx1", "dgx2", "dgx3"])
    assert edges(waves) == [["dgx4->dgx1@10.14.1.1", "dgx4->dgx3@10.34.1.3"], ["dgx1->dgx2@10.12.1.2"]]


def test_current_holders_send_too_and_load_is_spread() -> None:
    waves = fanout_waves(RING, "dgx1", ["dgx2", "dgx4"], holders=["dgx3"])
    assert edges(waves) == [["dgx1->dgx2@10.12.1.2", "dgx3->dgx4@10.34.1.4"]]
    assert fanout_waves(RING, "dgx1", ["dgx1"], holders=[]) == []


def test_source_off_the_fabric_needs_the_management_fallback() -> None:
    with pytest.raises(FanoutError) as info:
        fanout_waves(RING, "controller", ["dgx1", "dgx3"])
    assert str(info.value) == ("source controller is not on the fabric; cannot reach dgx1, dgx3 over the fabric "
                               "(allow the management-network fallback to send there)")
    waves = fanout_waves(RING, "controller", ["dgx3", "dgx1"], management_fallback=True)
    assert edges(waves) == [["controller->dgx1@10.0.1.71", "controller->dgx3@10.0.1.73"]]
    assert {t["network"] for t in waves[0]} == {"management"}


def test_unreachable_target_is_named_or_sent_over_management() -> None:
    cut = copy.deepcopy(TRIANGLE)
    for node in cut:  # dgx3 loses both of its cables
        node["interfaces"] = [i for i in node["interfaces"] if "dgx3" not in (node["host"], i["peer_host"])]
    with pytest.raises(FanoutError, match=r"^dgx3 has no cable path from a holder; cannot reach dgx3"):
        fanout_waves(cut, "dgx1", ["dgx2", "dgx3"])
    waves = fanout_waves(cut, "dgx1", ["dgx2", "dgx3"], management_fallback=True)
    assert edges(waves) == [["dgx1->dgx2@10.12.1.2"], ["dgx1->dgx3@10.0.1.73"]]


def test_unknown_target() -> None:
    with pytest.raises(FanoutError, match="fan-out targets not in the fabric plan: dgx9"):
        fanout_waves(TRIANGLE, "dgx1", ["dgx9"])
