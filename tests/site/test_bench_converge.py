"""molecule/site/bench_converge.py: PLAY RECAP parsing, the no-change check, the figures, and whole runs of
the benchmark against a two-node local-connection inventory (real ansible-playbook runs, ~15 s)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testlib import ROOT, load_source

bc = load_source("molecule/site", "bench_converge")

RECAP = """\
PLAY [Validate the inventory contract] *****************************************

TASK [Validate | Check hosts] **************************************************
ok: [localhost]

PLAY RECAP *********************************************************************
dgx1                       : ok=40   changed=0    unreachable=0    failed=0    skipped=12   rescued=0    ignored=0   
dgx2                       : ok=38   changed=2    unreachable=0    failed=0    skipped=12   rescued=0    ignored=0   
localhost                  : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0   

Sunday 29 November 2026  14:30:00 +0000 (0:00:00.512)       0:01:02.345 *******
===============================================================================
Fabric | Verify the fabric ---------------------------------------------- 3.21s
"""


def test_recap_counters_per_host() -> None:
    recap = bc.parse_recap(RECAP)
    assert set(recap) == {"dgx1", "dgx2", "localhost"}
    assert recap["dgx1"] == {"ok": 40, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 12,
                             "rescued": 0, "ignored": 0}
    assert recap["dgx2"]["changed"] == 2


def test_recap_is_the_last_one_and_missing_is_empty() -> None:
    earlier = RECAP.replace("changed=2", "changed=0").replace("dgx1 ", "old1 ")
    recap = bc.parse_recap(earlier + "\nPLAY [x] ***\n" + RECAP)
    assert "old1" not in recap and recap["dgx2"]["changed"] == 2
    assert bc.parse_recap("PLAY [x] ***\nok: [dgx1]\n") == {}


def test_problems_name_host_and_counter() -> None:
    problems = bc.recap_problems(bc.parse_recap(RECAP), ["dgx1", "dgx2", "dgx3"])
    assert problems == ["dgx3: not in the PLAY RECAP", "dgx2: changed=2"]
    unreachable = bc.parse_recap(RECAP.replace("changed=2    unreachable=0    failed=0",
                                               "changed=0    unreachable=1    failed=1"))
    assert bc.recap_problems(unreachable, ["dgx1"]) == ["dgx2: failed=1", "dgx2: unreachable=1"]
    assert bc.recap_problems({}, ["dgx1"]) == ["no PLAY RECAP in the output"]
    clean = bc.parse_recap(RECAP.replace("changed=2", "changed=0"))
    assert bc.recap_problems(clean, ["dgx1", "dgx2"]) == []


def test_figures_and_ratios() -> None:
    assert bc.figures(52.0, 40.0, 78.0) == {"nodes4_s": 52.0, "nodes1_s": 40.0, "scaling_ratio": 1.3,
                                            "no_reuse_s": 78.0, "reuse_ratio": 1.5}
    assert bc.figures(10.12345, 3.0, 20.0)["scaling_ratio"] == pytest.approx(3.374, abs=1e-9)
    with pytest.raises(ValueError, match="positive"):
        bc.figures(0.0, 1.0, 1.0)


def test_head_is_the_single_rank_zero_spark_host() -> None:
    doc = {"_meta": {"hostvars": {"dgx1": {"spark_rank": 1}, "dgx2": {"spark_rank": 0}, "ctl": {"spark_rank": 0}}},
           "spark": {"hosts": ["dgx1", "dgx2"]}}
    assert bc.head_host(doc) == "dgx2"
    doc["_meta"]["hostvars"]["dgx1"]["spark_rank"] = 0
    with pytest.raises(ValueError, match="exactly one"):
        bc.head_host(doc)


def test_environment_turns_pipelining_and_reuse_off_only_for_the_no_reuse_run() -> None:
    base = {"ANSIBLE_SSH_ARGS": "-o ControlMaster=auto", "PATH": "/bin"}
    on, off = bc.run_env(base, ROOT, True), bc.run_env(base, ROOT, False)
    assert on["ANSIBLE_PIPELINING"] == "True" and "ANSIBLE_SSH_ARGS" not in on
    assert off["ANSIBLE_PIPELINING"] == "False" and off["ANSIBLE_SSH_ARGS"] == "-o ControlMaster=no -o ControlPath=none"
    assert on["ANSIBLE_CONFIG"] == str(ROOT / "ansible.cfg") and on["PATH"] == "/bin"


LAB = """\
spark:
  hosts:
    n1: {ansible_connection: local, ansible_python_interpreter: "%(py)s", spark_rank: 1}
    n0: {ansible_connection: local, ansible_python_interpreter: "%(py)s", spark_rank: 0}
"""
PLAYBOOK = """\
- name: Controller play
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Look at the controller
      ansible.builtin.stat:
        path: /
- name: Node play
  hosts: spark
  gather_facts: false
  tasks:
    - name: Look at the node
      ansible.builtin.stat:
        path: /
    - name: Maybe change
      ansible.builtin.command: "true"
      changed_when: %(changed)s
"""


def _bench(tmp_path: Path, changed: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yml").write_text(LAB % {"py": sys.executable})
    (tmp_path / "pb.yml").write_text(PLAYBOOK % {"changed": changed})
    return subprocess.run([sys.executable, str(ROOT / "molecule" / "site" / "bench_converge.py"),
                           "--inventory", str(tmp_path / "inv"), "--playbook", str(tmp_path / "pb.yml"),
                           "--log-dir", str(tmp_path / "logs")], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=300)


def test_whole_benchmark_on_a_local_two_node_inventory(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "false")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) == {"nodes4_s", "nodes1_s", "scaling_ratio", "no_reuse_s", "reuse_ratio"}
    assert all(value > 0 for value in result.values())
    assert result["scaling_ratio"] == pytest.approx(result["nodes4_s"] / result["nodes1_s"], abs=2e-3)
    assert result["reuse_ratio"] == pytest.approx(result["no_reuse_s"] / result["nodes4_s"], abs=2e-3)
    assert "2 nodes, head n0" in lines[0]
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert len(logs) == 4
    limited = bc.parse_recap((tmp_path / "logs" / logs[2]).read_text())
    assert set(limited) == {"n0", "localhost"}, "the head run covers the head and the controller plays only"
    assert set(bc.parse_recap((tmp_path / "logs" / logs[1]).read_text())) == {"n0", "n1", "localhost"}


def test_a_run_with_changes_stops_the_benchmark_naming_the_hosts(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "true")
    assert proc.returncode != 0
    # Ansible prints the recap sorted by host name.
    assert "warm-up: not a no-change run (n0: changed=1; n1: changed=1)" in proc.stderr, proc.stderr
    assert "{" not in proc.stdout.strip().splitlines()[-1]


def test_log_names_keep_the_run_order() -> None:
    assert bc.log_name(2, "head only (dgx1)") == "2-head-only-dgx1.log"
    assert bc.log_name(3, "all 4 nodes, no pipelining or reuse") == "3-all-4-nodes-no-pipelining-or-reuse.log"
