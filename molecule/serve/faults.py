#!/usr/bin/env python3
"""Serve lab fault tests: each fault is a real ansible-playbook run that must fail clearly (or be interrupted),
after which the previous state must be intact. Run by verify.yml from the repository root with the molecule
inventory; prints one JSON line per check and exits 1 on the first broken expectation.

Faults: a replace with a broken image at -vvv --diff with a secret planted in the serving environment (the old
service answers again, the secret shows nowhere), a replace whose rename and then rollback fail on one rank (both
failures named, what is left listed, stop.yml clears it), a controller interrupted
between arming a guard and starting a container (the next run cleans up), a worker that exits during startup,
a startup guard whose threshold MemAvailable crosses (the guard kills the container). Then supervised mode: a
killed worker is restarted with its group in order, a second kill beyond the rate limit is not.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[2]))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"].rsplit("/", 1)[0]
# The serve lab by default; the site lab (molecule/site) passes its own hosts (head first) and broken image.
HOSTS = os.environ.get("SPARK_SERVE_LAB_HOSTS", "serve-dgx1,serve-dgx2,serve-dgx3").split(",")
NAME = "dsv41-karmic-kraken"
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp/serve-lab"))
REPORT = EPHEMERAL / "serve-status.json"
FAILED_DIR = EPHEMERAL / "failed-starts"
BROKEN_IMAGE = os.environ.get("SPARK_SERVE_LAB_BROKEN_IMAGE", "sparkfleet-serve-lab/standin:broken")
HEAD_URL = os.environ.get("SPARK_SERVE_LAB_HEAD_URL", "http://10.0.47.71:8000")


# Plain, uncoloured, one-line-per-result output whatever the caller (molecule sets its own colour and format).
PLAIN = {"ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_STDOUT_CALLBACK": "default",
         "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "PYTHONUNBUFFERED": "1"}
ENV = dict(os.environ, **PLAIN)


class Broken(AssertionError):
    """An expectation of the fault test that did not hold."""


def playbook(name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [str(ROOT / ".venv/bin/ansible-playbook"), "-i", INVENTORY, str(ROOT / "playbooks" / name),
            "-e", f"spark_serve_status_file={REPORT}", "-e", f"spark_serve_failed_dir={FAILED_DIR}", *extra]
    return subprocess.run(argv, cwd=ROOT, text=True, capture_output=True, check=False, env=ENV)


def node(host: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", host, *argv], text=True, capture_output=True, check=False)


def check(label: str, ok: bool, detail: Any = "") -> None:
    print(json.dumps({"check": label, "ok": ok, "detail": detail}), flush=True)
    if not ok:
        raise Broken(f"{label}: {detail}")


def fatal_message(run: subprocess.CompletedProcess[str]) -> str:
    """Every failure line of the run, whole: a check searches all of it, since a failure message carries each
    dead rank's last log lines and its length varies from run to run."""
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "serve failed:" in ln or "FAILED!" in ln]
    return "\n".join(lines) or run.stdout + run.stderr


def brief(text: str, keep: int = 1500) -> str:
    """What a check prints of a long message: its start (the ranks named) and its end (the verdict)."""
    return text if len(text) <= 2 * keep else f"{text[:keep]} [...] {text[-keep:]}"


def containers(host: str) -> dict[str, str]:
    out = node(host, "docker", "ps", "--all", "--filter", f"name=^{NAME}", "--format", "{{.Names}}\t{{.State}}\t{{.Image}}")
    return {ln.split("\t")[0]: ln for ln in out.stdout.splitlines() if ln}


def running(host: str) -> list[str]:
    """Serving containers that run on the host (a launch creates them all before it starts any)."""
    return [name for name, line in containers(host).items() if line.split("\t")[1] == "running"]


def guard_active(host: str) -> str:
    return node(host, "systemctl", "is-active", f"{NAME}-memguard.service").stdout.strip()


def healthy_report() -> dict[str, Any]:
    run = playbook("status.yml")
    report = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    check("status.yml exits 0 and reports healthy", run.returncode == 0 and report.get("healthy") is True,
          {"rc": run.returncode, "report": report})
    return report


