"""The model role's download keeps the Hugging Face token out of every command line and log: real
ansible-playbook runs (local connection, -vvv) of roles/model/tasks/fetch.yml with a stand-in `hf` that
snapshots `ps -eo args` while it runs, records its argv and environment, and reads the token the way `hf` does
(HF_TOKEN_PATH). A failed download still shows its error, and the token file is gone afterwards either way."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from testlib import ROOT

PLAYBOOK_BIN = ROOT / ".venv" / "bin" / "ansible-playbook"
TOKEN = "hf_plantedTOKENfor0sparkfleet0test0z9"
REVISION = "dba1be0a40aa45a94ad051997016db3960a90277"

# What `hf download` does with a token, minus the network: read HF_TOKEN_PATH (HF_TOKEN would win), write the
# files under --local-dir. It records what a node would expose while it runs.
STANDIN = """\
#!{py}
import json, os, stat, subprocess, sys, time
record = {record!r}
argv = sys.argv[1:]
path = os.environ.get("HF_TOKEN_PATH", "")
info = {{"argv": argv, "env_token": "HF_TOKEN" in os.environ, "token_path": path,
        "ps": subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout}}
if path and os.path.exists(path):
    info["token"] = open(path).read()
    info["file_mode"] = stat.S_IMODE(os.stat(path).st_mode)
    info["dir_mode"] = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
json.dump(info, open(record, "w"))
if os.environ.get("STANDIN_FAIL"):
    sys.stderr.write("401 Client Error: Unauthorized for url: https://hub.example/api/models/x (standin)\\n")
    sys.exit(1)
local = argv[argv.index("--local-dir") + 1]
open(os.path.join(local, "config.json"), "w").write("{{}}")
# A weight file that grows for about three seconds, as a download does: the rounds must see it grow.
with open(os.path.join(local, "model-00001-of-00001.safetensors"), "wb") as weights:
    for _ in range(3):
        weights.write(b"w" * 1048576)
        weights.flush()
        time.sleep(1.2)
print("Fetching 1 files: 100%")
"""

PLAY = """\
- name: Download with a planted token
  hosts: localhost
  gather_facts: false
  vars:
    spark_model_name: test-model
    spark_model_repo: org/test-model
    spark_model_revision: {rev}
    spark_model_dir: {tmp}/models
    spark_model_download_host: localhost
    spark_model_source_dir: ""
    spark_model_hf_token: {token}
    spark_model_hf_install: false
    spark_model_hf_cli: {tmp}/hf
    spark_model_secret_dir: {tmp}/secret
    spark_model_download_poll_s: 1
  tasks:
    - name: Fetch
      ansible.builtin.include_role:
        name: sparkfleet.spark.model
        tasks_from: fetch
"""


def _run(tmp_path: Path, fail: bool) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    record = tmp_path / "record.json"
    hf = tmp_path / "hf"
    hf.write_text(STANDIN.format(py=sys.executable, record=str(record)))
    hf.chmod(0o755)
    (tmp_path / "pb.yml").write_text(PLAY.format(rev=REVISION, tmp=tmp_path, token=TOKEN))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    if fail:
        env["STANDIN_FAIL"] = "1"
    proc = subprocess.run([str(PLAYBOOK_BIN), "-i", "localhost,", "-c", "local", "-vvv", str(tmp_path / "pb.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert record.is_file(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads(record.read_text())


@pytest.mark.parametrize("fail", [False, True], ids=["ok", "failed-download"])
def test_token_reaches_the_download_through_a_0600_file_only(tmp_path: Path, fail: bool) -> None:
    proc, seen = _run(tmp_path, fail)
    assert (proc.returncode != 0) == fail, proc.stdout[-3000:]
    assert seen["token"] == TOKEN, "the download read the token from HF_TOKEN_PATH"
    assert seen["file_mode"] == 0o600 and seen["dir_mode"] == 0o700
    assert not seen["env_token"], "HF_TOKEN is not in the download's environment"
    assert TOKEN not in " ".join(seen["argv"])  # type: ignore[arg-type]
    assert TOKEN not in str(seen["ps"]), "a command line on the node holds the token"
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr, "the -vvv output holds the token"
    assert not Path(str(seen["token_path"])).exists(), "the token file is removed afterwards"


def test_a_failed_download_shows_its_error(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path, True)
    assert "401 Client Error: Unauthorized" in proc.stdout, proc.stdout[-3000:]


def test_the_download_reports_progress_while_it_runs(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path, False)
    lines = [" ".join(line.split()) for line in
             re.findall(r"msg: '(download of org/test-model@dba1be0a40aa on localhost: [^']*)'", proc.stdout)]
    assert lines and lines[-1].endswith(", ended"), proc.stdout[-3000:]
    running = [line for line in lines if line.endswith(", running")]
    assert running and any(re.search(r", [0-9.]+ MiB, ", line) for line in running), lines
    assert "3.0 MiB" in lines[-1], lines
    assert (tmp_path / "models" / "config.json").is_file()
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o700
