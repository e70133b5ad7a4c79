"""Fabric apply's recoveries without a lab: real ansible-playbook runs (local connection, scratch directories)
of roles/fabric/tasks/backup.yml and restore_check.yml, and the timed revert script
(templates/fabric-revert.sh.j2) run against a scratch netplan directory with stand-in netplan/networkctl."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from testlib import COLLECTION, ROOT

PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
TEMPLATE = COLLECTION / "roles" / "fabric" / "templates" / "fabric-revert.sh.j2"
FABRIC = "40-cx7.yaml"


def _netplan(tmp_path: Path) -> Path:
    netplan = tmp_path / "netplan"
    netplan.mkdir()
    (netplan / "00-mgmt.yaml").write_text("network: {version: 2}\n")
    (netplan / FABRIC).write_text("# before\nnetwork: {version: 2}\n")
    for path in netplan.iterdir():
        path.chmod(0o600)
    return netplan


def _play(tmp_path: Path, body: str, bindir: Path | None = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pb.yml").write_text(body)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    if bindir:
        env["PATH"] = f"{bindir}:{env['PATH']}"
    return subprocess.run([str(PLAYBOOK), "-i", "localhost,", "-c", "local", str(tmp_path / "pb.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


BACKUP_PLAY = """\
- name: Two backups in the same second
  hosts: localhost
  gather_facts: false
  vars:
    spark_fabric_state_dir: {tmp}/state
    spark_fabric_netplan_file: /etc/netplan/{fabric}
  tasks:
    - name: List the netplan files
      ansible.builtin.find:
        paths: {netplan}
        patterns: ["*.yaml"]
      register: fabric_netplan_found
    - name: Read the fabric file
      ansible.builtin.stat:
        path: {netplan}/{fabric}
      register: fabric_installed
    - name: First backup
      ansible.builtin.include_role:
        name: sparkfleet.spark.fabric
        tasks_from: backup
    - name: Remember the first
      ansible.builtin.set_fact:
        first_backup: "{{{{ fabric_backup_dir }}}}"
    - name: Second backup
      ansible.builtin.include_role:
        name: sparkfleet.spark.fabric
        tasks_from: backup
    - name: Record both
      ansible.builtin.copy:
        content: "{{{{ [first_backup, fabric_backup_dir] | to_json }}}}"
        dest: {tmp}/backups.json
        mode: "0600"
"""


def test_two_backups_within_one_second_do_not_collide(tmp_path: Path) -> None:
    netplan = _netplan(tmp_path)
    (tmp_path / "state" / "backups").mkdir(parents=True)
    proc = _play(tmp_path, BACKUP_PLAY.format(tmp=tmp_path, netplan=netplan, fabric=FABRIC))
    assert proc.returncode == 0, proc.stdout[-3000:]
    first, second = json.loads((tmp_path / "backups.json").read_text())
    assert first != second and Path(first).parent == Path(second).parent
    assert sorted([first, second]) == [first, second], "names sort in the order they were taken"
    for backup in (first, second):
        manifest = json.loads((Path(backup) / "manifest.json").read_text())
        assert manifest["files"] == ["00-mgmt.yaml", FABRIC] and manifest["fabric_file_existed"] is True
        assert (Path(backup) / "netplan" / FABRIC).read_text().startswith("# before")
        assert oct(Path(backup).stat().st_mode & 0o777) == "0o700"


RESTORE_CHECK_PLAY = """\
- name: Check a backup before it is restored
  hosts: localhost
  gather_facts: false
  vars:
    spark_fabric_netplan_file: /etc/netplan/{fabric}
    fabric_restore_dir: {backup}
  tasks:
    - name: Read the manifest
      ansible.builtin.slurp:
        src: {backup}/manifest.json
      register: fabric_manifest_raw
    - name: Check it
      ansible.builtin.include_role:
        name: sparkfleet.spark.fabric
        tasks_from: restore_check
"""


def _backup(tmp_path: Path, manifest: dict[str, object], files: dict[str, str]) -> Path:
    backup = tmp_path / "backups" / "20261202T053900.000001Z"
    (backup / "netplan").mkdir(parents=True)
    (backup / "manifest.json").write_text(json.dumps(manifest))
    for name, text in files.items():
        (backup / "netplan" / name).write_text(text)
    return backup


@pytest.fixture
def netplan_bin(tmp_path: Path) -> Path:
    """A stand-in `netplan` that accepts `generate --root-dir R` when every file under R/etc/netplan starts
    with 'network:' (the way the real one refuses a broken YAML) and records its calls."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "netplan").write_text(f"""#!/bin/sh
