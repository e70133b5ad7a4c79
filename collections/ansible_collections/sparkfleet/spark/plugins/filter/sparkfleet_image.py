"""Controller-side image and model distribution filters: tag and labels from the lock, distribution plan,
fleet comparison, fan-out waves over the fabric.

Thin wrappers over module_utils/spark_image.py and spark_fanout.py (pure, stdlib only), so the roles, render
and the modules compute the tag, labels and verdicts with one implementation. Errors become
AnsibleFilterError naming the lock entry, node or field.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_image as _IMAGE
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_fanout as _FANOUT
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_registry_pki as _PKI
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*(_plain(a) for a in args), **{k: _plain(v) for k, v in kwargs.items()})
    except (_IMAGE.ImageError, _FANOUT.FanoutError, _PKI.PkiError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _lock(upstreams: Any) -> tuple[dict[str, str], dict[str, str]]:
    if not isinstance(upstreams, Sequence) or isinstance(upstreams, (str, bytes)):
        raise AnsibleFilterError(f"spark_image_upstreams must be a list, got {type(upstreams).__name__}")
    return _call(_IMAGE.lock_identity, upstreams)


def spark_image_tag(upstreams: Any, repository: str, release: str) -> str:
    """`<repository>:<release>-<sha256(sorted name=tree lines)[:12]>` from the lock."""
    trees, _ = _lock(upstreams)
    return _call(_IMAGE.content_tag, repository, release, trees)


def spark_image_labels(upstreams: Any, release: str) -> dict[str, str]:
    """Identity labels (tree and patch-set per upstream, release, identity digest) from the lock."""
    trees, patchsets = _lock(upstreams)
    return _call(_IMAGE.identity_labels, release, trees, patchsets)


def spark_image_plan(nodes: Any, image: str, builder_id: str) -> dict[str, Any]:
    """{current, retag, send, conflicts, error}: error is the conflict message or None."""
    if not isinstance(nodes, Mapping):
        raise AnsibleFilterError(f"node image facts must be a mapping of host to facts, got {type(nodes).__name__}")
    plan = _call(_IMAGE.distribution_plan, image, builder_id, nodes)
    plan["error"] = _IMAGE.conflict_message(plan)
    return plan


def spark_image_mismatches(nodes: Any, expected_id: str | None, expected_labels: Any) -> list[dict[str, Any]]:
    """[{node, problems}] for every node whose image differs from the expected ID or labels."""
    if not isinstance(nodes, Mapping):
        raise AnsibleFilterError(f"node image facts must be a mapping of host to facts, got {type(nodes).__name__}")
    return _call(_IMAGE.image_mismatches, expected_id or None, expected_labels or {}, nodes)


def spark_image_mismatch_message(mismatches: Any, image: str) -> str:
    return _call(_IMAGE.mismatch_message, image, mismatches)


def spark_image_shared_depth(layers: Any, chains: Any) -> int:
    """Leading layers of the image that some image on the node already holds in the same order."""
    return _call(_IMAGE.shared_prefix, list(layers or []), [list(c or []) for c in (chains or [])])


def spark_image_relay_waves(waves: Any, layers: Any, facts: Any, layer_aware: Any = True) -> list[list[dict[str, Any]]]:
    """Waves annotated with depth, keep_relay and from_relay; facts maps host to spark_image_identity results."""
    if not isinstance(waves, Sequence) or isinstance(waves, (str, bytes)):
        raise AnsibleFilterError("spark_image_relay_waves: expected the waves of spark_fanout_waves (a list of lists)")
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("spark_image_relay_waves: facts must map each host to its spark_image_identity result")
    for wave in waves:
        if not isinstance(wave, Sequence) or not all(isinstance(t, Mapping) and "from" in t and "to" in t for t in wave):
            raise AnsibleFilterError("spark_image_relay_waves: every wave must be a list of {from, to, ...} transfers")
    chains = {host: [list(c or []) for c in ((f or {}).get("layer_chains") or [])] for host, f in facts.items()}
    return _call(_IMAGE.relay_waves, [list(w) for w in waves], list(layers or []), chains, bool(layer_aware))


def spark_fanout_waves(plan: Any, source: str, targets: Any, holders: Any = (),
                       management_fallback: bool = False) -> list[list[dict[str, Any]]]:
    """Waves of {from, to, address, addresses, network} over the cables of the fabric plan (spark_plan)."""
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else plan
    if not isinstance(nodes, Sequence) or isinstance(nodes, (str, bytes)):
        raise AnsibleFilterError("spark_fanout_waves: expected the fabric plan (spark_plan) or its nodes list")
    return _call(_FANOUT.fanout_waves, nodes, source, list(targets or []), holders=list(holders or []),
                 management_fallback=bool(management_fallback))


def _plan_nodes(plan: Any, name: str) -> Any:
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else plan
    if not isinstance(nodes, Sequence) or isinstance(nodes, (str, bytes)):
        raise AnsibleFilterError(f"{name}: expected the fabric plan (spark_plan) or its nodes list")
    return nodes


def spark_registry_waves(plan: Any, source: str, targets: Any, holders: Any = (),
                         management_fallback: bool = False) -> dict[str, Any]:
    """{waves: [{registries: [{host, listen}], pulls: [{to, from, address}]}], stream: [[...]]}: the fan-out waves
    carried by a registry on each sender; the management-network transfers stay streams."""
    return _call(_FANOUT.registry_waves, _plan_nodes(plan, "spark_registry_waves"), source, list(targets or []),
                 holders=list(holders or []), management_fallback=bool(management_fallback))


def spark_image_paths(plan: Any, registry: Any, stream: Any, port: Any = None) -> list[str]:
    """One line per rank of how it got the image: held, retagged, pulled from a registry, or streamed."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("spark_image_paths: expected the spark_image_plan result")
    for name, waves in (("registry", registry), ("stream", stream)):
        if not isinstance(waves, Sequence) or isinstance(waves, (str, bytes)):
            raise AnsibleFilterError(f"spark_image_paths: {name} must be a list of waves")
    return _call(_FANOUT.delivery_paths, list(plan.get("current") or []), list(plan.get("retag") or []),
                 [dict(w) for w in registry], [list(w) for w in stream], None if port is None else int(port))


