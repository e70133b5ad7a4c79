#!/usr/bin/python
"""Arm, switch, disarm and clean up the fail-closed memory guard of a serving container."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_memory_guard
short_description: Fail-closed MemAvailable guard of a container as a protected transient systemd unit
description:
  - Runs a small watcher as the transient unit C(<unit_name>.service) (C(systemd-run --collect), C(Type=simple),
    C(OOMScoreAdjust=-1000), C(MemoryMin=64M), C(CPUWeight=1000), C(SyslogIdentifier=spark-memguard)). Every
    O(interval) seconds it reads C(MemAvailable) from C(/proc/meminfo) and, when it is below O(threshold), kills
    the container at once with C(docker kill --signal KILL) (no graceful stop) and exits 1.
  - The watcher ends with the container (exit 0 once a container it saw running has stopped), kills and exits 1
    when a container it saw running can no longer be inspected or when C(MemAvailable) cannot be read, and exits 1
    when the container has not run within O(wait_for_container) seconds or when memory is already below the
    threshold before the container runs (it refuses to keep waiting).
  - Every sample is logged to the journal at debug priority; every trip and every other ending at err priority
    with the wall-clock time (UTC) and the values in bytes and GiB (C(journalctl -t spark-memguard)).
  - The watcher keeps a status file (O(state_dir)/<unit_name>.json) with its parameters, pid, first and last
    sample and, once it ended, the event, exit code and whether it killed. The module waits up to
    O(confirm_timeout) seconds for the first sample before returning, so the container may only be started
    after the guard has confirmed; a guard that ends or trips at its first sample, or does not confirm in time,
    fails the task (an unconfirmed unit is stopped first).
  - Idempotent. Armed with the same container, phase, threshold, interval and wait, by the running unit whose
    pid the status file records, nothing changes. Another phase or other parameters stop the unit and arm it
    again under the same name (a phase switch). A guard left by an interrupted run, an active unit without a
    status file, a status file of another pid, a live-looking status file without a unit, or a failed unit that
    was not collected, is reported in RV(stale) and replaced (O(state=armed)) or removed.
  - The watcher program is shipped with the module (C(memguard.py) and C(spark_memguard.py) in O(program_dir))
    and replaced whenever its content differs.
version_added: "0.1.0"
author: sparkfleet
options:
  container:
    description: Name of the container the guard protects the node from.
    type: str
    required: true
  state:
    description:
      - C(armed) runs the guard with the given phase and parameters (arming, re-arming or switching phase).
      - C(disarmed) stops the unit, resets a failed unit and removes its status file.
      - C(absent) does what C(disarmed) does and also removes the shipped program when no other guard's status
        file remains in O(state_dir).
    type: str
    choices: [armed, disarmed, absent]
    default: armed
  phase:
    description:
      - C(startup) is armed before the container starts and waits for it (defaults 5 GiB, 0.25 s, 120 s).
      - C(steady) is armed once the service is ready; the container must already run (defaults 3 GiB, 2 s, 0 s).
    type: str
    choices: [startup, steady]
    default: startup
  threshold:
    description:
      - Kill when MemAvailable drops below this. Bytes as an integer, or a string with a binary unit such as
        C(5GiB), C(3 GiB), C(512MiB). Defaults to the phase's reference value (5 GiB startup, 3 GiB steady).
    type: raw
    aliases: [threshold_bytes]
  interval:
    description: Seconds between samples (fractions allowed). Defaults to 0.25 (startup) or 2 (steady).
    type: float
  wait_for_container:
    description:
      - Seconds the guard waits for the container to run before it gives up (exit 1). 0 means the container
        must already run at the first sample. Defaults to 120 (startup) or 0 (steady).
    type: int
  unit_name:
    description: Name of the transient unit without C(.service). Defaults to C(<container>-memguard).
    type: str
  confirm_timeout:
    description: Seconds to wait for the guard's first sample after starting it.
    type: float
    default: 5.0
  state_dir:
    description: Directory of the guards' status files (a tmpfs, so a reboot leaves no stale status).
    type: path
    default: /run/sparkfleet/memguard
  program_dir:
    description: Where the watcher program is installed.
    type: path
    default: /usr/local/libexec/sparkfleet
  python:
    description: Python 3 interpreter that runs the watcher. Defaults to the interpreter running this module.
    type: path
  docker:
    description: Docker CLI the watcher uses to inspect and kill the container. Defaults to C(docker) on PATH.
    type: path
  user:
    description: Run the unit as this user (C(User=)); it must be allowed to use Docker. Default root.
    type: str
attributes:
  check_mode:
    support: full
    description: Reads the unit and status file and reports what would change (RV(actions)); changes nothing.
  diff_mode:
    support: full
    description: Shows the guard before (running or not, recorded parameters) and after.
notes:
  - Needs systemd (C(systemctl), C(systemd-run)) and root (become) on the node.
  - A phase switch stops the old unit before the new one confirms, leaving a gap of about one sample.
  - Reference values and loop semantics are in image-model-serve.md section 7.
"""

