"""spark_image (tag, labels, fleet comparison, distribution plan, layer reuse) and spark_image_identity."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Tuple

import pytest
from conftest import FIXTURES

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_image import (
    ImageError, conflict_message, content_tag, distribution_plan, identity_digest, identity_labels, image_mismatches,
    is_missing_image, lock_identity, mismatch_message, parse_inspect, save_members_to_skip, shared_prefix)

TREES = {"vllm": "a00a6b07" + "0" * 32, "b12x": "1a647a31" + "1" * 32, "nccl": "6af10aa7" + "2" * 32}
PATCHSETS = {"vllm": "3" * 64, "b12x": "4" * 64, "nccl": "5" * 64}
LABELLED = json.loads((FIXTURES / "docker-image-inspect-labelled.json").read_text())
BASE = json.loads((FIXTURES / "docker-image-inspect-base.json").read_text())
ABSENT_STDERR = (FIXTURES / "docker-image-inspect-absent.stderr").read_text()
LABELLED_ID = LABELLED[0]["Id"]
LABELLED_TAG = LABELLED[0]["RepoTags"][0]


# --- identity ----------------------------------------------------------------------------------

def test_content_tag_is_release_plus_digest_of_sorted_name_tree_lines() -> None:
    lines = f"b12x={TREES['b12x']}\nnccl={TREES['nccl']}\nvllm={TREES['vllm']}\n"
    digest = hashlib.sha256(lines.encode()).hexdigest()
    assert identity_digest(TREES) == digest
    assert content_tag("sparkfleet/vllm-ds41f", "r6d", TREES) == f"sparkfleet/vllm-ds41f:r6d-{digest[:12]}"
    assert content_tag("sparkfleet/vllm-ds41f", "r6d", dict(reversed(list(TREES.items())))) == \
        content_tag("sparkfleet/vllm-ds41f", "r6d", TREES)


def test_content_tag_changes_with_any_tree_or_release() -> None:
    base = content_tag("localhost:5000/spark/vllm", "r6", TREES)
    assert content_tag("localhost:5000/spark/vllm", "r6", {**TREES, "nccl": "7" * 40}) != base
    assert content_tag("localhost:5000/spark/vllm", "r6", {**TREES, "extra": "8" * 40}) != base
    assert content_tag("localhost:5000/spark/vllm", "r7", TREES).split(":")[-1].endswith(base.split("-")[-1])


@pytest.mark.parametrize(("repository", "release", "trees", "message"), [
    ("Spark/VLLM", "r6", TREES, "image repository 'Spark/VLLM' is not a valid Docker repository name"),
    ("spark/vllm", "r6:latest", TREES, "release 'r6:latest'"),
    ("spark/vllm", "", TREES, "release ''"),
    ("spark/vllm", "r6", {}, "no upstream trees"),
    ("spark/vllm", "r6", {"vllm": "abc"}, "upstream vllm: tree 'abc' is not a full hex object id"),
    ("spark/vllm", "r6", {"VLLM": "a" * 40}, "upstream name 'VLLM'"),
])
def test_content_tag_rejects_bad_input(repository: str, release: str, trees: Dict[str, str], message: str) -> None:
    with pytest.raises(ImageError) as info:
        content_tag(repository, release, trees)
    assert message in str(info.value)


def test_identity_labels() -> None:
    labels = identity_labels("r6d", TREES, PATCHSETS)
    assert labels == {
        "org.sparkfleet.release": "r6d", "org.sparkfleet.identity": identity_digest(TREES),
        "org.sparkfleet.tree.vllm": TREES["vllm"], "org.sparkfleet.tree.b12x": TREES["b12x"],
        "org.sparkfleet.tree.nccl": TREES["nccl"], "org.sparkfleet.patchset.vllm": "3" * 64,
        "org.sparkfleet.patchset.b12x": "4" * 64, "org.sparkfleet.patchset.nccl": "5" * 64,
    }


def test_lock_identity_reads_and_validates_the_lock() -> None:
    lock = [{"name": n, "tree": TREES[n], "patchset_sha256": PATCHSETS[n], "commit": "c" * 40} for n in TREES]
    assert lock_identity(lock) == (TREES, PATCHSETS)
    with pytest.raises(ImageError, match=r"spark_image_upstreams\[1\]: upstream vllm is listed twice"):
        lock_identity([lock[0], lock[0]])
    with pytest.raises(ImageError, match=r"spark_image_upstreams\[0\] \(vllm\): field 'tree'"):
        lock_identity([{**lock[0], "tree": None}])
    with pytest.raises(ImageError, match=r"spark_image_upstreams\[0\] \(vllm\): field 'patchset_sha256'"):
        lock_identity([{**lock[0], "patchset_sha256": "x"}])


# --- inspect parsing (captured from Docker 20.10.24) -------------------------------------------

def test_parse_inspect_of_captured_images() -> None:
    labelled = parse_inspect(json.dumps(LABELLED))[0]
    assert labelled["id"] == "sha256:468fdb259ba940a886f956b32fa8a14f89bb0cc78621912661754dc0b1917f82"
    assert labelled["labels"]["org.sparkfleet.release"] == "lab1"
    assert len(labelled["layers"]) == 3 and all(layer.startswith("sha256:") for layer in labelled["layers"])
    base = parse_inspect(json.dumps(BASE))[0]
    assert base["labels"] == {}  # Config.Labels is null on an unlabelled image
    assert base["layers"] == labelled["layers"][:1]
    assert is_missing_image(1, ABSENT_STDERR)
    assert not is_missing_image(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.")
    with pytest.raises(ImageError, match="not JSON"):
        parse_inspect("Error: oops")


# --- fleet comparison --------------------------------------------------------------------------

ID = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
EXPECTED = identity_labels("r6d", TREES, PATCHSETS)


def facts(present: bool, image_id: str | None = ID, labels: Dict[str, str] | None = None,
          id_present: bool | None = None) -> Dict[str, Any]:
    return {"present": present, "id": image_id if present else None,
            "labels": EXPECTED if labels is None else labels, "layers": [], "id_present": id_present}


def test_image_mismatches_names_each_node_and_what_differs() -> None:
    nodes = {
        "dgx1": facts(True),
        "dgx2": facts(True, OTHER),
        "dgx3": facts(False),
        "dgx4": facts(True, labels={**EXPECTED, "org.sparkfleet.tree.vllm": "9" * 40}),
    }
    del nodes["dgx4"]["labels"]["org.sparkfleet.release"]
    found = image_mismatches(ID, EXPECTED, nodes)
    assert found == [
        {"node": "dgx2", "problems": [f"image ID {OTHER}, expected {ID}"]},
        {"node": "dgx3", "problems": ["image missing"]},
        {"node": "dgx4", "problems": ["label org.sparkfleet.release missing (expected r6d)",
                                      f"label org.sparkfleet.tree.vllm is {'9' * 40}, expected {TREES['vllm']}"]},
    ]
    assert mismatch_message("spark/vllm:r6d-x", found).startswith(
        "image spark/vllm:r6d-x differs on 3 node(s) (dgx2, dgx3, dgx4): dgx2: image ID ")
    assert image_mismatches(ID, EXPECTED, {"dgx1": facts(True)}) == []


def test_distribution_plan_sends_only_to_nodes_without_the_exact_id() -> None:
    nodes = {"dgx1": facts(True), "dgx2": facts(False, id_present=False), "dgx3": facts(False, id_present=True),
             "dgx4": facts(True, OTHER)}
    plan = distribution_plan("spark/vllm:r6d-x", ID, nodes)
    assert (plan["current"], plan["send"], plan["retag"]) == (["dgx1"], ["dgx2"], ["dgx3"])
    assert plan["conflicts"] == [{"node": "dgx4", "id": OTHER}]
    message = conflict_message(plan)
    assert message is not None
    assert message.startswith(f"tag spark/vllm:r6d-x names a different image on 1 node(s) than the builder's {ID}: "
                              f"dgx4 holds {OTHER}. Tags are never overwritten")
    assert conflict_message(distribution_plan("t", ID, {"dgx1": facts(True)})) is None


def test_layer_reuse_depth_and_members_to_skip() -> None:
    mine = ["sha256:1", "sha256:2", "sha256:3"]
    assert shared_prefix(mine, []) == 0
    assert shared_prefix(mine, [["sha256:1"], ["sha256:1", "sha256:2", "sha256:9"], ["sha256:2"]]) == 2
    assert shared_prefix(mine, [["sha256:9", "sha256:2", "sha256:3"]]) == 0  # same layers, other base: no reuse
    base_chain = parse_inspect(json.dumps(BASE))[0]["layers"]
    image_chain = parse_inspect(json.dumps(LABELLED))[0]["layers"]
    depth = shared_prefix(image_chain, [base_chain])
    assert depth == 1
    manifest = json.loads((FIXTURES / "docker-save-manifest.json").read_text())
    assert save_members_to_skip(manifest, depth) == [manifest[0]["Layers"][0]]
    assert save_members_to_skip(manifest, 0) == []
    with pytest.raises(ImageError, match="shares 4 layers but the image has only 3"):
        save_members_to_skip(manifest, 4)


# --- the module against a fake engine answering with the captured output -------------------------

class FakeEngine:
    """Answers docker argv lists like the captured Docker 20.10 CLI did; records every call."""

    def __init__(self, images: List[Dict[str, Any]], broken: bool = False) -> None:
        self.images = images
        self.broken = broken
        self.calls: List[List[str]] = []

    def find(self, ref: str) -> Dict[str, Any] | None:
        return next((i for i in self.images if ref == i["Id"] or ref in (i.get("RepoTags") or [])), None)

    def __call__(self, module: Any, args: List[str], **kwargs: Any) -> Tuple[int, str, str]:
        self.calls.append(list(args))
        if self.broken:
            return 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the daemon running?"
        if args[1:3] == ["image", "ls"]:
            return 0, "".join(i["Id"] + "\n" for i in self.images), ""
        refs = args[4:]
        found = [self.find(r) for r in refs]
        if any(f is None for f in found):
            missing = refs[found.index(None)]
            return 1, "[]\n", ABSENT_STDERR.replace("sparkfleet-fixture/identity:absent", missing)
        return 0, json.dumps(found), ""


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    from ansible.module_utils import basic
    fake = FakeEngine([LABELLED[0], BASE[0]])
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: fake(self, args, **kw))
    return fake


def identity(run_module: Any, check_mode: bool = False, **args: Any) -> Tuple[bool, Dict[str, Any]]:
    return run_module("spark_image_identity", {"docker_bin": "/usr/bin/docker", "node": "dgx2", **args},
                      check_mode=check_mode)


def test_identity_of_a_matching_image(engine: FakeEngine, run_module: Any) -> None:
    labels = LABELLED[0]["Config"]["Labels"]
    failed, result = identity(run_module, image=LABELLED_TAG, expected_id=LABELLED_ID, expected_labels=labels)
    assert not failed and result["changed"] is False
    assert result["present"] and result["id"] == LABELLED_ID and result["matches"] and result["problems"] == []
    assert result["layers"] == LABELLED[0]["RootFS"]["Layers"] and result["id_present"] is True
    assert result["architecture"] == "amd64" and result["os"] == "linux"
    assert engine.calls == [["/usr/bin/docker", "image", "inspect", "--", LABELLED_TAG]]
    assert identity(run_module, check_mode=True, image=LABELLED_TAG, expected_id=LABELLED_ID)[1]["matches"]


def test_identity_reports_and_optionally_fails_on_label_mismatch(engine: FakeEngine, run_module: Any) -> None:
    want = {"org.sparkfleet.release": "lab2", "org.sparkfleet.tree.standin": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}
    failed, result = identity(run_module, image=LABELLED_TAG, expected_labels=want)
    assert not failed and result["problems"] == ["label org.sparkfleet.release is lab1, expected lab2"]
    failed, result = identity(run_module, image=LABELLED_TAG, expected_labels=want, fail_on_mismatch=True)
    assert failed
    assert result["msg"] == f"dgx2: image {LABELLED_TAG}: label org.sparkfleet.release is lab1, expected lab2"


def test_identity_of_a_different_image_under_the_tag(engine: FakeEngine, run_module: Any) -> None:
    failed, result = identity(run_module, image=LABELLED_TAG, expected_id=ID)
    assert not failed and result["present"] and result["id_present"] is False
    assert result["problems"] == [f"image ID {LABELLED_ID}, expected {ID}"]
    assert engine.calls[-1] == ["/usr/bin/docker", "image", "inspect", "--", ID]


def test_identity_absent_tag_but_id_present(engine: FakeEngine, run_module: Any) -> None:
    failed, result = identity(run_module, image="sparkfleet/serve:lab1-000000000000", expected_id=LABELLED_ID)
    assert not failed
    assert (result["present"], result["id"], result["id_present"]) == (False, None, True)
    assert result["problems"] == ["image missing"]
    failed, result = identity(run_module, image="sparkfleet/serve:lab1-000000000000")
    assert not failed and result["present"] is False and result["id_present"] is None and result["problems"] == []


def test_identity_collects_layer_chains(engine: FakeEngine, run_module: Any) -> None:
    failed, result = identity(run_module, image=LABELLED_TAG, collect_layers=True)
    assert not failed
    assert sorted(result["layer_chains"], key=len) == [BASE[0]["RootFS"]["Layers"], LABELLED[0]["RootFS"]["Layers"]]
    assert ["/usr/bin/docker", "image", "ls", "--quiet", "--no-trunc"] in engine.calls


def test_identity_fails_naming_node_when_engine_is_down(monkeypatch: pytest.MonkeyPatch, run_module: Any) -> None:
    from ansible.module_utils import basic
    fake = FakeEngine([], broken=True)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: fake(self, args, **kw))
    failed, result = identity(run_module, image=LABELLED_TAG)
    assert failed
    assert result["msg"].startswith(f"dgx2: docker image inspect {LABELLED_TAG} failed (rc=1): Cannot connect")
