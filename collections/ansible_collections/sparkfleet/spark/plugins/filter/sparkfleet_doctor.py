"""Doctor filters: the report and its table from what every node reported (module_utils/spark_doctor.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_doctor as _DOCTOR
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain


def spark_doctor_report(nodes: Mapping[str, Any], context: Mapping[str, Any], generated: str) -> dict[str, Any]:
    """doctor.json from {host: observation} and the cluster context."""
    if not isinstance(nodes, Mapping) or not isinstance(context, Mapping):
        raise AnsibleFilterError("spark_doctor_report: expected ({host: observation}, context, generated)")
    return _DOCTOR.report(_plain(nodes), _plain(context), str(generated))


def spark_doctor_table(report: Mapping[str, Any]) -> list[str]:
    """The report as one line per node and check, then the summary line."""
    if not isinstance(report, Mapping) or "checks" not in report:
        raise AnsibleFilterError("spark_doctor_table: expected the output of spark_doctor_report")
    return _DOCTOR.table(_plain(report))


class FilterModule:
    """sparkfleet doctor filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_doctor_report": spark_doctor_report, "spark_doctor_table": spark_doctor_table}
