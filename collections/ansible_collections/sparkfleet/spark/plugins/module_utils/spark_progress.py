"""What a long-running background job has done so far: whether it ended, bytes written under a directory,
bytes a process has read from a file, new lines of its log and the build step they name.

Pure parsing functions first (unit-tested on text in the formats the tools print), then the small readers of
/proc and the file system, which take their roots as arguments so tests run them on fixture trees.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_disk import human_bytes

# Legacy builder:   "Step 3/12 : RUN make -j8"
_LEGACY_STEP = re.compile(r"^Step (?P<step>\d+/\d+) : (?P<what>.*)$")
# "FROM base AS builder" as the legacy builder prints it in a step line: the stage the next steps belong to.
_LEGACY_FROM = re.compile(r"^FROM\s+\S+(?:\s+AS\s+(?P<stage>\S+))?\s*$", re.IGNORECASE)
# BuildKit --progress=plain: "#7 [builder 2/4] RUN make -j8" (stage omitted for an unnamed stage).
_BUILDKIT_STEP = re.compile(r"^#\d+ \[(?:(?P<stage>[^\]\s]+) )?(?P<step>\d+/\d+)\] (?P<what>.*)$")
STEP_TEXT_MAX = 120


class ProgressError(Exception):
    """A progress source that cannot be read as asked (named in the message)."""


def job_ended(text: Optional[str]) -> bool:
    """Whether an Ansible async job's results file says the job ended (any outcome).

    The wrapper writes {"started": true, "finished": false, ...} when the job starts and replaces it (by
    rename) with the module's result when it ends; a missing or unreadable file is a job still starting.
    """
    if not text:
        return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    return not (data.get("started") in (True, 1) and data.get("finished") in (False, 0))


def build_step(lines: List[str], stage: Optional[str] = None) -> Tuple[Optional[str], Optional[str]]:
    """The stage and the last step that `lines` of `docker build` output name, as (stage, step text).

    `stage` is the stage known from earlier lines (the legacy builder names a stage only in its FROM step).
    Returns (stage, None) when no step line is among `lines`.
    """
    step = None
    for raw in lines:
        line = raw.rstrip()
        kit = _BUILDKIT_STEP.match(line)
        if kit:
            stage = kit.group("stage") or stage
            step = _step_text(kit.group("step"), kit.group("what"))
            continue
        legacy = _LEGACY_STEP.match(line)
        if legacy:
            named = _LEGACY_FROM.match(legacy.group("what"))
            if named:
                stage = named.group("stage") or None
            step = _step_text(legacy.group("step"), legacy.group("what"))
    return stage, step


def _step_text(step: str, what: str) -> str:
    what = " ".join(what.split())
    if len(what) > STEP_TEXT_MAX:
        what = what[:STEP_TEXT_MAX - 1] + "…"
    return f"step {step}: {what}"


def tree_bytes(root: str) -> int:
    """Bytes of the regular files under `root` (0 when it does not exist); files vanishing meanwhile are skipped."""
    total = 0
    if os.path.isfile(root):
        return os.lstat(root).st_size
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                info = os.lstat(os.path.join(directory, name))
            except FileNotFoundError:
                continue
            total += info.st_size
    return total


def read_position(path: str, proc_root: str = "/proc") -> Optional[int]:
    """Bytes read so far from `path` by the process that holds it open (the largest offset of any holder).

    Reads /proc/<pid>/fd/* links and the "pos:" line of the matching /proc/<pid>/fdinfo/<fd>. None when no
    process holds the file (not started yet, or done).
    """
    target = os.path.realpath(path)
    best: Optional[int] = None
    for pid in _pids(proc_root):
        fd_dir = Path(proc_root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # the process ended, or is not ours to read
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd) != target:
                    continue
                pos = _fdinfo_pos(Path(proc_root, pid, "fdinfo", fd).read_text())
            except OSError:
                continue
            if pos is not None and (best is None or pos > best):
                best = pos
    return best


def _pids(proc_root: str) -> List[str]:
    try:
        return sorted((name for name in os.listdir(proc_root) if name.isdigit()), key=int)
    except OSError as exc:
        raise ProgressError(f"cannot list {proc_root}: {exc}") from exc


def _fdinfo_pos(text: str) -> Optional[int]:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "pos":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def new_lines(path: str, offset: int, max_lines: int) -> Tuple[List[str], int]:
    """Complete lines appended to `path` after byte `offset`, at most the last `max_lines` of them, and the offset
    after the last complete line. A file shorter than `offset` (rewritten) is read from its start."""
    if offset < 0 or max_lines < 0:
        raise ProgressError(f"offset and max_lines must be >= 0, got {offset} and {max_lines}")
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = offset if offset <= size else 0
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        raise ProgressError(f"cannot read {path}: {exc}") from exc
    end = data.rfind(b"\n") + 1
    text = data[:end].decode("utf-8", errors="replace")
    lines = [line.rstrip("\r") for line in text.split("\n")[:-1]] if end else []
    return lines[-max_lines:] if max_lines else [], start + end


def wait_for_job(results_file: str, wait_s: float, sleep_s: float = 1.0) -> Tuple[bool, float]:
    """Wait up to `wait_s` seconds for the async job to end; (ended, seconds waited)."""
    started = time.monotonic()
    while True:
        ended = job_ended(_read_text(results_file))
        waited = time.monotonic() - started
        if ended or waited >= wait_s:
            return ended, waited
        time.sleep(min(sleep_s, max(wait_s - waited, 0.0)))


def _read_text(path: str) -> Optional[str]:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def measure(params: Dict[str, Any], proc_root: str = "/proc") -> Dict[str, Any]:
    """Everything the module reports after its wait, from its parameters."""
    result: Dict[str, Any] = {}
    if params.get("bytes_under"):
        result["bytes"] = sum(tree_bytes(path) for path in params["bytes_under"])
    if params.get("reader_of"):
        result["read_bytes"] = read_position(params["reader_of"], proc_root)
        result["read_size"] = os.stat(params["reader_of"]).st_size if os.path.exists(params["reader_of"]) else None
    if params.get("log"):
        lines, offset = new_lines(params["log"], int(params.get("log_offset") or 0), int(params["max_lines"]))
        stage, step = build_step(lines, params.get("stage") or None)
        result.update(lines=lines, log_offset=offset, stage=stage, step=step or params.get("step") or None)
    return result


def progress_line(label: str, elapsed_s: Any, ended: bool, done_bytes: Any = None, total_bytes: Any = 0,
                  previous_bytes: Any = None, interval_s: Any = 0, stage: Optional[str] = None,
                  step: Optional[str] = None) -> str:
    """One line a person follows: what, how long, bytes (of the total, rate since the previous round), the build
    stage and step, and whether it still runs."""
    if isinstance(elapsed_s, bool) or not isinstance(elapsed_s, (int, float)) or elapsed_s < 0:
        raise ProgressError(f"elapsed_s must be seconds >= 0, got {elapsed_s!r}")
    parts = [f"{label}: {int(elapsed_s)} s"]
    if done_bytes is not None:
        done = _count(done_bytes, "done_bytes")
        text = human_bytes(done)
        total = _count(total_bytes or 0, "total_bytes")
        if total:
            text += f" of {human_bytes(total)} ({min(done / total, 1.0) * 100:.1f} %)"
        if previous_bytes is not None and float(interval_s or 0) > 0:
            gained = max(done - _count(previous_bytes, "previous_bytes"), 0)
            text += f", {human_bytes(int(gained / float(interval_s)))}/s"
        parts.append(text)
    if stage:
        parts.append(f"stage {stage}")
    if step:
        parts.append(step)
    parts.append("ended" if ended else "running")
    return ", ".join(parts)


GROW_AFTER_ROUNDS = 120


def round_seconds(base_s: int, rounds: int, waited_s: float) -> int:
    """`base_s`, and from round GROW_AFTER_ROUNDS on a tenth of `waited_s` when that is longer."""
    if base_s < 1 or rounds < 0 or waited_s < 0:
        raise ProgressError(f"base_s must be >= 1, rounds and waited_s >= 0; got {base_s}, {rounds}, {waited_s}")
    return int(max(base_s, waited_s * 0.1 if rounds >= GROW_AFTER_ROUNDS else 0))


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise ProgressError(f"{name} must be a byte count, got {value!r}")
    try:
        count = int(value)
    except (TypeError, ValueError) as exc:
        raise ProgressError(f"{name} must be a byte count, got {value!r}") from exc
    if count < 0:
        raise ProgressError(f"{name} must be >= 0, got {count}")
    return count
