#!/usr/bin/python
"""Watch one serving rank (container and memory guard) while polling the head's API for readiness."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_serve_ready
short_description: Watch a serving rank's container and guard while polling the head's /v1/models
description:
  - Runs on every rank at once during a start. Every O(interval) seconds it sends C(GET /v1/models) to O(url)
    with a short timeout, and inspects this rank's container O(container) and its memory guard unit.
  - Returns RV(state)=C(ready) as soon as the API answers 200 listing O(model); C(dead) as soon as the container
    does not run or the guard unit is not active (with the container's last log lines); C(timeout) at O(deadline);
    otherwise C(pending) after O(slice) seconds, so the caller can compare every rank and start the next slice.
  - Never fails on these outcomes (the play decides for the whole group, naming dead ranks); fails only on bad
    arguments or a missing docker CLI.
  - "Keeps the polling cadence: the time a poll takes comes off the sleep."
version_added: "0.1.0"
author: sparkfleet
options:
  url:
    description: The head's model list, for example C(http://10.0.1.71:8000/v1/models).
    type: str
    required: true
  model:
    description: Served model name that must appear in the list.
    type: str
    required: true
  container:
    description: Name of this rank's serving container.
    type: str
    required: true
  guard_unit:
    description: Memory guard unit without C(.service); defaults to C(<container>-memguard). Empty skips the guard check.
    type: str
  state_dir:
    description: Directory of the guards' status files.
    type: path
    default: /run/sparkfleet/memguard
  interval:
    description: Seconds between polls (the issue asks for at least 4 Hz).
    type: float
    default: 0.25
  request_timeout:
    description: Timeout of one API request in seconds.
    type: float
    default: 1.0
  slice:
    description: Return C(pending) after this many seconds without an outcome.
    type: float
    default: 3.0
  deadline:
    description: Wall-clock time (seconds since the epoch) at which the wait as a whole gives up.
    type: float
    required: true
  wait_for_container:
    description:
      - Seconds a container that does not exist yet (or was only created) is not counted as dead, until it has run
        once. Lets the watch start before the container, so it already polls when the head's API comes up.
    type: float
    default: 0
  name:
    description: How messages name this rank (the inventory host); defaults to the node's hostname.
    type: str
  log_lines:
    description: Container log lines returned for a dead rank.
    type: int
    default: 20
  secrets:
    description:
      - Values hidden in the returned log lines, which are the engine's own output and may show its arguments or
        environment; values of secret-named pairs (C(VLLM_API_KEY=...)) are hidden too (module_utils/spark_redact).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Read-only; polls and inspects the same way in check mode.
  diff_mode:
    support: none
    description: Nothing changes.
"""

EXAMPLES = r"""
- name: serve | Watch every rank and poll the head's API
  sparkfleet.spark.spark_serve_ready:
    url: http://10.0.1.71:8000/v1/models
    model: deepseek-v4.1-flash
    container: dsv41-karmic-kraken
    deadline: "{{ spark_serve_ready_deadline }}"
  register: spark_serve_ready_slice
"""

RETURN = r"""
state:
  description: ready, pending, dead or timeout.
  returned: always
  type: str
message:
  description: What was seen, starting with the host name.
  returned: always
  type: str
polls:
  description: Number of polls in this slice.
  returned: always
  type: int
first_ready_at:
  description: Wall-clock time (epoch seconds) of the first successful API poll, or null.
  returned: always
  type: float
container:
  description: The container's state at the last poll (exists, status, running, exit_code, oom_killed, error).
  returned: always
  type: dict
guard:
  description: The guard's ActiveState and status-file status at the last poll, or null when not checked.
  returned: always
  type: dict
log_tail:
  description: Last log lines of the container (only for a dead rank), with O(secrets) and secret-named values hidden.
  returned: always
  type: str
"""

import os
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional, Tuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_memguard import next_sleep
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_redact import redact_text
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_serve_ready import (
    DEAD, GUARD_SETTLE_S, ContainerState, GuardState, guard_may_lag, guard_problem, guard_state, log_excerpt,
    models_ready, not_started_yet, parse_container_state, parse_guard_status, rank_problems, verdict)


