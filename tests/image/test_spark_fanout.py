"""spark_fanout: waves over the cabled fabric, from the rendered tp3 and tp4 plans, and over switch rails."""
from __future__ import annotations

import copy
import json
from typing import Any, Dict, List

import pytest
from conftest import FIXTURES
from testlib import load_source

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_fanout import (
    FanoutError, cable_addresses, delivery_paths, fabric_addresses, fanout_waves, possible_senders, pull_layers,
    pull_progress_lines, registry_waves, vetted_holders)

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



# --- holders are hashed before they send ----------------------------------------------------------

def test_possible_senders_are_the_holders_cabled_to_a_rank_that_needs_data() -> None:
    # Ring dgx1-dgx2-dgx3-dgx4-dgx1: dgx3 is cabled to dgx2 and dgx4, dgx1 is the source.
    assert possible_senders(RING, "dgx1", ["dgx2"], ["dgx1", "dgx3", "dgx4"]) == ["dgx3"]
    assert possible_senders(RING, "dgx1", ["dgx2", "dgx4"], ["dgx3"]) == ["dgx3"]
    assert possible_senders(RING, "dgx1", ["dgx3"], ["dgx2", "dgx4"]) == ["dgx2", "dgx4"]
    assert possible_senders(RING, "dgx1", [], ["dgx2", "dgx3"]) == []
    assert possible_senders(TRIANGLE, "dgx1", ["dgx3"], ["dgx2"]) == ["dgx2"]


CORRUPT = {"ok": False, "problems": [{"path": "model-00001-of-00048.safetensors",
                                      "problem": "sha256 differs from the manifest (size matches)"}]}


def test_a_holder_whose_hash_fails_is_named_and_never_sends() -> None:
    # dgx2 needs data; dgx3 and dgx4 hold it by size, and dgx3 (cabled to dgx2) would be its sender.
    assert possible_senders(RING, "dgx1", ["dgx2"], ["dgx3", "dgx4"]) == ["dgx3"]
    holders, refused = vetted_holders(["dgx3", "dgx4"], ["dgx3"], {"dgx3": CORRUPT})
    assert holders == ["dgx4"]
    assert refused == {"dgx3": "dgx3 (holder, not sent from): model-00001-of-00048.safetensors: sha256 differs "
                                "from the manifest (size matches); it is synced again from a verified holder"}
    waves = fanout_waves(RING, "dgx1", ["dgx2", *refused], holders=holders)
    assert all(t["from"] != "dgx3" for wave in waves for t in wave)
    assert {t["to"] for wave in waves for t in wave} == {"dgx2", "dgx3"}


def test_a_sender_without_a_hashed_check_is_not_trusted() -> None:
    holders, refused = vetted_holders(["dgx2", "dgx3"], ["dgx2", "dgx3"],
                                      {"dgx2": {"ok": True, "problems": []}, "dgx3": {"skipped": True}})
    assert holders == ["dgx2"] and refused == {"dgx3": "dgx3 (holder, not sent from): its files were not hashed"
                                                       "; it is synced again from a verified holder"}
    assert vetted_holders(["dgx2"], [], {}) == (["dgx2"], {})


# --- progress_lines: one line per transfer of a wave ---------------------------------------------------------

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_fanout import progress_lines  # noqa: E402

GIB = 1024 ** 3
WAVE = [{"from": "dgx1", "to": "dgx2", "address": "10.12.1.2"}, {"from": "dgx1", "to": "dgx3", "address": "10.13.1.3"}]
ENDED = {"dgx2": False, "dgx3": True}