def nothing_left(label: str) -> None:
    left = {h: (containers(h), guard_active(h)) for h in HOSTS}
    check(f"{label}: no serving container and no guard on any rank",
          all(not c and g != "active" for c, g in left.values()), left)


def stopped_group() -> None:
    """Nothing of the group left: stop.yml, unless the previous fault already ended there."""
    if any(containers(h) or guard_active(h) == "active" for h in HOSTS):
        check("stop.yml stops the group", playbook("stop.yml").returncode == 0)
        nothing_left("after stop.yml")


def planted_secret_vars() -> tuple[str, Path]:
    """A random secret in a secret-named variable of the serving environment, in a 0600 extra-vars file."""
    secret = "lab-" + secrets.token_hex(16)
    path = EPHEMERAL / "planted-secret.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps({"serve_lab_env": {"STANDIN_LAB_API_KEY": secret}}))
    return secret, path


def replace_broken() -> None:
    """The replace runs at -vvv with --diff and a secret planted in the serving environment, which the broken
    image prints to its log: neither the output nor the saved logs may show it."""
    before = healthy_report()
    secret, extra = planted_secret_vars()
    try:
        run = playbook("serve.yml", "-vvv", "--diff", "-e", "spark_serve_replace=true",
                       "-e", f"spark_image_tag={BROKEN_IMAGE}", "-e", f"@{extra}")
    finally:
        extra.unlink()
    msg = fatal_message(run)
    check("replace with a broken image fails naming the dead rank", run.returncode != 0
          and f"{HOSTS[1]}: container is exited, exit code 3" in msg and "previous service was restored" in msg, brief(msg))
    output = run.stdout + run.stderr
    check("a secret in the serving environment appears nowhere in the -vvv --diff output", secret not in output,
          [ln[:300] for ln in output.splitlines() if secret in ln][:5])
    check("the steps that show the serve spec and the container were hidden", "the output has been hidden" in output,
          "no hidden task in the output")
    after = healthy_report()
    check("the previous service answers again with its own image",
          [r["image_id"] for r in after["ranks"]] == [r["image_id"] for r in before["ranks"]], after["ranks"])
    check("no <name>-pre-* container is left", all(set(containers(h)) == {NAME} for h in HOSTS),
          {h: containers(h) for h in HOSTS})
    logs = sorted(FAILED_DIR.glob(f"*-{NAME}/{HOSTS[0]}.log"))
    saved = "".join(p.read_text() for p in logs[-1].parent.glob("*.log")) if logs else ""
    check("the failed containers' logs are saved on the controller", "broken test image" in saved,
          [str(p) for p in logs[-1:]])
    check("the saved logs show the planted variable redacted", secret not in saved
          and "STANDIN_LAB_API_KEY=<redacted>" in saved, [ln for ln in saved.splitlines() if "STANDIN_LAB_API_KEY" in ln][:4])


# TEST DOUBLE on the last rank: `docker` that fails the subcommands listed in FAIL_LIST, else the real one.
DOCKER_DOUBLE = """#!/bin/sh
# TEST DOUBLE (serve fault, molecule/serve/faults.py): fails the docker subcommands listed in {fail_list}.
if [ -f {fail_list} ] && grep -qx -- "$1" {fail_list}; then
  echo "docker $1: refused by the lab's test double" >&2
  exit 1
fi
exec /usr/bin/docker "$@"
"""
DOCKER_DOUBLE_PATH = "/usr/local/bin/docker"
FAIL_LIST = "/run/sparkfleet-lab-docker-fail"


def docker_double(host: str, subcommands: list[str]) -> None:
    script = DOCKER_DOUBLE.format(fail_list=FAIL_LIST)
    install = (f"cat > {DOCKER_DOUBLE_PATH} && chmod 0755 {DOCKER_DOUBLE_PATH} && "
               f"printf '%s\\n' {' '.join(subcommands)} > {FAIL_LIST}")
    run = subprocess.run(["docker", "exec", "-i", host, "sh", "-c", install], input=script, text=True,
                         capture_output=True, check=False)
    check(f"the docker test double is in place on {host}", run.returncode == 0, run.stderr)


