"""The model role's sync plan (roles/model/tasks/plan_sync.yml) in a real ansible-playbook run: three
local-connection ranks of the triangle plan, each with its own model directory. dgx3 lacks a file; dgx2 holds
every file at the right size, one of them corrupt. dgx2 may send to dgx3, so it is hashed first, named with
its bad file, never sends, and is synced again itself from the download host."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from testlib import ROOT

PLAN = ROOT / "tests" / "image" / "fixtures" / "plan-tp3-triangle.json"
REVISION = "d" * 40

PLAY = """\
- name: Manifest on the download host
  hosts: dgx1
  gather_facts: false
  tasks:
    - name: Write the manifest of dgx1's files
      sparkfleet.spark.spark_model_manifest:
        mode: create
        path: "{{{{ spark_model_dir }}}}"
        revision: {rev}
        node: dgx1
- name: Sync plan
  hosts: spark
  gather_facts: false
  vars:
    spark_model_download_host: dgx1
    spark_model_revision: {rev}
    spark_model_verify_hashes: false
    model_fabric: "{{{{ lookup('ansible.builtin.file', '{plan}') | from_json }}}}"
  tasks:
    - name: Put dgx1's manifest on every rank
      ansible.builtin.copy:
        src: "{tmp}/dgx1/sparkfleet-manifest.json"
        dest: "{{{{ spark_model_dir }}}}/sparkfleet-manifest.json"
        mode: "0644"
    - name: Pre-sync check by size
      sparkfleet.spark.spark_model_manifest:
        mode: verify
        path: "{{{{ spark_model_dir }}}}"
        hashes: false
        fail_on_problems: false
        node: "{{{{ inventory_hostname }}}}"
      register: model_before
    - name: Plan the sync
      ansible.builtin.include_role:
        name: sparkfleet.spark.model
        tasks_from: plan_sync
    - name: Show the plan
      ansible.builtin.debug:
        msg: "PLAN={{{{ {{'need': model_need, 'may_send': model_may_send, 'vetted': model_vetted,
                       'waves': model_waves}} | to_json }}}}"
      run_once: true
"""


def test_a_same_size_corrupt_holder_is_named_and_never_sends(tmp_path: Path) -> None:
    for host in ("dgx1", "dgx2", "dgx3"):
        (tmp_path / host).mkdir()
        (tmp_path / host / "config.json").write_text('{"a": 1}')
        if host != "dgx3":
            (tmp_path / host / "model-00001.safetensors").write_bytes(b"\x01" * 4096)
    (tmp_path / "dgx2" / "model-00001.safetensors").write_bytes(b"\x01" * 4095 + b"\x02")  # same size
    py = sys.executable
    inventory = {"spark": {"hosts": {h: {"ansible_connection": "local", "ansible_python_interpreter": py,
                                         "spark_model_dir": str(tmp_path / h)} for h in ("dgx1", "dgx2", "dgx3")}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "pb.yml").write_text(PLAY.format(rev=REVISION, plan=PLAN, tmp=tmp_path))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "pb.yml")], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    plan = json.loads(proc.stdout.split("PLAN=", 1)[1].split('"\n', 1)[0].encode().decode("unicode_escape"))
    assert plan["need"] == ["dgx3"] and plan["may_send"] == ["dgx2"]
    assert plan["vetted"]["holders"] == ["dgx1"]
    assert list(plan["vetted"]["refused"]) == ["dgx2"]
    assert "dgx2 (holder, not sent from): model-00001.safetensors" in plan["vetted"]["refused"]["dgx2"]
    transfers = [t for wave in plan["waves"] for t in wave]
    assert {t["from"] for t in transfers} == {"dgx1"}
    assert sorted(t["to"] for t in transfers) == ["dgx2", "dgx3"]
    assert "Model | Name the holders whose files differ from the manifest" in proc.stdout
