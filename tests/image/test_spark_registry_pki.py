"""module_utils/spark_registry_pki: when the controller's registry certificate work can be skipped, what is due,
and the record a run leaves; the filters' errors."""
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from testlib import load_source

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_registry_pki import (DAY_S, PkiError, pki_record,
                                                                                          pki_state)

FILTERS = load_source("filter", "sparkfleet_image").FilterModule().filters()
NOW = 1_800_000_000
WANTED = {"dgx1": ["10.23.1.1", "10.23.3.1"], "dgx2": ["10.23.1.2", "10.23.2.2"]}
FILES = ["ca.crt", "ca.key", "dgx1.crt", "dgx1.key", "dgx2.crt", "dgx2.key", "issued.json"]


def issued(days_ago: int, **addresses: list[str]) -> dict[str, Any]:
    return {"senders": {h: {"addresses": a, "issued": NOW - days_ago * DAY_S} for h, a in addresses.items()}}


RECORD = issued(10, **WANTED)

STATES = [
    ("everything as planned", RECORD, FILES, WANTED,
     {"current": True, "due": [], "stale": [], "missing": []}),
    ("a sender the record holds more of is still current", issued(10, **WANTED, dgx3=["10.23.2.3"]), FILES,
     {"dgx1": WANTED["dgx1"]}, {"current": True, "due": [], "stale": [], "missing": []}),
    ("no record: every sender is stale", {}, FILES, WANTED,
     {"current": False, "due": [], "stale": ["dgx1", "dgx2"], "missing": []}),
    ("a sender's addresses changed", issued(10, dgx1=WANTED["dgx1"], dgx2=["10.23.1.2"]), FILES, WANTED,
     {"current": False, "due": [], "stale": ["dgx2"], "missing": []}),
    ("a certificate file is gone", RECORD, [f for f in FILES if f != "dgx2.crt"], WANTED,
     {"current": False, "due": [], "stale": [], "missing": ["dgx2.crt"]}),
    ("a fresh controller", {}, [], {"dgx1": WANTED["dgx1"]},
     {"current": False, "due": [], "stale": ["dgx1"], "missing": ["ca.crt", "ca.key", "dgx1.crt", "dgx1.key"]}),
    ("renewal time reached, to the second", issued(795, **WANTED), FILES, WANTED,
     {"current": False, "due": ["dgx1", "dgx2"], "stale": [], "missing": []}),
    ("a garbled entry counts as none", {"senders": {"dgx1": {"addresses": WANTED["dgx1"], "issued": "soon"},
                                                    "dgx2": RECORD["senders"]["dgx2"]}}, FILES, WANTED,
     {"current": False, "due": [], "stale": ["dgx1"], "missing": []}),
]


@pytest.mark.parametrize("record, files, wanted, expected", [s[1:] for s in STATES], ids=[s[0] for s in STATES])
def test_state(record: Any, files: list[str], wanted: dict[str, list[str]], expected: dict[str, Any]) -> None:
    assert pki_state(record, files, wanted, NOW, 825, 30) == expected


def test_one_second_before_renewal_is_not_due() -> None:
    record = {"senders": {"dgx1": {"addresses": WANTED["dgx1"], "issued": NOW - 795 * DAY_S + 1}}}
    assert pki_state(record, FILES, {"dgx1": WANTED["dgx1"]}, NOW, 825, 30)["current"] is True


RECORDS = [
    ("a first run stamps every sender", {}, [], issued(0, **WANTED)),
    ("an unchanged run keeps the issue times", RECORD, [], RECORD),
    ("a renewed sender is stamped again", RECORD, ["dgx2"],
     {"senders": {"dgx1": RECORD["senders"]["dgx1"], "dgx2": {"addresses": WANTED["dgx2"], "issued": NOW}}}),
    ("new addresses are stamped even if the task reported no change", issued(10, dgx1=["10.23.9.1"]), [],
     {"senders": {"dgx1": {"addresses": WANTED["dgx1"], "issued": NOW}, "dgx2": {"addresses": WANTED["dgx2"],
                                                                                 "issued": NOW}}}),
    ("senders outside this run's plan stay", issued(10, dgx3=["10.23.2.3"]), [],
     {"senders": {**issued(0, **WANTED)["senders"], "dgx3": {"addresses": ["10.23.2.3"], "issued": NOW - 10 * DAY_S}}}),
]


@pytest.mark.parametrize("record, reissued, expected", [r[1:] for r in RECORDS], ids=[r[0] for r in RECORDS])
def test_record(record: Any, reissued: list[str], expected: dict[str, Any]) -> None:
    assert pki_record(record, WANTED, reissued, NOW) == expected


def test_a_record_made_current_is_current() -> None:
    assert pki_state(pki_record({}, WANTED, [], NOW), FILES, WANTED, NOW, 825, 30)["current"] is True


ERRORS = [
    ("renewal not below validity", ({}, FILES, WANTED, NOW, 30, 30), r"cert_renew_days \(30\) must be .* below .*\(30\)"),
    ("negative renewal", ({}, FILES, WANTED, NOW, 825, -1), r"cert_renew_days \(-1\) must be at least 0"),
    ("a sender without address", ({}, FILES, {"dgx1": []}, NOW, 825, 30), "dgx1: the certificate names no address"),
    ("addresses as a string", ({}, FILES, {"dgx1": "10.23.1.1"}, NOW, 825, 30), "dgx1: the certificate names no address"),
    ("plan not a mapping", ({}, FILES, ["dgx1"], NOW, 825, 30), "must be a mapping of host to addresses, got list"),
    ("record not a record", ({"senders": []}, FILES, WANTED, NOW, 825, 30), "issued.json .* remove it to re-issue"),
]


@pytest.mark.parametrize("args, message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(PkiError, match=message):
        pki_state(*args)


def test_filters_match_the_module_utils_and_raise_filter_errors() -> None:
    assert FILTERS["spark_registry_pki"](RECORD, FILES, WANTED, str(NOW), "825", "30") == pki_state(
        RECORD, FILES, WANTED, NOW, 825, 30)
    assert FILTERS["spark_registry_pki_record"]({}, WANTED, [], str(NOW)) == pki_record({}, WANTED, [], NOW)
    with pytest.raises(AnsibleFilterError, match="cert_renew_days .* below"):
        FILTERS["spark_registry_pki"]({}, FILES, WANTED, NOW, 825, 900)
    with pytest.raises(AnsibleFilterError, match="now must be a whole number, got 'later'"):
        FILTERS["spark_registry_pki"]({}, FILES, WANTED, "later", 825, 30)
    with pytest.raises(AnsibleFilterError, match="files must be the CA directory's file names"):
        FILTERS["spark_registry_pki"]({}, "ca.crt", WANTED, NOW, 825, 30)
    with pytest.raises(AnsibleFilterError, match="reissued must be a list of senders"):
        FILTERS["spark_registry_pki_record"]({}, WANTED, "dgx1", NOW)