echo "netplan $*" >> {tmp_path}/calls.log
[ "$1" = generate ] && [ "$2" = --root-dir ] || exit 0
for f in "$3"/etc/netplan/*; do head -c 8 "$f" | grep -q '^network:' || {{ echo "$f: invalid YAML" >&2; exit 1; }}; done
""")
    (bindir / "netplan").chmod(0o755)
    return bindir


def _run_check(tmp_path: Path, backup: Path, bindir: Path) -> subprocess.CompletedProcess[str]:
    return _play(tmp_path, RESTORE_CHECK_PLAY.format(fabric=FABRIC, backup=backup), bindir)


def test_restore_check_passes_a_sound_backup(tmp_path: Path, netplan_bin: Path) -> None:
    backup = _backup(tmp_path, {"host": "localhost", "fabric_file": f"/etc/netplan/{FABRIC}", "fabric_file_existed": True,
                                "files": ["00-mgmt.yaml", FABRIC]},
                     {"00-mgmt.yaml": "network: {}\n", FABRIC: "network: {}\n"})
    proc = _run_check(tmp_path, backup, netplan_bin)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "--root-dir" in (tmp_path / "calls.log").read_text()


@pytest.mark.parametrize("case,manifest,files,message", [
    ("other host", {"host": "dgx9"}, None, "was taken on dgx9"),
    ("missing file", {}, {"00-mgmt.yaml": "network: {}\n"}, f"lists {FABRIC} but the backup lacks it"),
    ("unsafe name", {"files": ["../shadow"]}, None, "unsafe file name ../shadow"),
    ("other fabric file", {"fabric_file": "/etc/netplan/99-x.yaml"}, None, "fabric file /etc/netplan/99-x.yaml"),
    ("invalid yaml", {}, {"00-mgmt.yaml": "network: {}\n", FABRIC: "{{ not yaml"}, "invalid YAML"),
])
def test_restore_check_refuses_before_anything_is_activated(tmp_path: Path, netplan_bin: Path, case: str,
                                                            manifest: dict[str, object], files: dict[str, str] | None,
                                                            message: str) -> None:
    full = {"host": "localhost", "fabric_file": f"/etc/netplan/{FABRIC}", "fabric_file_existed": True,
            "files": ["00-mgmt.yaml", FABRIC]} | manifest
    backup = _backup(tmp_path, full, files or {"00-mgmt.yaml": "network: {}\n", FABRIC: "network: {}\n"})
    proc = _run_check(tmp_path, backup, netplan_bin)
    assert proc.returncode != 0, case
    assert message in proc.stdout, proc.stdout[-3000:]


# --- the timed revert script ----------------------------------------------------------------------

def _script(tmp_path: Path, backup: Path, method: str, existed: bool) -> Path:
    # Ansible's `quote` filter is shlex.quote.
    env = jinja2.Environment(keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(quote=shlex.quote)
    text = env.from_string(TEMPLATE.read_text()).render(
        fabric_backup_dir=str(backup), fabric_method=method, fabric_file_existed=existed,
        fabric_file_name=FABRIC,
        fabric_netdevs=["enp1s0f0np0", "enP2p1s0f1np1"], inventory_hostname="dgx1")
    path = tmp_path / "revert.sh"
    path.write_text(text)
    return path


def _stubs(tmp_path: Path, fail: str = "") -> dict[str, str]:
    bindir = tmp_path / "stubs"
    bindir.mkdir(exist_ok=True)
    for tool in ("netplan", "networkctl"):
        code = "exit 1" if tool == fail else "exit 0"
        (bindir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls.log\n{code}\n')
        (bindir / tool).chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")


@pytest.mark.parametrize("method,calls", [
    ("netplan", ["netplan generate", "netplan apply"]),
    ("networkd", ["netplan generate", "networkctl reload", "networkctl reconfigure enp1s0f0np0 enP2p1s0f1np1"]),
])
def test_revert_puts_the_backup_back_and_makes_it_live(tmp_path: Path, method: str, calls: list[str]) -> None:
    netplan = _netplan(tmp_path)
    backup = _backup(tmp_path, {}, {"00-mgmt.yaml": "mgmt before\n", FABRIC: "fabric before\n"})
    (netplan / FABRIC).write_text("fabric after\n")
    (netplan / "00-mgmt.yaml").write_text("touched\n")
    script = _script(tmp_path, backup, method, True)
    proc = subprocess.run(["/bin/sh", str(script), str(netplan)], env=_stubs(tmp_path), capture_output=True,
                          text=True, check=False, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert (netplan / FABRIC).read_text() == "fabric before\n" and (netplan / "00-mgmt.yaml").read_text() == "mgmt before\n"
    assert (tmp_path / "calls.log").read_text().splitlines() == calls
    assert "dgx1: reverted" in proc.stdout


def test_revert_removes_a_fabric_file_that_did_not_exist_and_reports_a_failed_apply(tmp_path: Path) -> None:
    netplan = _netplan(tmp_path)
    backup = _backup(tmp_path, {}, {"00-mgmt.yaml": "network: {version: 2}\n"})
    script = _script(tmp_path, backup, "netplan", False)
    proc = subprocess.run(["/bin/sh", str(script), str(netplan)], env=_stubs(tmp_path, fail="netplan"),
                          capture_output=True, text=True, check=False, timeout=30)
    assert not (netplan / FABRIC).exists()
    assert proc.returncode != 0 and "netplan generate failed" in proc.stderr


# --- apply.yml: arm, make live, check, confirm or revert --------------------------------------------

APPLY_PLAY = """\
- name: Apply with stand-in tools
  hosts: localhost
  gather_facts: false
  vars:
    spark_fabric_state_dir: {tmp}/state
    spark_fabric_netplan_file: {netplan}/{fabric}
    spark_fabric_apply_method: netplan
    spark_device_policy: available
    fabric_file_differs: true
    fabric_needs_apply: true
    fabric_netplan_text: "network: {{version: 2}}  # new\\n"
    fabric_node: {{interfaces: [], mgmt_interface: mgmt0, mgmt_address: 10.0.1.71}}
  tasks:
    - name: List the netplan files
      ansible.builtin.find:
        paths: {netplan}
        patterns: ["*.yaml"]
      register: fabric_netplan_found
    - name: Read the fabric file
      ansible.builtin.stat:
        path: {netplan}/{fabric}
      register: fabric_installed
    - name: Apply
      ansible.builtin.include_role:
        name: sparkfleet.spark.fabric
        tasks_from: apply
"""


def _apply_stubs(tmp_path: Path, netplan: Path) -> Path:
    """netplan (apply fails once with FAIL_APPLY), ip (management address, wrong with FAIL_MGMT), systemd-run
    (remembers the revert command) and systemctl (start runs it against the scratch netplan directory)."""
    bindir = tmp_path / "applybin"
    bindir.mkdir()
    log = tmp_path / "apply.log"
    stubs = {
        "netplan": f"""echo "netplan $*" >> {log}
if [ "$1" = apply ] && [ -n "${{FAIL_APPLY:-}}" ] && [ ! -e {tmp_path}/failed-once ]; then
  touch {tmp_path}/failed-once; echo "netplan: cannot apply (stand-in)" >&2; exit 1; fi""",
        "ip": f"""echo "ip $*" >> {log}
case "$*" in
  "-j address show") echo '[]' ;;
  *) addr=10.0.1.71; [ -n "${{FAIL_MGMT:-}}" ] && addr=10.9.9.9
     echo "[{{\\"ifname\\": \\"mgmt0\\", \\"addr_info\\": [{{\\"local\\": \\"$addr\\"}}]}}]" ;;
esac""",
        "systemd-run": f"""echo "systemd-run $*" >> {log}
for a in "$@"; do last2="$last1"; last1="$a"; done
echo "$last1" > {tmp_path}/revert.cmd""",
        "systemctl": f"""echo "systemctl $*" >> {log}
if [ "$1" = start ]; then /bin/sh "$(cat {tmp_path}/revert.cmd)" {netplan}; fi""",
    }
    for name, body in stubs.items():
        (bindir / name).write_text("#!/bin/sh\n" + body + "\n")
        (bindir / name).chmod(0o755)
    return bindir


def _apply(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path, list[str]]:
    netplan = _netplan(tmp_path)
    (tmp_path / "state" / "backups").mkdir(parents=True)
    bindir = _apply_stubs(tmp_path, netplan)
    os_env = dict(os.environ, **env)
    (tmp_path / "pb.yml").write_text(APPLY_PLAY.format(tmp=tmp_path, netplan=netplan, fabric=FABRIC))
    run_env = dict(os_env, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_PYTHON_INTERPRETER=sys.executable, PATH=f"{bindir}:{os_env['PATH']}")
    proc = subprocess.run([str(PLAYBOOK), "-i", "localhost,", "-c", "local", str(tmp_path / "pb.yml")], cwd=ROOT,
                          env=run_env, capture_output=True, text=True, check=False, timeout=300)
    log = tmp_path / "apply.log"
    return proc, netplan, log.read_text().splitlines() if log.exists() else []


def _first(calls: list[str], prefix: str) -> int:
    return next(i for i, c in enumerate(calls) if c.startswith(prefix))


def test_apply_arms_the_revert_first_and_confirms_after_the_checks(tmp_path: Path) -> None:
    proc, netplan, calls = _apply(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (netplan / FABRIC).read_text().endswith("# new\n")
    arm = _first(calls, "systemd-run --unit=sparkfleet-fabric-revert")
    assert "--on-active=120s" in calls[arm] and calls[arm].endswith("/revert.sh")
    assert arm < _first(calls, "netplan apply") < _first(calls, "ip -j -4 address show dev mgmt0")
    assert calls[-1] == "systemctl stop sparkfleet-fabric-revert.timer", "the confirmation is the last step"


@pytest.mark.parametrize("env,step", [({"FAIL_APPLY": "1"}, "Apply with netplan apply"),
                                      ({"FAIL_MGMT": "1"}, "Check the management interface kept its address")])
def test_a_failed_apply_or_a_lost_management_address_reverts_at_once(tmp_path: Path, env: dict[str, str],
                                                                     step: str) -> None:
    proc, netplan, calls = _apply(tmp_path, **env)
    assert proc.returncode != 0
    assert (netplan / FABRIC).read_text().startswith("# before"), "the backup is live again"
    assert f'failed at "Fabric | {step}"' in proc.stdout and "reverted to backup" in proc.stdout, proc.stdout[-3000:]
    assert "systemctl start sparkfleet-fabric-revert.service" in calls
    assert "systemctl stop sparkfleet-fabric-revert.timer" in calls[calls.index("systemctl start sparkfleet-fabric-revert.service"):]