def remove_docker_double(host: str) -> None:
    node(host, "rm", "-f", DOCKER_DOUBLE_PATH, FAIL_LIST)


def rollback_fails_too() -> None:
    """A replace whose `docker rename` fails on the last rank (inside the rollback's protection) and whose
    rollback then cannot restart that rank's previous container: the run names the rank and the step of both
    failures and lists what is left on every rank; the ranks renamed before the failure have their name back;
    stop.yml then clears the group (the documented way back)."""
    last = HOSTS[-1]
    docker_double(last, ["rename", "start"])
    try:
        run = playbook("serve.yml", "-e", "spark_serve_replace=true", "-e", f"spark_image_tag={BROKEN_IMAGE}")
    finally:
        remove_docker_double(last)
    msg = fatal_message(run)
    check("a rename that fails mid-replace sends the group to the rollback, naming the rank and the step",
          run.returncode != 0 and f"serve failed: {last}: Serve | Keep the previous containers" in msg
          and "docker rename: refused by the lab's test double" in msg, brief(msg))
    check("the failed rollback names its rank and step and what is left on every rank",
          f"the rollback failed too: {last}: Serve | Restart the previous containers" in msg
          and "Left on the ranks:" in msg and all(f"{h}: {NAME} " in msg for h in HOSTS), brief(msg))
    check("the ranks renamed before the failure have the previous container under its name again",
          all(set(containers(h)) == {NAME} for h in HOSTS), {h: containers(h) for h in HOSTS})
    check("stop.yml clears what the failed rollback left", playbook("stop.yml").returncode == 0)
    nothing_left("after the failed rollback")


def interrupted_controller() -> None:
    stopped_group()
    argv = [str(ROOT / ".venv/bin/ansible-playbook"), "-i", INVENTORY, str(ROOT / "playbooks/serve.yml"),
            "-e", f"spark_serve_failed_dir={FAILED_DIR}"]
    proc = subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=ENV)
    assert proc.stdout is not None
    seen = ""
    for line in proc.stdout:
        seen = line
        if "Start the containers, workers by ascending rank" in line:
            os.killpg(proc.pid, signal.SIGKILL)  # the controller dies between arming and starting
            break
    proc.wait()
    check(f"the controller was interrupted right after arming the guards, before {HOSTS[1]} started",
          "Start the containers, workers by ascending rank" in seen and guard_active(HOSTS[1]) == "active"
          and not running(HOSTS[1]), {"last line": seen.strip(), "guard": guard_active(HOSTS[1]),
                                      "containers": containers(HOSTS[1])})
    run = playbook("serve.yml")
    check("the next serve.yml cleans up and starts the group", run.returncode == 0, brief(fatal_message(run)))
    healthy_report()


def dead_worker() -> None:
    stopped_group()
    argv = [str(ROOT / ".venv/bin/ansible-playbook"), "-i", INVENTORY, str(ROOT / "playbooks/serve.yml"),
            "-e", "serve_lab_startup_s=30", "-e", f"spark_serve_failed_dir={FAILED_DIR}"]
    proc = subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)
    deadline = time.monotonic() + 240
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        if "running" in containers(HOSTS[1]).get(NAME, "") and "running" in containers(HOSTS[0]).get(NAME, ""):
            node(HOSTS[1], "docker", "kill", NAME)  # the worker exits while the group starts up
            killed = True
            break
        time.sleep(0.5)
    out, _ = proc.communicate(timeout=300)
    msg = "\n".join(ln for ln in out.splitlines() if "serve failed:" in ln)
    check("a worker exiting during startup fails the start naming it", killed and proc.returncode != 0
          and f"{HOSTS[1]}: container is exited" in msg, brief(msg or out))
    nothing_left("after the dead worker")


def guard_trip() -> None:
    meminfo = Path("/proc/meminfo").read_text()
    available = int(meminfo.split("MemAvailable:")[1].split()[0]) * 1024
    # The first worker's 2 GiB crosses the threshold: its startup guard kills it, the start fails naming it.
    threshold = available - 1024**3
    run = playbook("serve.yml", "-e", f"spark_serve_guard_startup_threshold={threshold}",
                   "-e", f"spark_serve_guard_steady_threshold={threshold - 1024**3}", "-e", "serve_lab_memory_mb=2048",
                   "-e", "serve_lab_startup_s=20")
    msg = fatal_message(run)
    check("a startup guard crossing its threshold kills the container and fails the start",
          run.returncode != 0 and "memory guard" in msg and "137" in msg, brief(msg))
    nothing_left("after the guard trip")


