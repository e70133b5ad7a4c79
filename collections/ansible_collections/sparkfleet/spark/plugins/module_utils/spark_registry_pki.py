"""The fleet registry CA's record of what it issued (issued.json beside the CA on the controller).

For each sender the record keeps the fabric addresses its certificate names and when it was issued (epoch
seconds). From the record, the CA directory's file names and the plan, `pki_state` says whether the
controller's certificate work can be skipped (every file there, every sender's addresses as planned, none due
for renewal) and which certificates are due; `pki_record` gives the record after a run. Pure, stdlib only.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DAY_S = 86400
CA_FILES = ("ca.crt", "ca.key")


class PkiError(ValueError):
    """A record, plan or period the CA cannot work from."""


def _wanted(wanted: Any) -> dict[str, list[str]]:
    if not isinstance(wanted, Mapping):
        raise PkiError(f"the senders' certificate names must be a mapping of host to addresses, got {type(wanted).__name__}")
    plain: dict[str, list[str]] = {}
    for host, addresses in wanted.items():
        if isinstance(addresses, (str, bytes)) or not isinstance(addresses, Sequence) or not addresses:
            raise PkiError(f"{host}: the certificate names no address (got {addresses!r})")
        plain[str(host)] = [str(a) for a in addresses]
    return plain


def _senders(record: Any) -> dict[str, dict[str, Any]]:
    """The record's senders; a record written by hand or cut short counts as empty for the senders it garbles."""
    if record in (None, "", {}):
        return {}
    if not isinstance(record, Mapping) or not isinstance(record.get("senders", {}), Mapping):
        raise PkiError("issued.json in the registry CA directory is not a record of senders; remove it to re-issue")
    return {str(h): dict(e) for h, e in record.get("senders", {}).items()
            if isinstance(e, Mapping) and isinstance(e.get("issued"), int) and isinstance(e.get("addresses"), list)}


def _renew_at(entry: Mapping[str, Any], cert_days: int, renew_days: int) -> int:
    return int(entry["issued"]) + (cert_days - renew_days) * DAY_S


def pki_state(record: Any, files: Sequence[str], wanted: Any, now: int, cert_days: int,
              renew_days: int) -> dict[str, Any]:
    """`{current, due, stale, missing}`: current when nothing on the controller needs doing for these senders;
    due, the senders whose certificate reaches its renewal time; stale, those whose record is missing or names
    other addresses; missing, the CA and certificate files that are not there."""
    if not 0 <= renew_days < cert_days:
        raise PkiError(f"spark_image_registry_cert_renew_days ({renew_days}) must be at least 0 and below "
                       f"spark_image_registry_cert_days ({cert_days})")
    plan = _wanted(wanted)
    senders = _senders(record)
    present = set(files)
    due = sorted(h for h in plan if h in senders and _renew_at(senders[h], cert_days, renew_days) <= now)
    stale = sorted(h for h in plan if senders.get(h, {}).get("addresses") != plan[h])
    missing = sorted({*CA_FILES, *(f"{h}.{ext}" for h in plan for ext in ("crt", "key"))} - present)
    return {"current": not (due or stale or missing), "due": due, "stale": stale, "missing": missing}


def pki_record(record: Any, wanted: Any, reissued: Sequence[str], now: int) -> dict[str, Any]:
    """The record after a run that (re)issued `reissued`: those, and planned senders with no or another
    entry, are stamped now with their planned addresses; everyone else's entry stays."""
    plan = _wanted(wanted)
    senders = _senders(record)
    for host, addresses in plan.items():
        if host in reissued or senders.get(host, {}).get("addresses") != addresses:
            senders[host] = {"addresses": addresses, "issued": int(now)}
    return {"senders": dict(sorted(senders.items()))}
