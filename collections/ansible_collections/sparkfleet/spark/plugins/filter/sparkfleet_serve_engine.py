"""The serving group's decision and ordered steps for the serve role (module_utils/spark_serve_engine.py)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serve_engine as _ENGINE


def spark_serve_group(order: Sequence[str], probed: Mapping[str, Mapping[str, Any]], differs: Sequence[str],
                      answers: Any, replace: Any) -> dict[str, Any]:
    """{action: keep|fresh|replace|refuse, reason, replacing, launch{...}, stop[...]} for the
    hosts of one group in rank order, from each host's probe ({container, guard_present}) and the hosts whose
    running container differs from its spec."""
    try:
        return _ENGINE.group_plan(list(order), probed, list(differs), _bool("answers", answers),
                                  _bool("spark_serve_replace", replace))
    except ValueError as exc:
        raise AnsibleFilterError(f"spark_serve_group: {exc}") from exc


def spark_serve_rollback(order: Sequence[str], probed: Mapping[str, Mapping[str, Any]], replacing: Any,
                         renamed: Sequence[str]) -> dict[str, list[str]]:
    """{remove, stop, restore, start} after a failed start, from the ranks renamed before the failure."""
    try:
        return _ENGINE.rollback_plan(list(order), probed, _bool("replacing", replacing), list(renamed))
    except ValueError as exc:
        raise AnsibleFilterError(f"spark_serve_rollback: {exc}") from exc


def spark_serve_stop_order(order: Sequence[str]) -> list[str]:
    """The order a group stops in: the head first, then the workers by ascending rank."""
    return _ENGINE.stop_order(list(order))


def spark_serve_failure(order: Sequence[str], results: Mapping[str, Any], tasks: Mapping[str, Any]) -> str:
    """One line saying what failed on which rank, from every rank's ansible_failed_result and
    ansible_failed_task (None for a rank sent to the rollback by another's failure)."""
    if not isinstance(results, Mapping) or not isinstance(tasks, Mapping):
        raise AnsibleFilterError("spark_serve_failure: results and tasks must be mappings of host to result")
    return _ENGINE.failure_text(list(order), {h: r for h, r in results.items() if isinstance(r, Mapping)},
                                {h: t for h, t in tasks.items() if isinstance(t, Mapping)})


def _bool(name: str, value: Any) -> bool:
    """Booleans only: the role converts switches with `| bool`, so anything else here is a wiring error."""
    if not isinstance(value, bool):
        raise AnsibleFilterError(f"spark_serve_group: {name} must be a boolean, got {value!r}")
    return value


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"spark_serve_group": spark_serve_group, "spark_serve_rollback": spark_serve_rollback,
                "spark_serve_stop_order": spark_serve_stop_order, "spark_serve_failure": spark_serve_failure}
