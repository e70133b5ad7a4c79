"""Serving-image identity: content-addressed tag, identity labels, per-node comparison, distribution plan.

The identity of an image is the set of patched upstream tree ids it was built from (reference §2.4: the image
ID embeds build details and differs between builders, the trees do not). The tag is derived from that set,
the labels carry it, and every rank must hold the same image ID with the same identity labels. A rank that
holds a different image under the tag is an error: it is never silently replaced.

Everything here is pure; `parse_inspect` turns `docker image inspect` JSON into the facts compared here.
Definitions are documented in docs/image-and-model.md.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

LABEL_PREFIX = "org.sparkfleet"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"^{_COMPONENT}(?::[0-9]+)?(?:/{_COMPONENT})*$")
RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
TAG_DIGEST_LENGTH = 12


class ImageError(Exception):
    """Invalid identity input or a fleet state that must stop the run; the message names node and field."""


# --- Identity: tag and labels ------------------------------------------------------------------

def identity_lines(trees: Mapping[str, str]) -> str:
    """`<name>=<tree>\\n` per upstream, sorted by name: the text the identity digest is taken over."""
    return "".join(f"{name}={trees[name]}\n" for name in sorted(trees))


def identity_digest(trees: Mapping[str, str]) -> str:
    return hashlib.sha256(identity_lines(trees).encode("utf-8")).hexdigest()


def content_tag(repository: str, release: str, trees: Mapping[str, str]) -> str:
    """`<repository>:<release>-<sha256(identity_lines)[:12]>`."""
    validate_identity(repository, release, trees)
    return f"{repository}:{release}-{identity_digest(trees)[:TAG_DIGEST_LENGTH]}"


def identity_labels(release: str, trees: Mapping[str, str], patchsets: Mapping[str, str],
                    prefix: str = LABEL_PREFIX) -> Dict[str, str]:
    """Labels that identify the image content; the same on every rebuild of the same lock."""
    labels = {f"{prefix}.release": release, f"{prefix}.identity": identity_digest(trees)}
    labels.update({f"{prefix}.tree.{name}": tree for name, tree in trees.items()})
    labels.update({f"{prefix}.patchset.{name}": digest for name, digest in patchsets.items()})
    return labels


def validate_identity(repository: str, release: str, trees: Mapping[str, str]) -> None:
    if not REPOSITORY.match(repository or ""):
        raise ImageError(f"image repository {repository!r} is not a valid Docker repository name "
                         "(lower-case path components, optional registry host:port)")
    if not RELEASE.match(release or ""):
        raise ImageError(f"release {release!r}: expected letters, digits, '.', '_' or '-' (tag-safe, ≤ 101 chars)")
    if not trees:
        raise ImageError("no upstream trees: the image identity needs at least one upstream")
    for name, tree in trees.items():
        if not NAME.match(name):
            raise ImageError(f"upstream name {name!r}: expected lower-case letters, digits, '.', '_' or '-'")
        if not OBJECT_ID.match(str(tree or "")):
            raise ImageError(f"upstream {name}: tree {tree!r} is not a full hex object id")


def lock_identity(upstreams: Sequence[Mapping[str, Any]]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(trees, patchsets) by upstream name from the lock list; duplicate or unpinned entries are errors."""
    trees: Dict[str, str] = {}
    patchsets: Dict[str, str] = {}
    for index, entry in enumerate(upstreams):
        name = str(entry.get("name") or "")
        if not name:
            raise ImageError(f"spark_image_upstreams[{index}]: field 'name' is empty")
        if name in trees:
            raise ImageError(f"spark_image_upstreams[{index}]: upstream {name} is listed twice")
        tree, patchset = str(entry.get("tree") or ""), str(entry.get("patchset_sha256") or "")
        if not OBJECT_ID.match(tree):
            raise ImageError(f"spark_image_upstreams[{index}] ({name}): field 'tree' must be a full hex object id")
        if not SHA256_HEX.match(patchset):
            raise ImageError(f"spark_image_upstreams[{index}] ({name}): field 'patchset_sha256' must be 64 hex "
                             "digits")
        trees[name], patchsets[name] = tree, patchset
    return trees, patchsets


