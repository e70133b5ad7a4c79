"""Relay copies in the distribution waves: who keeps what it receives, who forwards it instead of saving."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from testlib import load_source

from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import relay_waves

FILTERS = load_source("filter", "sparkfleet_image").FilterModule().filters()
LAYERS = ["base", "mid", "top"]
RING = [[{"from": "dgx1", "to": "dgx2"}, {"from": "dgx1", "to": "dgx4"}], [{"from": "dgx2", "to": "dgx3"}]]


def flags(waves: List[List[Dict[str, Any]]]) -> List[List[tuple]]:
    return [[(t["from"], t["to"], t["depth"], t["keep_relay"], t["from_relay"]) for t in w] for w in waves]


def test_a_ring_forwards_the_copy_of_the_second_wave_sender() -> None:
    chains = {h: [["base"]] for h in ("dgx2", "dgx3", "dgx4")}
    assert flags(relay_waves(RING, LAYERS, chains)) == [
        [("dgx1", "dgx2", 1, True, False), ("dgx1", "dgx4", 1, False, False)],
        [("dgx2", "dgx3", 1, False, True)],
    ]


def test_a_receiver_missing_layers_of_the_copy_gets_a_fresh_save() -> None:
    chains = {"dgx2": [["base", "mid"]], "dgx3": [["base"]], "dgx4": []}
    waves = relay_waves(RING, LAYERS, chains)
    assert waves[1][0]["from_relay"] is False  # dgx2's copy lacks base and mid; dgx3 only has base
    assert waves[1][0]["depth"] == 1


def test_a_copy_with_more_layers_than_needed_is_forwarded() -> None:
    chains = {"dgx2": [], "dgx3": [["base", "mid"]]}
    waves = relay_waves(RING, LAYERS, chains)
    assert waves[1][0]["from_relay"] is True


def test_a_forwarded_copy_keeps_the_depth_of_the_original() -> None:
    chain = [[{"from": "a", "to": "b"}], [{"from": "b", "to": "c"}], [{"from": "c", "to": "d"}]]
    chains = {"b": [["base"]], "c": [["base", "mid"]], "d": [["base"]]}
    waves = relay_waves(chain, LAYERS, chains)
    assert [w[0]["from_relay"] for w in waves] == [False, True, True]  # c's copy is b's (depth 1): fits d


def test_layer_blind_distribution_relays_full_copies() -> None:
    chains = {h: [["base", "mid"]] for h in ("dgx2", "dgx3", "dgx4")}
    waves = relay_waves(RING, LAYERS, chains, layer_aware=False)
    assert {t["depth"] for w in waves for t in w} == {0}
    assert waves[1][0]["from_relay"] is True


def test_one_wave_keeps_nothing() -> None:
    waves = relay_waves([[{"from": "a", "to": "b"}, {"from": "a", "to": "c"}]], LAYERS, {})
    assert [(t["keep_relay"], t["from_relay"]) for t in waves[0]] == [(False, False), (False, False)]


def test_filter_reads_the_identity_facts() -> None:
    facts = {h: {"layer_chains": [["base"]], "present": False} for h in ("dgx2", "dgx3", "dgx4")}
    waves = FILTERS["spark_image_relay_waves"](RING, LAYERS, facts)
    assert waves[1][0]["from_relay"] is True and waves[0][0]["keep_relay"] is True


@pytest.mark.parametrize("waves, facts, message", [
    ("dgx1", {}, "a list of lists"),
    (RING, [], "must map each host"),
    ([[{"to": "dgx2"}]], {}, "every wave must be"),
])
def test_filter_rejects_bad_input(waves: Any, facts: Any, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["spark_image_relay_waves"](waves, LAYERS, facts)
