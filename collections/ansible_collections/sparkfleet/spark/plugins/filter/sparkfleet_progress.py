"""Progress filter: the line printed each round while a long job runs in the background
(module_utils/spark_progress.py; the round's figures come from the spark_job_progress module)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_progress as _PROGRESS


def spark_progress_line(label: Any, elapsed_s: Any, ended: Any, done_bytes: Any = None, total_bytes: Any = 0,
                        previous_bytes: Any = None, interval_s: Any = 0, stage: Optional[str] = None,
                        step: Optional[str] = None) -> str:
    """'<label>: <s> s, <bytes> of <total> (<pct> %), <rate>/s, stage <stage>, step <i/n>: <what>, running|ended'."""
    if not isinstance(ended, bool):
        raise AnsibleFilterError(f"spark_progress_line: ended must be a boolean, got {ended!r}")
    if isinstance(elapsed_s, str):
        try:
            elapsed_s = float(elapsed_s)
        except ValueError as exc:
            raise AnsibleFilterError(f"spark_progress_line: elapsed_s must be seconds, got {elapsed_s!r}") from exc
    try:
        return _PROGRESS.progress_line(str(label), elapsed_s, ended, done_bytes, total_bytes, previous_bytes,
                                       interval_s, stage or None, step or None)
    except _PROGRESS.ProgressError as exc:
        raise AnsibleFilterError(f"spark_progress_line: {exc}") from exc


def spark_progress_lines(result: Any, label: Any, elapsed_s: Any) -> list[str]:
    """The log lines a spark_job_progress round returned, each prefixed with `label` and the elapsed seconds."""
    if not isinstance(result, Mapping):
        raise AnsibleFilterError("spark_progress_lines: result must be a spark_job_progress result")
    lines = result.get("lines") or []
    return [f"{label}: {int(float(elapsed_s))} s: {line}" for line in lines if str(line).strip()]


def spark_progress_round_s(base_s: Any, rounds: Any, waited_s: Any) -> int:
    """Seconds the next round waits: `base_s`, and past 120 rounds a tenth of the time waited so far, so a job of
    many hours is followed in fewer than Ansible's include depth of rounds (each round includes the next)."""
    try:
        return _PROGRESS.round_seconds(int(base_s), int(rounds), float(waited_s))
    except (TypeError, ValueError, _PROGRESS.ProgressError) as exc:
        raise AnsibleFilterError(f"spark_progress_round_s: {exc}") from exc


class FilterModule:
    """sparkfleet progress filters."""

    def filters(self) -> dict[str, Any]:
        return {"spark_progress_line": spark_progress_line, "spark_progress_lines": spark_progress_lines,
                "spark_progress_round_s": spark_progress_round_s}