# --- Facts of one node -------------------------------------------------------------------------

@dataclass
class NodeImage:
    """What one node's engine holds under the tag (and whether it holds the expected ID at all)."""
    present: bool
    id: Optional[str] = None
    labels: Dict[str, str] = field(default_factory=dict)
    layers: List[str] = field(default_factory=list)
    repo_tags: List[str] = field(default_factory=list)
    id_present: Optional[bool] = None

    def as_dict(self) -> Dict[str, Any]:
        return {"present": self.present, "id": self.id, "labels": dict(self.labels), "layers": list(self.layers),
                "repo_tags": list(self.repo_tags), "id_present": self.id_present}


def parse_inspect(text: str) -> List[Dict[str, Any]]:
    """`docker image inspect` output → [{id, labels, layers, repo_tags, architecture, os, size}]."""
    try:
        data = json.loads(text or "[]")
    except ValueError as exc:
        raise ImageError(f"docker image inspect printed something that is not JSON: {exc}") from exc
    if not isinstance(data, list):
        raise ImageError("docker image inspect printed JSON that is not a list")
    return [_inspect_entry(item) for item in data if isinstance(item, dict)]


def _inspect_entry(item: Mapping[str, Any]) -> Dict[str, Any]:
    config = item.get("Config") or {}
    rootfs = item.get("RootFS") or {}
    return {
        "id": item.get("Id"), "labels": dict(config.get("Labels") or {}), "layers": list(rootfs.get("Layers") or []),
        "repo_tags": list(item.get("RepoTags") or []), "architecture": item.get("Architecture"),
        "os": item.get("Os"), "size": item.get("Size"),
    }


def is_missing_image(rc: int, stderr: str) -> bool:
    """Docker's 'no such image' (any case, any version) as opposed to a failing engine."""
    return rc != 0 and "no such image" in stderr.lower()


def node_image(facts: Mapping[str, Any]) -> NodeImage:
    return NodeImage(bool(facts.get("present")), facts.get("id"), dict(facts.get("labels") or {}),
                     list(facts.get("layers") or []), list(facts.get("repo_tags") or []), facts.get("id_present"))


# --- Comparison across nodes -------------------------------------------------------------------

def label_problems(expected: Mapping[str, str], actual: Mapping[str, str]) -> List[str]:
    problems = []
    for key in sorted(expected):
        if key not in actual:
            problems.append(f"label {key} missing (expected {expected[key]})")
        elif actual[key] != expected[key]:
            problems.append(f"label {key} is {actual[key]}, expected {expected[key]}")
    return problems


def node_problems(expected_id: Optional[str], expected_labels: Mapping[str, str], facts: NodeImage) -> List[str]:
    if not facts.present:
        return ["image missing"]
    problems = [] if not expected_id or facts.id == expected_id else [f"image ID {facts.id}, expected {expected_id}"]
    return problems + label_problems(expected_labels, facts.labels)