@pytest.mark.parametrize("arrived, total, previous, interval, expected", [
    ({"dgx2": 12 * GIB, "dgx3": 160 * GIB}, 160 * GIB, None, 0,
     ["dgx1 -> dgx2: 12.0 GiB of 160.0 GiB (7.5 %), sending", "dgx1 -> dgx3: 160.0 GiB of 160.0 GiB (100.0 %), ended"]),
    ({"dgx2": 12 * GIB, "dgx3": 160 * GIB}, 160 * GIB, {"dgx2": 9 * GIB, "dgx3": 157 * GIB}, 30,
     ["dgx1 -> dgx2: 12.0 GiB of 160.0 GiB (7.5 %), 102.4 MiB/s, sending",
      "dgx1 -> dgx3: 160.0 GiB of 160.0 GiB (100.0 %), 102.4 MiB/s, ended"]),
    # Unknown total (0): bytes only. Temporary files can take a receiver past the total: never above 100 %.
    ({"dgx2": 1536, "dgx3": 0}, 0, None, 0, ["dgx1 -> dgx2: 1.5 KiB, sending", "dgx1 -> dgx3: 0 B, ended"]),
    # Each transfer may carry its own total (thin archives differ by receiver); a receiver not named: unknown.
    ({"dgx2": GIB, "dgx3": GIB}, {"dgx2": 4 * GIB}, None, 0,
     ["dgx1 -> dgx2: 1.0 GiB of 4.0 GiB (25.0 %), sending", "dgx1 -> dgx3: 1.0 GiB, ended"]),
    ({"dgx2": 2 * GIB, "dgx3": GIB}, GIB, {"dgx2": 3 * GIB}, 10,
     ["dgx1 -> dgx2: 2.0 GiB of 1.0 GiB (100.0 %), 0 B/s, sending", "dgx1 -> dgx3: 1.0 GiB of 1.0 GiB (100.0 %), ended"]),
])
def test_progress_lines_name_each_cable_its_bytes_rate_and_state(arrived: Dict[str, int], total: int,
                                                                 previous: Any, interval: int,
                                                                 expected: List[str]) -> None:
    lines = progress_lines(WAVE, arrived, ENDED, total, 95.7, previous, interval)
    assert lines == ["95 s since the wave started", *expected]


@pytest.mark.parametrize("arrived, total, elapsed, message", [
    ({"dgx2": 1}, 10, 1, "no byte count for the receiver dgx3 of dgx1"),
    ({"dgx2": -1, "dgx3": 0}, 10, 1, "bytes of dgx2 must be a number of bytes >= 0, got -1"),
    ({"dgx2": "12", "dgx3": 0}, 10, 1, "bytes of dgx2 must be a number of bytes >= 0, got '12'"),
    ({"dgx2": 1, "dgx3": 1}, -5, 1, "total bytes of dgx2 must be a number of bytes >= 0, got -5"),
    ({"dgx2": 1, "dgx3": 1}, {"dgx3": -5}, 1, "total bytes of dgx3 must be a number of bytes >= 0, got -5"),
    ({"dgx2": 1, "dgx3": 1}, 10, -1, "elapsed_s must be seconds >= 0, got -1"),
])
def test_progress_lines_refuse_what_is_not_a_count(arrived: Dict[str, Any], total: Any, elapsed: Any,
                                                   message: str) -> None:
    with pytest.raises(FanoutError, match=message):
        progress_lines(WAVE, arrived, ENDED, total, elapsed)


def test_the_filter_wraps_errors_and_refuses_a_wave_that_is_not_a_list() -> None:
    from ansible.errors import AnsibleFilterError
    from ansible_collections.sparkfleet.spark.plugins.filter.sparkfleet_image import spark_fanout_progress
    assert spark_fanout_progress(WAVE, {"dgx2": 0, "dgx3": 0}, ENDED, 0, 0)[1] == "dgx1 -> dgx2: 0 B, sending"
    with pytest.raises(AnsibleFilterError, match="wave must be a list"):
        spark_fanout_progress("dgx1", {}, ENDED, 0, 0)
    with pytest.raises(AnsibleFilterError, match="ended must map each receiver"):
        spark_fanout_progress(WAVE, {}, [], 0, 0)
    with pytest.raises(AnsibleFilterError, match="no byte count for the receiver dgx2"):
        spark_fanout_progress(WAVE, {}, ENDED, 0, 0)


def _switched(hosts: List[str], first_id: int = 1) -> List[Dict[str, Any]]:
    raw = [{"host": h, "spark_rank": r, "ansible_host": f"10.0.1.{71 + r}", "spark_topology": "switched",
            "spark_node_id": first_id + r} for r, h in enumerate(hosts)]
    return load_source("filter", "sparkfleet_fabric").spark_plan(raw)["nodes"]


def test_a_switch_rail_links_every_node_to_every_other_at_its_own_rail_address() -> None:
    links = cable_addresses(_switched(["dgx1", "dgx2", "dgx3"]))
    assert links[("dgx1", "dgx3")] == ["10.100.1.3", "10.101.1.3", "10.100.2.3", "10.101.2.3"]
    assert links[("dgx3", "dgx2")] == ["10.100.1.2", "10.101.1.2", "10.100.2.2", "10.101.2.2"]
    assert len(links) == 6


