"""Pure tests of module_utils/spark_gid.py: GID forms, classification, expectations, verdicts."""
from __future__ import annotations

import pytest
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_gid import (
    Expectation, GidEntry, classify_gid, evaluate_device, find_ipv4_index, gid_to_ipv4, ipv4_hex_tail, ipv4_to_gid,
    is_roce_v2, parse_expectation, read_attribute, summarise)

from spark_fixtures import V1, V2, ZERO_GID, gid, link_local

NONE = Expectation(address=None, subnet=None)


@pytest.mark.parametrize(
    ("address", "tail"),
    [("10.12.1.1", "0a0c:0101"), ("10.12.2.1", "0a0c:0201"), ("10.13.1.1", "0a0d:0101"),
     ("10.23.1.2", "0a17:0102"), ("10.34.1.3", "0a22:0103"), ("10.14.2.4", "0a0e:0204")],
)
def test_worked_hex_tails(address: str, tail: str) -> None:
    full = ipv4_to_gid(address)
    assert ipv4_hex_tail(address) == tail
    assert full == "0000:0000:0000:0000:0000:ffff:" + tail
    assert len(full) == 39
    assert gid_to_ipv4(full) == address


def test_reference_example_gid() -> None:
    assert ipv4_to_gid("10.12.1.1") == "0000:0000:0000:0000:0000:ffff:0a0c:0101"


@pytest.mark.parametrize(
    ("value", "kind"),
    [(ZERO_GID, "empty"), (ZERO_GID + "\n", "empty"), (gid("10.12.1.1"), "ipv4"),
     (link_local(), "link-local"), ("fe80:0000:0000:0000:0000:0000:0000:0001", "link-local"),
     ("2001:0db8:0000:0012:0000:0000:0000:0001", "ipv6"), ("fd00:0000:0000:0000:0000:0000:0000:0001", "ipv6"),
     ("not-a-gid", "invalid"), ("", "invalid")],
)
def test_classify(value: str, kind: str) -> None:
    assert classify_gid(value) == kind


def test_gid_to_ipv4_rejects_non_mapped() -> None:
    assert gid_to_ipv4(link_local()) is None
    assert gid_to_ipv4("garbage") is None
    assert gid_to_ipv4("0000:0000:0000:0000:0000:FFFF:0A0C:0101\n") == "10.12.1.1"


@pytest.mark.parametrize(("text", "v2"), [("RoCE v2", True), ("RoCE v2\n", True), ("RoCEv2", True),
                                          ("IB/RoCE v1", False), ("", False), (None, False)])
def test_is_roce_v2(text: str | None, v2: bool) -> None:
    assert is_roce_v2(text) is v2


def test_parse_expectation_forms() -> None:
    plain = parse_expectation("10.12.1.1", None)
    assert str(plain.address) == "10.12.1.1" and plain.subnet is None
    prefixed = parse_expectation("10.12.1.1/24", None)
    assert str(prefixed.subnet) == "10.12.1.0/24"
    both = parse_expectation("10.12.1.1/24", "10.12.1.0/24")
    assert both == prefixed
    only_subnet = parse_expectation(None, "10.13.1.0/24")
    assert only_subnet.address is None and str(only_subnet.subnet) == "10.13.1.0/24"


@pytest.mark.parametrize(("expect", "subnet", "words"), [
    ("10.12.1.1/24", "10.12.2.0/24", "implies subnet 10.12.1.0/24"),
    ("10.12.1.1", "10.12.2.0/24", "outside the planned subnet"),
    ("10.12.1.300", None, "10.12.1.300"),
    (None, "10.12.1.1/24", "host bits"),
])
def test_parse_expectation_rejects(expect: str | None, subnet: str | None, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_expectation(expect, subnet)


def _entries(*slots: tuple[int, str, str]) -> list[GidEntry]:
    return [GidEntry(i, value, kind, "enp1s0f0np0") for i, value, kind in slots]


def test_find_index_prefers_configured_slot() -> None:
    entries = _entries((3, gid("10.12.1.1"), V2), (5, gid("10.12.1.1"), V2))
    want = parse_expectation("10.12.1.1", None)
    assert find_ipv4_index(entries, want, 3) == 3
    assert find_ipv4_index(entries, want, 5) == 5
    assert find_ipv4_index(entries, want, 4) == 3  # not in the slot: report the lowest one that fits
    assert find_ipv4_index(entries, parse_expectation("10.12.1.2", None), 3) is None


def test_evaluate_ok() -> None:
    result = evaluate_device("rocep1s0f0", 1, 3, _entries((3, gid("10.12.1.1"), V2)),
                             parse_expectation("10.12.1.1/24", None))
    assert result == {"ok": True, "gid": gid("10.12.1.1"), "type": V2, "ipv4": "10.12.1.1",
                      "ndev": "enp1s0f0np0", "index_of_ipv4": 3, "problem": None}


def test_evaluate_wrong_address_names_both() -> None:
    result = evaluate_device("rocep1s0f0", 1, 3, _entries((3, gid("10.12.1.2"), V2)),
                             parse_expectation("10.12.1.1", None))
    assert not result["ok"]
    assert "holds 10.12.1.2, not the expected 10.12.1.1" in result["problem"]
    assert "No slot of rocep1s0f0 holds the IPv4-mapped RoCE v2 GID of 10.12.1.1" in result["problem"]


def test_evaluate_without_expectation_accepts_any_ipv4_v2() -> None:
    result = evaluate_device("d", 1, 3, _entries((2, gid("10.99.1.7"), V1), (3, gid("10.99.1.7"), V2)), NONE)
    assert result["ok"] and result["ipv4"] == "10.99.1.7"


def test_evaluate_v1_only_reports_no_v2() -> None:
    result = evaluate_device("d", 1, 3, _entries((3, gid("10.12.1.1"), V1)), NONE)
    assert not result["ok"] and result["index_of_ipv4"] is None
    assert "holds a IB/RoCE v1 entry for 10.12.1.1" in result["problem"]


def test_summarise_lists_every_bad_device() -> None:
    devices = {"a": {"ok": True, "problem": None}, "b": {"ok": False, "problem": "B broke."},
               "c": {"ok": False, "problem": "C broke."}}
    ok, msg = summarise(devices, 3)
    assert not ok
    assert msg == "GID index 3 check failed on 2 of 3 device(s): b: B broke. | c: C broke."
    assert summarise({"a": {"ok": True, "problem": None}}, 3) == (
        True, "All 1 RDMA device(s) hold the IPv4 RoCE v2 GID at index 3.")
    assert summarise({}, 3)[0] is False


def test_read_attribute_tolerates_failures(tmp_path) -> None:
    (tmp_path / "value").write_text("RoCE v2\n")
    (tmp_path / "slot").mkdir()
    assert read_attribute(str(tmp_path / "value")) == ("RoCE v2", None)
    text, reason = read_attribute(str(tmp_path / "slot"))
    assert text is None and "unreadable (EISDIR" in reason
    text, reason = read_attribute(str(tmp_path / "absent"))
    assert text is None and reason.endswith("does not exist")