def spark_pull_progress(wave: Any, logs: Any, ended: Any, elapsed_s: Any) -> list[str]:
    """Progress lines of one registry wave: each pull's layers pulled of those its receiver lacked, ended or not."""
    if not isinstance(wave, Mapping) or not isinstance(wave.get("pulls"), Sequence):
        raise AnsibleFilterError("spark_pull_progress: wave must be one wave of spark_registry_waves")
    for name, value in (("logs", logs), ("ended", ended)):
        if not isinstance(value, Mapping):
            raise AnsibleFilterError(f"spark_pull_progress: {name} must map each receiver to a value")
    return _call(_FANOUT.pull_progress_lines, [dict(p) for p in wave["pulls"]],
                 {str(h): list(v or []) for h, v in logs.items()}, dict(ended), elapsed_s)


def _int(name: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"{name} must be a whole number, got {value!r}") from exc


def spark_registry_pki(record: Any, files: Any, wanted: Any, now: Any, cert_days: Any, renew_days: Any) -> dict[str, Any]:
    """Whether the registry CA's certificate work can be skipped, and which certificates are due or stale."""
    if isinstance(files, (str, bytes)) or not isinstance(files, Sequence):
        raise AnsibleFilterError("spark_registry_pki: files must be the CA directory's file names")
    return _call(_PKI.pki_state, record, [str(f) for f in files], wanted, _int("now", now),
                 _int("spark_image_registry_cert_days", cert_days),
                 _int("spark_image_registry_cert_renew_days", renew_days))


def spark_registry_pki_record(record: Any, wanted: Any, reissued: Any, now: Any) -> dict[str, Any]:
    """The registry CA's record after a run that (re)issued the `reissued` senders' certificates."""
    if isinstance(reissued, (str, bytes)) or not isinstance(reissued, Sequence):
        raise AnsibleFilterError("spark_registry_pki_record: reissued must be a list of senders")
    return _call(_PKI.pki_record, record, wanted, [str(h) for h in reissued], _int("now", now))


def spark_fabric_addresses(plan: Any, host: str) -> list[str]:
    """The host's fabric addresses in the plan, path order (the names of its registry certificate)."""
    return _call(_FANOUT.fabric_addresses, _plan_nodes(plan, "spark_fabric_addresses"), host)


def spark_fanout_senders(plan: Any, source: str, targets: Any, holders: Any) -> list[str]:
    """The holders (not the source) cabled to a target: each may send, so each is hashed before the waves."""
    return _call(_FANOUT.possible_senders, _plan_nodes(plan, "spark_fanout_senders"), source,
                 list(targets or []), list(holders or []))


def spark_fanout_vetted(holders: Any, senders: Any, checks: Any) -> dict[str, Any]:
    """{holders: those that may send, refused: {host: message naming its bad files}} from the hashed checks."""
    if not isinstance(checks, Mapping):
        raise AnsibleFilterError("spark_fanout_vetted: checks must map each sender to its spark_model_manifest result")
    kept, refused = _call(_FANOUT.vetted_holders, list(holders or []), list(senders or []),
                          {str(h): dict(c) if isinstance(c, Mapping) else {} for h, c in checks.items()})
    return {"holders": kept, "refused": refused}


def spark_fanout_progress(wave: Any, arrived: Any, ended: Any, total_bytes: Any, elapsed_s: Any,
                          previous: Any = None, interval_s: Any = 0) -> list[str]:
    """Progress lines of one wave: each transfer's bytes on its receiver of the total, the rate, done or not."""
    if not isinstance(wave, Sequence) or isinstance(wave, (str, bytes)) or not all(isinstance(t, Mapping) for t in wave):
        raise AnsibleFilterError("spark_fanout_progress: wave must be a list of {from, to} transfers")
    for name, value in (("arrived", arrived), ("ended", ended), ("previous", previous)):
        if not isinstance(value, Mapping) and not (name == "previous" and value is None):
            raise AnsibleFilterError(f"spark_fanout_progress: {name} must map each receiver to a value")
    return _call(_FANOUT.progress_lines, [dict(t) for t in wave], dict(arrived), dict(ended), total_bytes,
                 elapsed_s, None if previous is None else dict(previous), interval_s)


class FilterModule:
    """sparkfleet image and distribution filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_image_tag": spark_image_tag,
            "spark_image_labels": spark_image_labels,
            "spark_image_plan": spark_image_plan,
            "spark_image_relay_waves": spark_image_relay_waves,
            "spark_image_mismatches": spark_image_mismatches,
            "spark_image_mismatch_message": spark_image_mismatch_message,
            "spark_image_shared_depth": spark_image_shared_depth,
            "spark_fanout_waves": spark_fanout_waves,
            "spark_registry_waves": spark_registry_waves,
            "spark_fabric_addresses": spark_fabric_addresses,
            "spark_image_paths": spark_image_paths,
            "spark_pull_progress": spark_pull_progress,
            "spark_registry_pki": spark_registry_pki,
            "spark_registry_pki_record": spark_registry_pki_record,
            "spark_fanout_senders": spark_fanout_senders,
            "spark_fanout_vetted": spark_fanout_vetted,
            "spark_fanout_progress": spark_fanout_progress,
        }