SUPERVISOR = f"{NAME}-supervisor.service"
SUPERVISED = ("-e", "spark_serve_supervised=true", "-e", "spark_transfer_ssh_allow_management=true",
              "-e", "spark_serve_supervisor_max_restarts=1", "-e", "spark_serve_supervisor_interval=2")


def started_at(host: str) -> str:
    return node(host, "docker", "inspect", "--format", "{{.State.StartedAt}} {{.State.Running}}", NAME).stdout.strip()


def head_answers() -> bool:
    try:
        with urllib.request.urlopen(f"{HEAD_URL}/v1/models", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def journal(host: str) -> str:
    return node(host, "journalctl", "-u", SUPERVISOR, "--no-pager", "-o", "cat").stdout


def wait_for(what: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(1)
    return what()


def supervised() -> None:
    run = playbook("serve.yml", *SUPERVISED)
    check("serve.yml installs the supervisor on the healthy group", run.returncode == 0
          and node(HOSTS[0], "systemctl", "is-active", SUPERVISOR).stdout.strip() == "active", brief(fatal_message(run)))
    before = started_at(HOSTS[1])
    node(HOSTS[1], "docker", "kill", NAME)  # a worker dies while serving
    restarted = wait_for(lambda: started_at(HOSTS[1]) != before and started_at(HOSTS[1]).endswith("true")
                         and "restart done" in journal(HOSTS[0]) and head_answers(), 240)
    check("the supervisor restarts the whole group in order and the head answers again", restarted,
          {"worker": started_at(HOSTS[1]), "journal": journal(HOSTS[0])[-1500:]})
    order = [ln for ln in journal(HOSTS[0]).splitlines() if ln.startswith("restart: ")]
    check("stop head, stop workers, start workers ascending, head last", [ln.split()[1].rstrip(":") for ln in order[:6]]
          == [HOSTS[0], HOSTS[1], HOSTS[2], HOSTS[1], HOSTS[2], HOSTS[0]], order)
    healthy_report()
    node(HOSTS[1], "docker", "kill", NAME)  # a second death within the window: beyond the rate limit
    gave_up = wait_for(lambda: "rate limit reached" in journal(HOSTS[0]), 60)
    time.sleep(10)
    check("a second dead rank beyond the rate limit is not restarted and the journal says why",
          gave_up and started_at(HOSTS[1]).endswith("false")
          and node(HOSTS[0], "systemctl", "is-active", SUPERVISOR).stdout.strip() != "active",
          {"worker": started_at(HOSTS[1]), "journal": journal(HOSTS[0])[-800:]})
    check("stop.yml stops the group", playbook("stop.yml").returncode == 0)
    gone = node(HOSTS[0], "systemctl", "show", "--property=LoadState", "--value", SUPERVISOR).stdout.strip()
    configs = {h: node(h, "ls", f"/etc/sparkfleet/{NAME}-supervisor.json").returncode for h in HOSTS}
    check("stop.yml removes the supervisor and its configuration", gone == "not-found"
          and all(rc != 0 for rc in configs.values()), {"unit": gone, "config ls rc": configs})
    nothing_left("after the supervised test")


def main() -> int:
    steps = {"replace": replace_broken, "rollback-fails": rollback_fails_too, "interrupt": interrupted_controller, "dead-worker": dead_worker,
             "guard-trip": guard_trip, "supervised": supervised}
    chosen = sys.argv[1:] or list(steps)
    try:
        for name in chosen:
            started = time.monotonic()
            steps[name]()
            print(json.dumps({"fault": name, "passed": True, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    except Broken as exc:
        print(json.dumps({"failed": str(exc)[:4000]}), flush=True)
        # Ansible prints stderr before stdout in a failed task's result: the broken check leads a clipped log.
        print(f"failed: {str(exc)[:600]}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