EXAMPLES = r"""
- name: serve | Arm the startup guard before the container exists
  sparkfleet.spark.spark_memory_guard:
    container: dsv41-karmic-kraken
    phase: startup
    threshold: 5GiB
    interval: 0.25
    wait_for_container: 120
  register: spark_serve_guard

- name: serve | Switch to the steady guard after the API answered
  sparkfleet.spark.spark_memory_guard:
    container: dsv41-karmic-kraken
    phase: steady
    threshold: 3 GiB
    interval: 2

- name: serve | Stop the guard before stopping the container
  sparkfleet.spark.spark_memory_guard:
    container: dsv41-karmic-kraken
    state: disarmed

- name: serve | Remove every trace of the guard
  sparkfleet.spark.spark_memory_guard:
    container: dsv41-karmic-kraken
    state: absent
"""

RETURN = r"""
msg:
  description: What happened, for example C(startup memguard active for dsv41-karmic-kraken (threshold 5.00 GiB, ...)).
  returned: always
  type: str
state:
  description: The requested state.
  returned: always
  type: str
unit:
  description: Unit name including C(.service).
  returned: always
  type: str
  sample: dsv41-karmic-kraken-memguard.service
params:
  description: The guard's parameters (for C(disarmed)/C(absent) those the phase would use).
  returned: always
  type: dict
  contains:
    container:
      description: Container name.
      type: str
    phase:
      description: startup or steady.
      type: str
    threshold_bytes:
      description: Threshold in bytes.
      type: int
    threshold:
      description: Threshold in GiB, for people.
      type: str
    interval:
      description: Seconds between samples.
      type: float
    wait_for_container:
      description: Seconds to wait for the container.
      type: int
    state_file:
      description: Path of the status file.
      type: str
actions:
  description: Steps taken (or, in check mode, that would be taken), in order.
  returned: always
  type: list
  elements: str
  sample: [stop-unit, remove-state, start-unit, confirm-first-sample]
reason:
  description: Why the steps were needed, for example C(switch the guard from startup to steady).
  returned: always
  type: str
stale:
  description: A leftover guard that was found and handled, or null.
  returned: always
  type: str
guard:
  description: The status file after the run (null when disarmed, absent or in check mode before arming).
  returned: always
  type: dict
  contains:
    pid:
      description: Pid of the watcher (the unit's MainPID).
      type: int
    status:
      description: waiting (container not seen yet), guarding, tripped, exited or stopped.
      type: str
    first_sample:
      description: Time (UTC), MemAvailable bytes and container state of the first sample.
      type: dict
    last_sample:
      description: The latest recorded sample (written at least once a second).
      type: dict
"""

import os
import sys
import tempfile
import time
from types import ModuleType
from typing import Any, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard as memguard
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard_watch as watch
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_memguard import (
    CONFIRM, INSTALL, REMOVE_PROGRAM, REMOVE_STATE, RESET, START, STOP, GuardConfig, Plan, UnitStatus, build_config,
    confirmation, describe, other_guard_files, parse_status_document, parse_systemctl_show, plan_guard,
    systemd_run_argv, unit_file)

PROGRAM = "memguard.py"
LIBRARY = "spark_memguard.py"
SYSTEMCTL_NOT_LOADED = 5


