"""Redaction filter: hide the secrets a site marks (and secret-named values) in what a role prints or saves,
such as a saved docker inspect document or a container's environment (module_utils/spark_redact.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_redact as _REDACT
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain


def _secret_list(name: str, secrets: Any) -> list[str]:
    if isinstance(secrets, (str, bytes, Mapping)) or not hasattr(secrets, "__iter__"):
        raise AnsibleFilterError(f"{name}: secrets must be a list of secret values, got {type(secrets).__name__}")
    return [str(s) for s in secrets if s is not None]


def _plain_value(value: Any) -> Any:
    return _plain(value) if not isinstance(value, str) else str(value)


def spark_redact(value: Any, secrets: Any) -> Any:
    """`value` (text, a docker inspect document, an environment) with every secret replaced by <redacted>."""
    return _REDACT.redact(_plain_value(value), _secret_list("spark_redact", secrets))


def spark_holds_secret(value: Any, secrets: Any) -> bool:
    """Whether `value` carries one of `secrets` or a value labelled secret (what spark_redact would hide): a
    task whose output shows `value` sets no_log from it."""
    return _REDACT.holds_secret(_plain_value(value), _secret_list("spark_holds_secret", secrets))


def spark_known_secrets(variables: Mapping[str, Any]) -> list[str]:
    """The values a site marks secret, from a host's variables (`hostvars[inventory_hostname]`)."""
    try:
        return _REDACT.known_secrets(variables)
    except ValueError as exc:
        raise AnsibleFilterError(f"spark_known_secrets: {exc}") from exc


def spark_serve_overrides_secret(hostvars: Any, hosts: Any, secrets: Any) -> bool:
    """Whether the serving overrides of any of `hosts` carry a secret: the serving specs built from them then
    hold it too, and every step that shows a spec (render, serve, doctor) sets no_log from this."""
    if isinstance(hosts, (str, bytes, Mapping)) or not hasattr(hosts, "__iter__"):
        raise AnsibleFilterError("spark_serve_overrides_secret: hosts must be a list of inventory hosts")
    try:
        overrides = [hostvars[host].get("spark_serve_overrides") or {} for host in hosts]
    except KeyError as exc:
        raise AnsibleFilterError(f"spark_serve_overrides_secret: no host {exc} in hostvars") from exc
    return _REDACT.holds_secret(_plain_value(overrides), _secret_list("spark_serve_overrides_secret", secrets))


class FilterModule:
    """sparkfleet redaction filter."""

    def filters(self) -> dict[str, Any]:
        return {"spark_redact": spark_redact, "spark_holds_secret": spark_holds_secret,
                "spark_known_secrets": spark_known_secrets, "spark_serve_overrides_secret": spark_serve_overrides_secret}