def test_a_switch_is_one_wave_from_the_source() -> None:
    waves = fanout_waves(_switched(["dgx1", "dgx2", "dgx3", "dgx4"]), "dgx1", ["dgx2", "dgx3", "dgx4"])
    assert edges(waves) == [["dgx1->dgx2@10.100.1.2", "dgx1->dgx3@10.100.1.3", "dgx1->dgx4@10.100.1.4"]]


def test_two_groups_on_one_switch_reach_each_other_over_the_rails() -> None:
    site = _switched(["dgx1", "dgx2"]) + _switched(["dgx3", "dgx4"], first_id=3)
    waves = fanout_waves(site, "dgx1", ["dgx2", "dgx3", "dgx4"], holders=["dgx2"])
    assert edges(waves) == [["dgx1->dgx3@10.100.1.3", "dgx2->dgx4@10.100.1.4"]]


# --- registry waves ------------------------------------------------------------------------------

def pulls_of(result: Dict[str, Any]) -> List[List[str]]:
    return [[f"{p['from']}->{p['to']}@{p['address']}" for p in wave["pulls"]] for wave in result["waves"]]


def test_a_triangle_pulls_from_the_head_at_the_heads_own_cable_address() -> None:
    result = registry_waves(TRIANGLE, "dgx1", ["dgx3", "dgx2"])
    assert pulls_of(result) == [["dgx1->dgx2@10.12.1.1", "dgx1->dgx3@10.13.1.1"]]
    assert result["waves"][0]["registries"] == [{"host": "dgx1", "listen": ["10.12.1.1", "10.13.1.1"]}]
    assert result["stream"] == []
    assert result["servers"] == {"dgx1": ["10.12.1.1", "10.13.1.1"]}
    assert result["names"] == {"dgx1": ["10.12.1.1", "10.13.1.1", "10.12.2.1", "10.13.2.1"]}
    assert result["clients"] == {"dgx2": ["10.12.1.1"], "dgx3": ["10.13.1.1"]}


def test_a_ring_pulls_the_non_neighbour_from_a_rank_that_pulled_first() -> None:
    result = registry_waves(RING, "dgx1", ["dgx2", "dgx3", "dgx4"])
    assert pulls_of(result) == [["dgx1->dgx2@10.12.1.1", "dgx1->dgx4@10.14.1.1"], ["dgx2->dgx3@10.23.1.2"]]
    assert result["waves"][1]["registries"] == [{"host": "dgx2", "listen": ["10.23.1.2"]}]
    # every registry of every wave is set up at once: dgx2's before it pulled from dgx1's
    assert result["servers"] == {"dgx1": ["10.12.1.1", "10.14.1.1"], "dgx2": ["10.23.1.2"]}
    assert result["clients"] == {"dgx2": ["10.12.1.1"], "dgx4": ["10.14.1.1"], "dgx3": ["10.23.1.2"]}


def test_holders_serve_from_their_own_registry() -> None:
    result = registry_waves(RING, "dgx1", ["dgx2", "dgx4"], holders=["dgx3"])
    assert pulls_of(result) == [["dgx1->dgx2@10.12.1.1", "dgx3->dgx4@10.34.1.3"]]
    assert [r["host"] for r in result["waves"][0]["registries"]] == ["dgx1", "dgx3"]


def test_a_switch_pulls_every_rank_over_the_first_rail_at_one_address() -> None:
    result = registry_waves(_switched(["dgx1", "dgx2", "dgx3", "dgx4"]), "dgx1", ["dgx2", "dgx3", "dgx4"])
    assert [p["address"] for p in result["waves"][0]["pulls"]] == ["10.100.1.1"] * 3
    assert result["waves"][0]["registries"] == [{"host": "dgx1", "listen": ["10.100.1.1"]}]


def test_management_transfers_stay_streams() -> None:
    cut = copy.deepcopy(TRIANGLE)
    for node in cut:  # dgx3 loses both of its cables
        node["interfaces"] = [i for i in node["interfaces"] if "dgx3" not in (node["host"], i["peer_host"])]
    result = registry_waves(cut, "dgx1", ["dgx2", "dgx3"], management_fallback=True)
    assert pulls_of(result) == [["dgx1->dgx2@10.12.1.1"]]
    assert edges(result["stream"]) == [["dgx1->dgx3@10.0.1.73"]]
    off = registry_waves(RING, "controller", ["dgx2"], management_fallback=True)
    assert off["waves"] == [] and edges(off["stream"]) == [["controller->dgx2@10.0.1.72"]]