def _poll_api(url: str, timeout: float) -> Tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http to the head only
            return response.status, response.read(65536).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, OSError, ValueError):
        return 0, ""


class Rank:
    """This rank's I/O: docker inspect/logs, systemctl and the guard's status file."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.docker = module.get_bin_path("docker", required=True)
        self.systemctl = module.get_bin_path("systemctl", required=bool(module.params["guard_unit"] != ""))
        self.container = module.params["container"]
        unit = module.params["guard_unit"]
        self.unit = f"{self.container}-memguard" if unit is None else unit

    def container_state(self) -> ContainerState:
        rc, out, _ = self.module.run_command([self.docker, "inspect", "--format", "{{json .State}}", self.container])
        return parse_container_state(rc, out)

    def guard(self) -> Optional[GuardState]:
        if not self.unit:
            return None
        _, out, _ = self.module.run_command([self.systemctl, "show", "--property=ActiveState", "--value",
                                             f"{self.unit}.service"])
        path = os.path.join(self.module.params["state_dir"], f"{self.unit}.json")
        try:
            with open(path, encoding="utf-8") as handle:
                text: Optional[str] = handle.read()
        except OSError:
            text = None
        return guard_state(out.strip() or "unknown", parse_guard_status(text))

    def logs(self, lines: int) -> str:
        _, out, err = self.module.run_command([self.docker, "logs", "--timestamps", "--tail", str(lines), self.container])
        return log_excerpt(out + err, lines)


def settled_guard(rank: Rank, guard: Optional[GuardState]) -> Optional[GuardState]:
    """Re-read the guard until it shows the trip it may just have made, for at most GUARD_SETTLE_S."""
    until = time.monotonic() + GUARD_SETTLE_S
    while time.monotonic() < until:
        time.sleep(0.1)
        guard = rank.guard()
        if guard is None or guard_problem(rank.unit, guard) is not None:
            break
    return guard


def watch(module: AnsibleModule, rank: Rank) -> Dict[str, Any]:
    p = module.params
    started = time.time()
    slice_end = started + p["slice"]
    polls = 0
    seen_running = False
    while True:
        began = time.monotonic()
        status, body = _poll_api(p["url"], p["request_timeout"])
        now = time.time()
        ready = models_ready(status, body, p["model"])
        # The guard before the container: a guard that ended saw its container stop, so the inspect after it
        # sees the stopped container too (the other order could read "not created yet" and then "guard ended").
        guard = rank.guard()
        container = rank.container_state()
        polls += 1
        waiting = not_started_yet(container, seen_running, now - started, p["wait_for_container"])
        if not waiting and guard_may_lag(container, rank.unit, guard):
            guard = settled_guard(rank, guard)
        problems = rank_problems(None if waiting else container, rank.unit, guard)
        seen_running = seen_running or container.running
        outcome = verdict(p["name"] or os.uname()[1], ready, problems, time.time(), p["deadline"], slice_end)
        if outcome is not None:
            return {
                "state": outcome.state, "message": outcome.message, "polls": polls,
                "first_ready_at": now if ready else None, "container": container.as_dict(),
                "guard": guard.as_dict() if guard else None,
                "log_tail": redact_text(rank.logs(p["log_lines"]), p["secrets"])
                if outcome.state == DEAD and container.exists else "",
            }
        time.sleep(next_sleep(p["interval"], began, time.monotonic()))


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "container": {"type": "str", "required": True},
            "guard_unit": {"type": "str"},
            "state_dir": {"type": "path", "default": "/run/sparkfleet/memguard"},
            "interval": {"type": "float", "default": 0.25},
            "request_timeout": {"type": "float", "default": 1.0},
            "slice": {"type": "float", "default": 3.0},
            "deadline": {"type": "float", "required": True},
            "log_lines": {"type": "int", "default": 20},
            "wait_for_container": {"type": "float", "default": 0},
            "name": {"type": "str"},
            "secrets": {"type": "list", "elements": "str", "default": [], "no_log": True},
        },
        supports_check_mode=True,
    )
    for key in ("interval", "request_timeout", "slice"):
        if module.params[key] <= 0:
            module.fail_json(msg=f"{key} must be positive, got {module.params[key]}")
    result = watch(module, Rank(module))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
