"""The lab's upstream lock (molecule/image) agrees with spark_upstream, and the layer-depth filter."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List

import yaml
from testlib import ROOT, load_source

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_upstream import patchset_sha256

FILTERS = load_source("filter", "sparkfleet_image").FilterModule().filters()
SCRIPT = ROOT / "lab" / "standin" / "sources" / "make-lab-upstreams.sh"


def make_lock(out: Path) -> List[Dict[str, Any]]:
    subprocess.run([str(SCRIPT), str(out), str(ROOT / "lab" / "standin"), str(out / "repos")], check=True,
                   capture_output=True)
    return yaml.safe_load((out / "lock.yml").read_text())["spark_image_upstreams"]


def test_shared_depth_counts_the_longest_leading_run_on_any_one_image() -> None:
    depth = FILTERS["spark_image_shared_depth"]
    assert depth(["a", "b", "c"], [["a", "x", "c"], ["a", "b", "z"]]) == 2
    assert depth(["a", "b"], [["a", "b", "c"]]) == 2
    assert depth(["a", "b"], []) == 0
    assert depth(["a", "b"], [["b", "a"]]) == 0


def test_lab_lock_is_reproducible(tmp_path: Path) -> None:
    def pins(out: Path) -> List[Dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "repository"} for e in make_lock(out)]

    assert pins(tmp_path / "one") == pins(tmp_path / "two")


def test_lab_lock_pins_what_spark_upstream_produces(tmp_path: Path, run_module: Any) -> None:
    out = tmp_path / "lab"
    lock = make_lock(out)
    assert [e["name"] for e in lock] == ["standin", "launcher"]
    assert [len(e["patches"]) for e in lock] == [2, 1]
    for entry in lock:
        patches = [str(out / "patches" / p) for p in entry["patches"]]
        assert patchset_sha256(patches) == entry["patchset_sha256"]
        failed, result = run_module("spark_upstream", {
            "name": entry["name"], "repository": entry["repository"], "commit": entry["commit"],
            "patches": entry["patches"], "patch_dir": str(out / "patches"),
            "patchset_sha256": entry["patchset_sha256"], "tree": entry["tree"], "dest": str(tmp_path / entry["name"])})
        assert not failed, result
        assert result["tree"] == entry["tree"] and result["changed"]
    assert (tmp_path / "standin" / "BUILD-INFO").read_text() == "lab build: sparkfleet image_build\n"