def test_nothing_to_send_is_no_wave() -> None:
    assert registry_waves(RING, "dgx1", []) == {"waves": [], "stream": [], "servers": {}, "names": {}, "clients": {}}


def test_registry_waves_refuse_what_the_fanout_refuses() -> None:
    with pytest.raises(FanoutError, match="^source controller is not on the fabric"):
        registry_waves(RING, "controller", ["dgx2"])
    with pytest.raises(FanoutError, match="^fan-out targets not in the fabric plan: dgx9$"):
        registry_waves(RING, "dgx1", ["dgx9"])


def test_fabric_addresses_are_every_address_of_the_host_in_path_order() -> None:
    assert fabric_addresses(TRIANGLE, "dgx1") == ["10.12.1.1", "10.13.1.1", "10.12.2.1", "10.13.2.1"]
    with pytest.raises(FanoutError, match="^dgx9 is not in the fabric plan$"):
        fabric_addresses(TRIANGLE, "dgx9")


def test_delivery_paths_name_each_ranks_way() -> None:
    result = registry_waves(RING, "dgx1", ["dgx2", "dgx3", "dgx4"])
    assert delivery_paths(["dgx1"], [], result["waves"], result["stream"], 5000) == [
        "dgx1: held it already",
        "dgx2: pulled by digest from the registry on dgx1 at 10.12.1.1:5000 (fabric, wave 1)",
        "dgx3: pulled by digest from the registry on dgx2 at 10.23.1.2:5000 (fabric, wave 2)",
        "dgx4: pulled by digest from the registry on dgx1 at 10.14.1.1:5000 (fabric, wave 1)",
    ]
    streamed = fanout_waves(TRIANGLE, "dgx1", ["dgx3"])
    assert delivery_paths([], ["dgx2"], [], streamed, None) == [
        "dgx2: held it under another name, tagged", "dgx3: streamed from dgx1 to 10.13.1.3 (fabric, wave 1)"]


# `docker pull` without a terminal: one status line per layer and change (Docker 20.10, the lab's engine).
PULL_OUTPUT = """10.12.1.1:5000/sparkfleet/vllm-ds41f@sha256:5d1c: Pulling from sparkfleet/vllm-ds41f
9fc8a1bd3d37: Already exists
a51f8c2f6d10: Already exists
3c2cba919283: Pulling fs layer
5e3f2b8d4f7a: Pulling fs layer
0b3f2c1e7d9a: Pulling fs layer
5e3f2b8d4f7a: Waiting
3c2cba919283: Verifying Checksum
3c2cba919283: Download complete
3c2cba919283: Pull complete
0b3f2c1e7d9a: Download complete""".splitlines()


def test_pull_layers_counts_the_last_status_of_each_layer() -> None:
    assert pull_layers(PULL_OUTPUT) == {"layers": 5, "held": 2, "pulled": 1}
    done = PULL_OUTPUT + ["5e3f2b8d4f7a: Pull complete", "0b3f2c1e7d9a: Pull complete", "Digest: sha256:5d1c",
                          "Status: Downloaded newer image for 10.12.1.1:5000/sparkfleet/vllm-ds41f@sha256:5d1c"]
    assert pull_layers(done) == {"layers": 5, "held": 2, "pulled": 3}
    assert pull_layers([]) == {"layers": 0, "held": 0, "pulled": 0}


def test_pull_progress_lines_follow_each_receiver_of_the_wave() -> None:
    wave = registry_waves(RING, "dgx1", ["dgx2", "dgx4"])["waves"][0]["pulls"]
    lines = pull_progress_lines(wave, {"dgx2": PULL_OUTPUT, "dgx4": []}, {"dgx4": True}, 12.7)
    assert lines == ["12 s since the wave started",
                     "dgx1 -> dgx2: 1 of 3 layers pulled (2 held already), pulling",
                     "dgx1 -> dgx4: 0 of 0 layers pulled, ended"]
    with pytest.raises(FanoutError, match="^no pull output for the receiver dgx4 of dgx1$"):
        pull_progress_lines(wave, {"dgx2": []}, {}, 1)
    with pytest.raises(FanoutError, match="^elapsed_s must be seconds >= 0"):
        pull_progress_lines(wave, {}, {}, -1)
