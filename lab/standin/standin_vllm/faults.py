"""Test-double-only fault injection: the next n generation requests fail in a chosen way."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

KINDS = ("http_500", "drop_stream", "stall", "preempt")


@dataclass
class Fault:
    """What the current request must suffer (at most one kind, taken in KINDS order)."""

    kind: Optional[str] = None
    stall_s: float = 0.0


@dataclass
class Faults:
    """Pending fault counts plus how many of each were served."""

    pending: Dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    served: Dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    stall_s: float = 5.0

    def arm(self, body: Mapping[str, Any]) -> None:
        """Add counts from an admin request; raises ValueError naming the bad field."""
        unknown = set(body) - set(KINDS) - {"stall_s"}
        if unknown:
            raise ValueError(f"unknown fault field(s): {', '.join(sorted(unknown))}")
        for kind in KINDS:
            value = body.get(kind, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{kind} must be a non-negative integer")
        stall_s = body.get("stall_s", self.stall_s)
        if not isinstance(stall_s, (int, float)) or isinstance(stall_s, bool) or stall_s < 0:
            raise ValueError("stall_s must be a non-negative number of seconds")
        self.stall_s = float(stall_s)
        for kind in KINDS:
            self.pending[kind] += int(body.get(kind, 0))

    def take(self) -> Fault:
        """The fault for the next generation request, consuming one pending count."""
        for kind in KINDS:
            if self.pending[kind] > 0:
                self.pending[kind] -= 1
                self.served[kind] += 1
                return Fault(kind, self.stall_s if kind == "stall" else 0.0)
        return Fault()

    def clear(self) -> None:
        self.pending = {k: 0 for k in KINDS}