def _source(module: ModuleType) -> str:
    """Source of a bundled module_utils file (zipimport inside AnsiballZ, plain files in tests)."""
    loader = getattr(module, "__loader__", None)
    text = loader.get_source(module.__name__) if loader is not None and hasattr(loader, "get_source") else None
    if text is None:
        with open(module.__file__, encoding="utf-8") as handle:
            text = handle.read()
    return text


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


class Node:
    """The module's I/O on the node: systemctl, systemd-run, journalctl and files."""

    def __init__(self, module: AnsibleModule, config: GuardConfig) -> None:
        self.module = module
        self.config = config
        self.program_dir = module.params["program_dir"]
        self.state_dir = module.params["state_dir"]
        self.systemctl = module.get_bin_path("systemctl", required=True)
        self.sources = {PROGRAM: _source(watch), LIBRARY: _source(memguard)}
        # Resolved before any step: a missing tool must not fail a phase switch after the old guard stopped.
        armed = module.params["state"] == "armed"
        self.docker = module.params["docker"] or (module.get_bin_path("docker", required=True) if armed else None)
        self.systemd_run = module.get_bin_path("systemd-run", required=True) if armed else None

    def unit(self) -> UnitStatus:
        rc, out, err = self.module.run_command(
            [self.systemctl, "show", "--property=LoadState,ActiveState,MainPID", "--", unit_file(self.config.unit)])
        if rc != 0:
            self.module.fail_json(msg=f"systemctl show {unit_file(self.config.unit)} failed (rc {rc}): {err.strip()}")
        return parse_systemctl_show(out)

    def doc(self) -> Optional[Dict[str, Any]]:
        return parse_status_document(_read(self.config.state_file))

    def program_current(self) -> bool:
        return all(_read(os.path.join(self.program_dir, n)) == text for n, text in self.sources.items())

    def program_installed(self) -> bool:
        return any(os.path.exists(os.path.join(self.program_dir, n)) for n in self.sources)

    def other_guards(self) -> bool:
        names = os.listdir(self.state_dir) if os.path.isdir(self.state_dir) else []
        return other_guard_files(names, self.config.unit)

    def run(self, argv: List[str], what: str) -> None:
        rc, out, err = self.module.run_command(argv)
        if rc != 0:
            self.module.fail_json(msg=f"{what} failed (rc {rc}): {(err or out).strip()}", cmd=argv)

    def stop(self) -> None:
        argv = [self.systemctl, "stop", "--", unit_file(self.config.unit)]
        rc, out, err = self.module.run_command(argv)
        # rc 5 = not loaded: the guard exited and --collect unloaded it between our look and the stop.
        if rc not in (0, SYSTEMCTL_NOT_LOADED):
            self.module.fail_json(msg=f"stopping {unit_file(self.config.unit)} failed (rc {rc}): {(err or out).strip()}", cmd=argv)

    def reset_failed(self) -> None:
        argv = [self.systemctl, "reset-failed", "--", unit_file(self.config.unit)]
        rc, out, err = self.module.run_command(argv)
        # --collect usually unloads a stopped unit first; then there is nothing left to reset.
        if rc != 0 and self.unit().loaded:
            self.module.fail_json(msg=f"systemctl reset-failed failed (rc {rc}): {(err or out).strip()}", cmd=argv)

    def remove_state(self) -> None:
        if os.path.exists(self.config.state_file):
            os.remove(self.config.state_file)

    def install(self) -> None:
        os.makedirs(self.program_dir, mode=0o755, exist_ok=True)
        for name, text in self.sources.items():
            fd, tmp = tempfile.mkstemp(dir=self.program_dir, prefix=f".{name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            dest = os.path.join(self.program_dir, name)
            self.module.atomic_move(tmp, dest)
            # atomic_move gives a new file the umask's mode; the program must be executable.
            os.chmod(dest, 0o755 if name == PROGRAM else 0o644)

    def remove_program(self) -> None:
        for name in self.sources:
            path = os.path.join(self.program_dir, name)
            if os.path.exists(path):
                os.remove(path)

    def start(self) -> None:
        params = self.module.params
        argv = systemd_run_argv(self.config, params["python"] or sys.executable, os.path.join(self.program_dir, PROGRAM),
                                str(self.docker), str(self.systemd_run), params["user"])
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        self.run(argv, f"systemd-run {unit_file(self.config.unit)}")

    def journal(self) -> str:
        journalctl = self.module.get_bin_path("journalctl")
        if not journalctl:
            return ""
        _, out, _ = self.module.run_command([journalctl, "--unit", unit_file(self.config.unit), "-n", "20",
                                             "--no-pager", "-o", "short-iso"])
        return out

    def confirm(self, timeout: float) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            unit, doc = self.unit(), self.doc()
            verdict, message = confirmation(self.config, unit, doc)
            if verdict == "confirmed":
                return dict(doc or {}, msg=message)
            if verdict == "failed" or time.monotonic() >= deadline:
                if unit.running:
                    self.stop()
                why = message if verdict == "failed" else (f"{self.config.phase} memguard {unit_file(self.config.unit)} "
                                                           f"did not confirm a first sample within {timeout:g}s; stopped it")
                self.module.fail_json(msg=why, guard=doc, journal=self.journal())
            time.sleep(0.1)


def _config(module: AnsibleModule) -> GuardConfig:
    params = module.params
    try:
        return build_config(params["container"], params["phase"], params["threshold"], params["interval"],
                            params["wait_for_container"], params["unit_name"], params["state_dir"])
    except ValueError as exc:
        module.fail_json(msg=f"spark_memory_guard: {exc}")
        raise  # unreachable: fail_json exits


def _apply(node: Node, plan: Plan) -> Optional[Dict[str, Any]]:
    handlers = {STOP: node.stop, RESET: node.reset_failed, REMOVE_STATE: node.remove_state, INSTALL: node.install,
                START: node.start, REMOVE_PROGRAM: node.remove_program}
    for step in plan.steps:
        if step == CONFIRM:
            return node.confirm(node.module.params["confirm_timeout"])
        handlers[step]()
    return None


def _diff(unit: UnitStatus, doc: Optional[Dict[str, Any]], config: GuardConfig, state: str) -> Dict[str, Any]:
    before = {"running": unit.running, **{k: (doc or {}).get(k) for k in config.params()}}
    after = {"running": state == "armed", **(config.params() if state == "armed" else {k: None for k in config.params()})}
    return {"before": before, "after": after}


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            container=dict(type="str", required=True),
            state=dict(type="str", default="armed", choices=["armed", "disarmed", "absent"]),
            phase=dict(type="str", default="startup", choices=["startup", "steady"]),
            threshold=dict(type="raw", aliases=["threshold_bytes"]),
            interval=dict(type="float"),
            wait_for_container=dict(type="int"),
            unit_name=dict(type="str"),
            confirm_timeout=dict(type="float", default=5.0),
            state_dir=dict(type="path", default="/run/sparkfleet/memguard"),
            program_dir=dict(type="path", default="/usr/local/libexec/sparkfleet"),
            python=dict(type="path"),
            docker=dict(type="path"),
            user=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    config = _config(module)
    if module.params["confirm_timeout"] <= 0:
        module.fail_json(msg=f"spark_memory_guard: confirm_timeout must be positive, got {module.params['confirm_timeout']}")
    node = Node(module, config)
    unit, doc, state = node.unit(), node.doc(), module.params["state"]
    plan = plan_guard(state, config, unit, doc, node.program_current(), node.program_installed(), node.other_guards())
    result: Dict[str, Any] = dict(changed=plan.changed, state=state, unit=unit_file(config.unit), params=describe(config),
                                  actions=list(plan.steps), reason=plan.reason, stale=plan.stale,
                                  guard=doc if state == "armed" and not plan.changed else None, msg=plan.reason)
    if module._diff:
        result["diff"] = _diff(unit, doc, config, state)
    if plan.changed and not module.check_mode:
        confirmed = _apply(node, plan)
        if confirmed is not None:
            result["msg"] = confirmed.pop("msg")
            result["guard"] = confirmed
    module.exit_json(**result)


if __name__ == "__main__":
    main()
