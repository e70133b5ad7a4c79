"""Host stage decisions: the trial verdict that gates the 64 KiB pin, apt candidates for unconfirmed driver
pins, and the daemon.json merge. Fixtures are in the tools' exact formats (tests/unit/fixtures/host/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

F = load_source("filter", "sparkfleet_host_gates")
FIXTURES = Path(__file__).parent / "fixtures" / "host"
PINNED_UVM = "34683B82C2D3339BBD2EEC9"  # reference §8.6: patched 0.2.0
STOCK_UVM = "09F2A78862D06017E9324B6"
TRIAL_UVM = "2A94659FBB6D360FF27D9A9"

GOOD = {
    "kernel_release": "7.0.0-1019-nvidia-64k", "page_size": 65536, "kho_off": True, "driver_running": "580.178.04",
    "uvm_srcversion": PINNED_UVM, "uvm_packing": "Y", "secure_boot": True, "mok_enrolled": True, "unavailable": {},
}
EXPECT = {"release": "7.0.0-1019-nvidia-64k", "page_size": "65536", "driver_version": "580.178.04",
          "device_policy": "require", "memory_saver_required": True, "uvm_srcversion": PINNED_UVM}


def facts(**changes: object) -> dict:
    return {**GOOD, **changes}


# Each row: what the boot shows, and the problem text that must stop the promotion (None: it passes).
VERDICT_TABLE = [
    ("all pinned", {}, {}, None),
    ("4 KiB kernel came back", {"kernel_release": "7.0.0-1019-nvidia", "page_size": 4096}, {}, "running 7.0.0-1019-nvidia"),
    ("page size wrong", {"page_size": 4096}, {}, "page size 4096, expected 65536"),
    ("kho=off missing", {"kho_off": False}, {}, "kho=off missing"),
    ("driver not loaded", {"driver_running": None}, {}, "nvidia driver not loaded"),
    ("other driver", {"driver_running": "580.178.05"}, {}, "nvidia driver 580.178.05, expected 580.178.04"),
    ("stock UVM loaded", {"uvm_srcversion": STOCK_UVM, "uvm_packing": None}, {}, f"srcversion {STOCK_UVM}"),
    ("old trial build", {"uvm_srcversion": TRIAL_UVM}, {}, f"srcversion {TRIAL_UVM}, pinned Memory Saver build"),
    ("packing off", {"uvm_packing": "N"}, {}, "uvm_pack_sysmem_leaf_tables=N, expected Y"),
    ("UVM absent, MOK missed",
     {"uvm_srcversion": None, "uvm_packing": None, "mok_enrolled": False,
      "unavailable": {"uvm_srcversion": "nvidia_uvm not loaded"}}, {}, "fleet MOK is not enrolled"),
    ("UVM absent, enrolled", {"uvm_srcversion": None, "uvm_packing": None}, {}, "nvidia_uvm is not loaded"),
    ("saver not required", {"uvm_srcversion": STOCK_UVM, "uvm_packing": None}, {"memory_saver_required": "false"}, None),
    ("device policy available", {"driver_running": None, "uvm_srcversion": None}, {"device_policy": "available"}, None),
]


@pytest.mark.parametrize("name,changes,expect,problem", VERDICT_TABLE, ids=[row[0] for row in VERDICT_TABLE])
def test_trial_verdict_table(name: str, changes: dict, expect: dict, problem: str | None) -> None:
    verdict = F.spark_trial_verdict(facts(**changes), {**EXPECT, **expect})
    if problem is None:
        assert verdict["passed"], verdict
        assert verdict["problems"] == []
    else:
        assert not verdict["passed"]
        assert any(problem in text for text in verdict["problems"]), verdict["problems"]


def test_trial_verdict_names_what_it_did_not_check() -> None:
    verdict = F.spark_trial_verdict(facts(driver_running=None), {**EXPECT, "device_policy": "available"})
    assert "loaded NVIDIA driver" in verdict["not_applicable"]
    assert "loaded Memory Saver (srcversion, packing)" in verdict["not_applicable"]
    assert verdict["checked"] == ["release", "page size", "kho=off"]
    full = F.spark_trial_verdict(facts(), EXPECT)
    assert full["checked"] == ["release", "page size", "kho=off", "driver", "Memory Saver"]


def test_trial_verdict_refuses_incomplete_input() -> None:
    with pytest.raises(AnsibleFilterError, match="lacks uvm_srcversion"):
        F.spark_trial_verdict(facts(), {k: v for k, v in EXPECT.items() if k != "uvm_srcversion"})
    with pytest.raises(AnsibleFilterError, match="device_policy must be"):
        F.spark_trial_verdict(facts(), {**EXPECT, "device_policy": "maybe"})
    with pytest.raises(AnsibleFilterError, match="memory_saver_required must be true or false"):
        F.spark_trial_verdict(facts(), {**EXPECT, "memory_saver_required": "sometimes"})


POLICY_TEXT = (FIXTURES / "apt_cache_policy_driver.txt").read_text()


def test_apt_policy_parses_installed_candidate_and_table() -> None:
    policy = F.spark_apt_policy(POLICY_TEXT)
    driver = policy["nvidia-driver-580-open"]
    assert driver["installed"] == "580.178.04-0ubuntu0.24.04.1"
    assert driver["candidate"] == "580.178.05-0ubuntu0.24.04.1"
    assert [v["version"] for v in driver["versions"]] == [
        "580.178.05-0ubuntu0.24.04.1", "580.178.04-0ubuntu0.24.04.1", "580.95.05-0ubuntu0.24.04.2"]
    assert [v["installed"] for v in driver["versions"]] == [False, True, False]
    assert driver["versions"][1]["sources"][-1] == "/var/lib/dpkg/status"
    source = policy["nvidia-kernel-source-580-open"]
    assert source["installed"] is None
    assert source["versions"][1]["priority"] == 1001


def test_unconfirmed_pins_list_what_apt_offers_and_pick_nothing() -> None:
    pins = {"nvidia-driver-580-open": None, "nvidia-kernel-source-580-open": "580.178.04-0ubuntu0.24.04.1",
            "nvidia-imaginary-580": ""}
    found = F.spark_unconfirmed_pins(pins, F.spark_apt_policy(POLICY_TEXT), "580.178.04", "spark-a")
    assert [e["name"] for e in found] == ["nvidia-driver-580-open", "nvidia-imaginary-580"]
    driver = found[0]
    assert driver["known"] and driver["installed"] == "580.178.04-0ubuntu0.24.04.1"
    assert [o["carries_driver"] for o in driver["offered"]] == [False, True, False]
    assert found[1] == {"name": "nvidia-imaginary-580", "known": False, "installed": None, "offered": []}
    message = F.spark_unconfirmed_pins_message(found, "spark-a", "spark_nvidia_driver_packages")
    assert message.startswith("spark-a: the reference does not confirm")
    assert "580.178.04-0ubuntu0.24.04.1 (driver match)" in message
    assert "580.178.05-0ubuntu0.24.04.1," in message
    assert "nvidia-imaginary-580: apt knows no such package" in message


def test_confirmed_pins_need_no_apt_lookup() -> None:
    assert F.spark_unconfirmed_pins({"a": "1.0-1"}, {}, "1.0") == []
    with pytest.raises(AnsibleFilterError, match="spark-a: pinned version of a must be a string or empty"):
        F.spark_unconfirmed_pins({"a": 580}, {}, "580", "spark-a")


DAEMON_TEXT = (FIXTURES / "docker_daemon_dgx.json").read_text()
MANAGED = {"default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1, "Soft": -1}},
           "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}}


def test_daemon_json_merge_keeps_what_we_do_not_manage() -> None:
    merged = json.loads(F.spark_docker_daemon_json(DAEMON_TEXT, MANAGED, "spark-a"))
    assert merged["data-root"] == "/srv/docker"
    assert merged["default-runtime"] == "nvidia"
    assert merged["registry-mirrors"] == ["https://mirror.example.internal"]
    assert merged["runtimes"]["crun"] == {"path": "/usr/bin/crun"}
    assert merged["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime", "runtimeArgs": []}
    assert merged["default-ulimits"]["memlock"] == {"Name": "memlock", "Hard": -1, "Soft": -1}
    assert list(merged)[:4] == ["data-root", "default-runtime", "registry-mirrors", "runtimes"]


def test_daemon_json_second_pass_returns_the_file_unchanged() -> None:
    once = F.spark_docker_daemon_json(DAEMON_TEXT, MANAGED)
    assert F.spark_docker_daemon_json(once, MANAGED) == once
    hand_formatted = '{"default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1, "Soft": -1}},\n' \
                     ' "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}}'
    assert F.spark_docker_daemon_json(hand_formatted, MANAGED) == hand_formatted


def test_daemon_json_missing_or_empty_file_starts_empty() -> None:
    for current in (None, "", "\n"):
        assert json.loads(F.spark_docker_daemon_json(current, MANAGED)) == MANAGED


@pytest.mark.parametrize("text,match", [
    ("{not json", "daemon.json is not valid JSON"),
    ("[1, 2]", "holds a JSON list, not an object"),
    ('{"runtimes": "nvidia"}', "runtimes is a str in the file"),
])
def test_daemon_json_refuses_a_file_it_cannot_merge(text: str, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=f"spark-a: .*{match}"):
        F.spark_docker_daemon_json(text, MANAGED, "spark-a", "/etc/docker/daemon.json")