def image_mismatches(expected_id: Optional[str], expected_labels: Mapping[str, str],
                     nodes: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """[{node, problems}] for each node (sorted) whose image differs from the expected ID or labels."""
    found = []
    for node in sorted(nodes):
        problems = node_problems(expected_id, expected_labels, node_image(nodes[node]))
        if problems:
            found.append({"node": node, "problems": problems})
    return found


def mismatch_message(image: str, mismatches: Sequence[Mapping[str, Any]]) -> str:
    names = ", ".join(m["node"] for m in mismatches)
    details = "; ".join(f"{m['node']}: {', '.join(m['problems'])}" for m in mismatches)
    return f"image {image} differs on {len(mismatches)} node(s) ({names}): {details}"


# --- Distribution plan -------------------------------------------------------------------------

def distribution_plan(image: str, builder_id: str, nodes: Mapping[str, Any]) -> Dict[str, Any]:
    """Which ranks need the image.

    current: the tag already names builder_id. retag: the ID is there under another name, only the tag is
    missing. send: neither. conflicts: the tag names a different image — an error, never replaced.
    """
    plan: Dict[str, Any] = {"image": image, "id": builder_id, "current": [], "retag": [], "send": [],
                            "conflicts": []}
    for node in sorted(nodes):
        facts = node_image(nodes[node])
        if facts.present and facts.id == builder_id:
            plan["current"].append(node)
        elif facts.present:
            plan["conflicts"].append({"node": node, "id": facts.id})
        elif facts.id_present:
            plan["retag"].append(node)
        else:
            plan["send"].append(node)
    return plan


def conflict_message(plan: Mapping[str, Any]) -> Optional[str]:
    conflicts = plan["conflicts"]
    if not conflicts:
        return None
    details = "; ".join(f"{c['node']} holds {c['id']}" for c in conflicts)
    return (f"tag {plan['image']} names a different image on {len(conflicts)} node(s) than the builder's "
            f"{plan['id']}: {details}. Tags are never overwritten: remove the tag on those nodes after checking "
            "what it holds, or build under a new release name")


# --- Layer-aware transfer ----------------------------------------------------------------------

def shared_prefix(image_layers: Sequence[str], node_chains: Iterable[Sequence[str]]) -> int:
    """How many leading layers of the image some image on the node already has, in the same order.

    A layer is only reusable with all layers below it (Docker keys stored layers by chain), so the longest
    common prefix with any one image on the node is what counts.
    """
    best = 0
    for chain in node_chains:
        depth = 0
        for mine, theirs in zip(image_layers, chain):
            if mine != theirs:
                break
            depth += 1
        best = max(best, depth)
    return best


def relay_waves(waves: Sequence[Sequence[Mapping[str, Any]]], image_layers: Sequence[str],
                chains_by_host: Mapping[str, Sequence[Sequence[str]]],
                layer_aware: bool = True) -> List[List[Dict[str, Any]]]:
    """The waves with each transfer annotated: `depth` (leading layers the receiver holds, left out of its
    archive), `keep_relay` (the receiver sends in a later wave, so it keeps a copy of what it receives) and
    `from_relay` (the sender forwards the copy it received instead of saving the image again).

    A kept copy lacks the layers its receiver already had, so it may only go on to a rank that holds at least
    those: from_relay needs the receiver's depth to reach the copy's. A sender that forwards a copy with more
    layers than its receiver needs costs bytes, never correctness (`docker load` skips stored chains).
    """
    later: List[set] = [set() for _ in waves]
    for index in range(len(waves) - 2, -1, -1):
        later[index] = later[index + 1] | {t["from"] for t in waves[index + 1]}
    copies: Dict[str, int] = {}  # host -> depth of the relay copy it keeps
    annotated: List[List[Dict[str, Any]]] = []
    for index, wave in enumerate(waves):
        out = []
        for transfer in wave:
            depth = shared_prefix(image_layers, chains_by_host.get(transfer["to"]) or []) if layer_aware else 0
            relay = transfer["from"] in copies and depth >= copies[transfer["from"]]
            out.append({**transfer, "depth": depth, "from_relay": relay, "keep_relay": transfer["to"] in later[index]})
        for transfer in out:
            if transfer["keep_relay"]:
                copies[transfer["to"]] = copies[transfer["from"]] if transfer["from_relay"] else transfer["depth"]
        annotated.append(out)
    return annotated


def save_members_to_skip(save_manifest: Sequence[Mapping[str, Any]], depth: int) -> List[str]:
    """Layer files of a `docker save` archive (manifest.json) that a node with `depth` shared layers needs not get.

    `docker load` reads a layer file only when the layer's chain is not stored yet, so an archive without
    those members loads to the same image ID (verified with Docker 20.10's legacy store, see the docs).
    """
    if len(save_manifest) != 1:
        raise ImageError("expected a docker save archive of exactly one image, its manifest lists "
                         f"{len(save_manifest)}")
    layers = list(save_manifest[0].get("Layers") or [])
    if depth > len(layers):
        raise ImageError(f"the node shares {depth} layers but the image has only {len(layers)}")
    keep = set(layers[depth:])
    return [path for path in layers[:depth] if path not in keep]


# --- Reading one node's engine through an injected runner ---------------------------------------

Runner = Callable[[List[str]], Tuple[int, str, str]]  # argv lists only, never a shell string


def inspect_image(run: Runner, docker: str, ref: str) -> Optional[Dict[str, Any]]:
    """One image's facts, or None when the engine has no such image; other failures raise."""
    rc, out, err = run([docker, "image", "inspect", "--", ref])
    if is_missing_image(rc, err):
        return None
    if rc != 0:
        raise ImageError(f"docker image inspect {ref} failed (rc={rc}): {err.strip()[-500:]}")
    entries = parse_inspect(out)
    if len(entries) != 1:
        raise ImageError(f"docker image inspect {ref} returned {len(entries)} images, expected one")
    return entries[0]


def layer_chains(run: Runner, docker: str) -> List[List[str]]:
    """RootFS.Layers of every image on the engine (for the layer-aware transfer plan)."""
    rc, out, err = run([docker, "image", "ls", "--quiet", "--no-trunc"])
    if rc != 0:
        raise ImageError(f"docker image ls failed (rc={rc}): {err.strip()[-500:]}")
    ids = sorted({line.strip() for line in out.splitlines() if line.strip()})
    if not ids:
        return []
    rc, out, err = run([docker, "image", "inspect", "--", *ids])
    if rc != 0:
        raise ImageError(f"docker image inspect of {len(ids)} images failed (rc={rc}): {err.strip()[-500:]}")
    return [entry["layers"] for entry in parse_inspect(out)]


def read_node_image(run: Runner, docker: str, ref: str, expected_id: Optional[str]) -> Tuple[NodeImage, Dict[str, Any]]:
    """(facts for the comparison, extra facts: architecture, os, size) of `ref` on this engine."""
    found = inspect_image(run, docker, ref)
    if found is None:
        id_present = inspect_image(run, docker, expected_id) is not None if expected_id else None
        return NodeImage(False, id_present=id_present), {}
    facts = NodeImage(True, found["id"], found["labels"], found["layers"], found["repo_tags"],
                      id_present=(found["id"] == expected_id) if expected_id else None)
    if expected_id and not facts.id_present:
        facts.id_present = inspect_image(run, docker, expected_id) is not None
    return facts, {k: found[k] for k in ("architecture", "os", "size")}


# --- Build limits (reference §2.4) -------------------------------------------------------------

GIB = 1024 ** 3


@dataclass(frozen=True)
class BuildLimits:
    """Refuse below floor_gib MemAvailable; jobs = min(max_jobs, (cpus - cpu_reserve) // 2,
    (MemAvailable - reserve_gib) // per_job_gib). Reference values: 64, 10, 4, 24, 8."""
    floor_gib: float = 64
    max_jobs: int = 10
    cpu_reserve: int = 4
    reserve_gib: float = 24
    per_job_gib: float = 8


def build_jobs(node: str, cpus: int, mem_available: int, limits: BuildLimits) -> Dict[str, Any]:
    """{ok, jobs, msg}: the compile-job bound, or a refusal naming the node and the figure that failed."""
    avail_gib = mem_available / GIB
    by_cpu = (cpus - limits.cpu_reserve) // 2
    by_memory = int((mem_available - limits.reserve_gib * GIB) // (limits.per_job_gib * GIB))
    jobs = min(limits.max_jobs, by_cpu, by_memory)
    base = {"jobs": max(jobs, 0), "by_cpu": by_cpu, "by_memory": by_memory, "mem_available": mem_available,
            "cpus": cpus}
    if avail_gib < limits.floor_gib:
        return {**base, "ok": False, "msg": f"{node}: refusing to build: MemAvailable {avail_gib:.1f} GiB is below "
                                           f"the floor of {limits.floor_gib:g} GiB"}
    if jobs < 1:
        return {**base, "ok": False, "msg": f"{node}: refusing to build: no compile job fits ({cpus} CPUs leave "
                                           f"{by_cpu} by CPU; {avail_gib:.1f} GiB MemAvailable leaves {by_memory} "
                                           f"by memory at {limits.per_job_gib:g} GiB per job above "
                                           f"{limits.reserve_gib:g} GiB)"}
    return {**base, "ok": True, "msg": f"{node}: {jobs} compile job(s) (CPU bound {by_cpu}, memory bound "
                                       f"{by_memory}, cap {limits.max_jobs}; MemAvailable {avail_gib:.1f} GiB)"}
