"""Controller-side image identity filters: tag and labels from the lock, distribution plan, fleet comparison.

Thin wrappers over module_utils/spark_image.py (pure, stdlib only), so the roles, render and the modules
compute the tag, labels and verdicts with one implementation. Errors become AnsibleFilterError naming the
lock entry, node or field.
"""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ansible.errors import AnsibleFilterError


def _load_image_logic() -> ModuleType:
    """Controller-side filters cannot import the project's module_utils package; load the one shared file."""
    path = Path(__file__).resolve().parent.parent / "module_utils" / "spark_image.py"
    spec = importlib.util.spec_from_file_location("sparkfleet_shared_spark_image", path)
    if spec is None or spec.loader is None:
        raise AnsibleFilterError(f"cannot load {path}")
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


_IMAGE = _load_image_logic()


def _plain(value: Any) -> Any:
    """Ansible's lazy containers to plain Python data."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


def _call(function: Any, *args: Any) -> Any:
    try:
        return function(*(_plain(a) for a in args))
    except _IMAGE.ImageError as exc:
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


class FilterModule:
    """sparkfleet image identity filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_image_tag": spark_image_tag,
            "spark_image_labels": spark_image_labels,
            "spark_image_plan": spark_image_plan,
            "spark_image_mismatches": spark_image_mismatches,
            "spark_image_mismatch_message": spark_image_mismatch_message,
        }
