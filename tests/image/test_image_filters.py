"""sparkfleet_image filters: the same tag, labels and verdicts as module_utils/spark_image, Ansible errors."""
from __future__ import annotations

import json
import subprocess
from typing import Any, Dict

import pytest
from ansible.errors import AnsibleFilterError
from testlib import ROOT, load_source

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import content_tag, identity_labels

FILTERS = load_source("filter", "sparkfleet_image").FilterModule().filters()
LOCK = [
    {"name": "vllm", "repository": "/srv/vllm", "commit": "c" * 40, "patches": ["vllm/0001.patch"],
     "patchset_sha256": "1" * 64, "tree": "a" * 40},
    {"name": "b12x", "repository": "/srv/b12x", "commit": "d" * 40, "patches": [],
     "patchset_sha256": "2" * 64, "tree": "b" * 40},
]
ID = "sha256:" + "e" * 64


def test_tag_and_labels_match_the_module_utils() -> None:
    trees = {"vllm": "a" * 40, "b12x": "b" * 40}
    assert FILTERS["spark_image_tag"](LOCK, "sparkfleet/vllm", "r6") == content_tag("sparkfleet/vllm", "r6", trees)
    assert FILTERS["spark_image_labels"](LOCK, "r6") == identity_labels("r6", trees, {"vllm": "1" * 64,
                                                                                    "b12x": "2" * 64})


def test_errors_are_filter_errors_naming_the_entry() -> None:
    with pytest.raises(AnsibleFilterError, match=r"spark_image_upstreams\[1\] \(b12x\): field 'tree'"):
        FILTERS["spark_image_tag"]([LOCK[0], {**LOCK[1], "tree": "short"}], "sparkfleet/vllm", "r6")
    with pytest.raises(AnsibleFilterError, match="spark_image_upstreams must be a list, got str"):
        FILTERS["spark_image_labels"]("vllm", "r6")
    with pytest.raises(AnsibleFilterError, match="release 'r 6'"):
        FILTERS["spark_image_tag"](LOCK, "sparkfleet/vllm", "r 6")


def test_plan_and_mismatches() -> None:
    nodes: Dict[str, Any] = {
        "dgx1": {"present": True, "id": ID, "labels": {"l": "1"}},
        "dgx2": {"present": False, "id_present": False},
        "dgx3": {"present": True, "id": "sha256:" + "f" * 64, "labels": {"l": "1"}},
    }
    plan = FILTERS["spark_image_plan"](nodes, "sparkfleet/vllm:r6-x", ID)
    assert plan["current"] == ["dgx1"] and plan["send"] == ["dgx2"]
    assert plan["error"].startswith("tag sparkfleet/vllm:r6-x names a different image on 1 node(s)")
    found = FILTERS["spark_image_mismatches"](nodes, ID, {"l": "1"})
    assert [m["node"] for m in found] == ["dgx2", "dgx3"]
    assert FILTERS["spark_image_mismatch_message"](found, "t").startswith("image t differs on 2 node(s) (dgx2, dgx3)")


def test_filters_load_under_ansible() -> None:
    """Ansible finds the collection's filter by FQCN and the filter imports module_utils/spark_image.py."""
    expr = "{{ lock | sparkfleet.spark.spark_image_tag('sparkfleet/vllm', 'r6') }}"
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-m", "debug",
         "-a", f"msg={expr}", "-e", json.dumps({"lock": LOCK})],
        cwd=ROOT, env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin",
                       "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"},
        capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    # profile_tasks (ansible.cfg) prints a timing line around the JSON document.
    document, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("\n{") + 1:])
    result = document["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["msg"] == content_tag("sparkfleet/vllm", "r6", {"vllm": "a" * 40, "b12x": "b" * 40})


def test_registry_filters_take_the_plan_and_name_bad_input() -> None:
    plan = json.loads((ROOT / "tests" / "image" / "fixtures" / "plan-tp4-ring.json").read_text())
    result = FILTERS["spark_registry_waves"](plan, "dgx1", ["dgx2", "dgx3", "dgx4"], ["dgx1"])
    assert [[p["to"] for p in w["pulls"]] for w in result["waves"]] == [["dgx2", "dgx4"], ["dgx3"]]
    assert FILTERS["spark_fabric_addresses"](plan["nodes"], "dgx1")[:2] == ["10.12.1.1", "10.14.1.1"]
    lines = FILTERS["spark_image_paths"]({"current": ["dgx1"], "retag": []}, result["waves"], [], "5000")
    assert lines[1] == "dgx2: pulled by digest from the registry on dgx1 at 10.12.1.1:5000 (fabric, wave 1)"
    with pytest.raises(AnsibleFilterError, match="^source localhost is not on the fabric"):
        FILTERS["spark_registry_waves"](plan, "localhost", ["dgx2"])
    with pytest.raises(AnsibleFilterError, match="^spark_registry_waves: expected the fabric plan"):
        FILTERS["spark_registry_waves"]("dgx1", "dgx1", ["dgx2"])
    with pytest.raises(AnsibleFilterError, match="^spark_image_paths: expected the spark_image_plan"):
        FILTERS["spark_image_paths"]([], [], [])
    with pytest.raises(AnsibleFilterError, match="^spark_image_paths: stream must be a list of waves"):
        FILTERS["spark_image_paths"]({}, [], "dgx2")
    progress = FILTERS["spark_pull_progress"](result["waves"][1], {"dgx3": ["0b3f2c1e7d9a: Pull complete"]},
                                              {"dgx3": True}, 3)
    assert progress == ["3 s since the wave started", "dgx2 -> dgx3: 1 of 1 layers pulled, ended"]
    with pytest.raises(AnsibleFilterError, match="^spark_pull_progress: wave must be one wave"):
        FILTERS["spark_pull_progress"]([], {}, {}, 0)
    with pytest.raises(AnsibleFilterError, match="^spark_pull_progress: ended must map each receiver"):
        FILTERS["spark_pull_progress"](result["waves"][1], {}, [], 0)


def test_fanout_waves_filter_takes_the_plan() -> None:
    plan = json.loads((ROOT / "tests" / "image" / "fixtures" / "plan-tp4-ring.json").read_text())
    waves = FILTERS["spark_fanout_waves"](plan, "dgx1", ["dgx2", "dgx3", "dgx4"])
    assert [[t["to"] for t in wave] for wave in waves] == [["dgx2", "dgx4"], ["dgx3"]]
    assert FILTERS["spark_fanout_waves"](plan["nodes"], "dgx1", ["dgx3"], ["dgx2"])[0][0]["from"] == "dgx2"
    with pytest.raises(AnsibleFilterError, match="source controller is not on the fabric"):
        FILTERS["spark_fanout_waves"](plan, "controller", ["dgx2"])
    assert FILTERS["spark_fanout_waves"](plan, "controller", ["dgx2"], [], True)[0][0]["network"] == "management"
