"""Redaction filter: hide the secrets a site marks (and secret-named values) in what a role prints or saves,
such as a saved docker inspect document or a container's environment (module_utils/spark_redact.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_redact as _REDACT
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain


def spark_redact(value: Any, secrets: Any) -> Any:
    """`value` (text, a docker inspect document, an environment) with every secret replaced by <redacted>."""
    if isinstance(secrets, (str, bytes, Mapping)) or not hasattr(secrets, "__iter__"):
        raise AnsibleFilterError("spark_redact: secrets must be a list of secret values, got "
                                 f"{type(secrets).__name__}")
    return _REDACT.redact(_plain(value) if not isinstance(value, str) else str(value), [str(s) for s in secrets
                                                                                      if s is not None])


def spark_known_secrets(variables: Mapping[str, Any]) -> list[str]:
    """The values a site marks secret, from a host's variables (`hostvars[inventory_hostname]`)."""
    try:
        return _REDACT.known_secrets(variables)
    except ValueError as exc:
        raise AnsibleFilterError(f"spark_known_secrets: {exc}") from exc


class FilterModule:
    """sparkfleet redaction filter."""

    def filters(self) -> dict[str, Any]:
        return {"spark_redact": spark_redact, "spark_known_secrets": spark_known_secrets}
