"""The role's filters (plugins/filter/sparkfleet_doctor.py) wrap module_utils/spark_doctor.py."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible.utils.unsafe_proxy import wrap_var

from testlib import load_source
from test_spark_doctor import LAB_CONTEXT, cluster, context, lab

FILTERS = load_source("filter", "sparkfleet_doctor").FilterModule().filters()


def test_report_and_table_from_templated_data() -> None:
    # Values arrive from hostvars as Ansible's unsafe wrappers; the report must be plain JSON-able data.
    report = FILTERS["spark_doctor_report"](wrap_var(cluster(lab)), wrap_var(context(**LAB_CONTEXT)),
                                            "2026-11-29T14:00:00Z")
    assert report["ok"] is True and report["generated"] == "2026-11-29T14:00:00Z"
    assert type(report["checks"][0]["node"]) is str
    lines = FILTERS["spark_doctor_table"](report)
    assert lines[-1].endswith("-> OK") and len(lines) == len(report["checks"]) + 1


@pytest.mark.parametrize("name, args", [
    ("spark_doctor_report", (["dgx1"], {}, "t")),
    ("spark_doctor_table", ({"summary": {}},)),
])
def test_bad_input_names_the_filter(name: str, args: tuple) -> None:
    with pytest.raises(AnsibleFilterError, match=name):
        FILTERS[name](*args)
