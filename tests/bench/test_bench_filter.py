"""filter spark_bench_head_url: the head's serving endpoint from inventory host variables."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from testlib import load_source

head_url = load_source("filter", "sparkfleet_bench").spark_bench_head_url

HOSTVARS = {"dgx1": {"spark_rank": 0, "ansible_host": "10.0.1.71"},
            "dgx2": {"spark_rank": 1, "ansible_host": "10.0.1.72"}}


def test_head_url_defaults_and_overrides() -> None:
    assert head_url(HOSTVARS, ["dgx1", "dgx2"]) == "http://10.0.1.71:8000"
    custom = {**HOSTVARS, "dgx1": {**HOSTVARS["dgx1"], "spark_mgmt_address": "192.168.9.1", "spark_serve_port": "8080"}}
    assert head_url(custom, ["dgx2", "dgx1"]) == "http://192.168.9.1:8080"
    assert head_url(HOSTVARS, []) == ""


@pytest.mark.parametrize("hostvars,match", [
    ({"dgx2": {"spark_rank": 1}}, "exactly one host with spark_rank 0"),
    ({"dgx1": {"spark_rank": 0, "spark_serve_port": "http"}}, "dgx1: spark_serve_port 'http'"),
    ({"dgx1": {"spark_rank": 0, "spark_serve_port": 70000}}, "dgx1: spark_serve_port 70000 is out of range"),
])
def test_head_url_errors_name_host_and_field(hostvars: dict, match: str) -> None:
    with pytest.raises(AnsibleFilterError, match=match):
        head_url(hostvars, list(hostvars))
