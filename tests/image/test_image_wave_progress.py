"""An image wave prints, each round, how far each sender has streamed the archive: a real ansible-playbook run
(local connection, two inventory hosts on this machine) of roles/image_distribute/tasks/wave.yml with `ssh` and
`docker` test doubles on PATH. The double `ssh` runs the remote command here; the double `docker load` reads the
archive slowly from its stdin, as a load over a cable does."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from testlib import ROOT

PLAYBOOK_BIN = ROOT / ".venv" / "bin" / "ansible-playbook"
IMAGE_ID = "sha256:" + "c0" * 32
MIB = 1024 * 1024

# TEST DOUBLE of ssh: the last argument is the remote command; it runs here with the same stdin.
SSH = """#!/bin/sh
for last; do :; done
exec sh -c "$last"
"""

# TEST DOUBLE of `docker load`: 256 KiB every 0.4 s, so a 3 MiB archive takes about 5 s: on a loaded machine a
# round of the wave (1 s apart) can take 2 s, and a load shorter than that showed only its first and last rounds.
DOCKER = """#!{py}
import sys, time
assert sys.argv[1:] == ["load"], sys.argv
total = 0
while True:
    chunk = sys.stdin.buffer.read(262144)
    if not chunk:
        break
    total += len(chunk)
    time.sleep(0.4)
print(f"Loaded image ID: {image_id} ({{total}} bytes)")
"""

PLAY = """\
- name: One image wave between two hosts on this machine
  hosts: sender,receiver
  gather_facts: false
  vars:
    spark_image_distribute_archive_dir: {tmp}/archives
    spark_image_distribute_timeout_s: 120
    spark_image_distribute_progress_s: 1
    spark_transfer_ssh_key: {tmp}/id_ed25519
    spark_transfer_ssh_dir: {tmp}
    spark_transfer_ssh_user: root
    spark_transfer_ssh_connect_timeout: 10
    image_distribute_tag: sparkfleet/vllm-ds41f:lab-test
    image_distribute_source: {{id: "{image_id}"}}
    image_distribute_waves: [[{{from: sender, to: receiver, address: 127.0.0.1, depth: 0, from_relay: false, keep_relay: false}}]]
    image_distribute_wave: "{{{{ image_distribute_waves[0] }}}}"
    image_distribute_wave_index: 0
  tasks:
    - name: Wave
      ansible.builtin.include_role:
        name: sparkfleet.spark.image_distribute
        tasks_from: wave
"""


def _archive(path: Path) -> None:
    """A docker save archive of IMAGE_ID: its manifest names the config, one 3 MiB layer."""
    path.parent.mkdir(parents=True)
    hex_id = IMAGE_ID.split(":")[1]
    members = {"manifest.json": json.dumps([{"Config": f"{hex_id}.json", "RepoTags": [], "Layers": ["l/layer.tar"]}]),
               f"{hex_id}.json": "{}"}
    with tarfile.open(path, "w") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("l/layer.tar")
        info.size = 3 * MIB
        tar.addfile(info, io.BytesIO(os.urandom(3 * MIB)))


def test_each_round_shows_the_bytes_streamed_and_the_last_says_ended(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(SSH)
    (bindir / "docker").write_text(DOCKER.format(py=sys.executable, image_id=IMAGE_ID))
    for tool in ("ssh", "docker"):
        (bindir / tool).chmod(0o755)
    archive = tmp_path / "archives" / f"{IMAGE_ID.split(':')[1]}.tar"
    _archive(archive)
    (tmp_path / "pb.yml").write_text(PLAY.format(tmp=tmp_path, image_id=IMAGE_ID))
    (tmp_path / "hosts").write_text("sender ansible_connection=local\nreceiver ansible_connection=local\n")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", PATH=f"{bindir}:{os.environ['PATH']}")
    proc = subprocess.run([str(PLAYBOOK_BIN), "-i", str(tmp_path / "hosts"), str(tmp_path / "pb.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    rounds = re.findall(r'"image wave 1 of 1",\s*"\d+ s since the wave started",\s*"(sender -> receiver: [^"]*)"',
                        proc.stdout)
    size = archive.stat().st_size
    assert rounds and rounds[-1].startswith(f"sender -> receiver: 3.0 MiB of 3.0 MiB (100.0 %)"), rounds
    assert rounds[-1].endswith(", ended"), rounds
    sending = [line for line in rounds if line.endswith(", sending")]
    assert sending and any(re.search(r": [0-9.]+ (KiB|MiB) of 3.0 MiB \((?!100\.0)[0-9.]+ %\)", line)
                           for line in sending), rounds
    assert size > 3 * MIB and not (tmp_path / "archives" / "receiver.tar").exists()
