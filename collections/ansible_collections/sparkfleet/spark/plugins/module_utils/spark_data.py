"""Plain-data conversion shared by the controller-side filters."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def plain(value: Any) -> Any:
    """Turn Ansible's lazy/templated containers and strings into plain Python data (str keys)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return [plain(v) for v in value]
    return value
