"""The image build runs in the background and prints its stage and step each round: real ansible-playbook runs
(local connection) of roles/image_build/tasks/docker_build.yml with a `docker` test double on PATH that prints
`docker build` output in the legacy builder's format over a few seconds, then writes the image ID or fails."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from testlib import ROOT

PLAYBOOK_BIN = ROOT / ".venv" / "bin" / "ansible-playbook"

# TEST DOUBLE of `docker build`: the legacy builder's output, a line every 0.7 s (the compile 5 s), then
# --iidfile or a failure.
DOCKER = """\
#!{py}
import os, sys, time
args = sys.argv[1:]
assert args[0] == "build", args
steps = ["Step 1/3 : FROM sparkfleet-lab/base:1 AS vllm-build", " ---> 5d0da3dc9764",
         "Step 2/3 : RUN make -j2 vllm", " ---> Running in 1b2c3d4e5f60", "compiling csrc/ops.cu",
         "Step 3/3 : LABEL org.sparkfleet.release=lab"]
for line in steps:
    print(line, flush=True)
    # the compile step outlasts several progress rounds, even on a loaded machine
    time.sleep(5 if line.startswith("compiling") else 0.7)
if os.environ.get("DOCKER_STANDIN_FAIL"):
    print("nvcc fatal : Unsupported gpu architecture 'compute_121a'", flush=True)
    sys.exit(1)
open(args[args.index("--iidfile") + 1], "w").write("sha256:" + "ab" * 32)
print("Successfully built abababababab", flush=True)
"""

PLAY = """\
- name: Build with the docker test double
  hosts: localhost
  gather_facts: false
  vars:
    spark_image_builder: localhost
    spark_image_build_dir: {tmp}/build
    spark_image_build_args: {{}}
    spark_image_build_timeout_s: 120
    spark_image_build_progress_s: 1
    spark_image_upstreams: [{{name: vllm, tree: 0123abcd}}]
    image_build_tag: sparkfleet/vllm-ds41f:lab-test
    image_build_labels: {{org.sparkfleet.release: lab}}
    image_build_limits: {{jobs: 2}}
  tasks:
    - name: Build
      ansible.builtin.include_role:
        name: sparkfleet.spark.image_build
        tasks_from: docker_build
"""


def _run(tmp_path: Path, fail: bool) -> subprocess.CompletedProcess[str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").write_text(DOCKER.format(py=sys.executable))
    (bindir / "docker").chmod(0o755)
    (tmp_path / "build").mkdir()
    (tmp_path / "pb.yml").write_text(PLAY.format(tmp=tmp_path))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               PATH=f"{bindir}:{os.environ['PATH']}")
    if fail:
        env["DOCKER_STANDIN_FAIL"] = "1"
    return subprocess.run([str(PLAYBOOK_BIN), "-i", "localhost,", "-c", "local", str(tmp_path / "pb.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


def _lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    found = re.findall(r"msg: '?(image build of sparkfleet/vllm-ds41f:lab-test on localhost: [^'\n]*(?:\n {6,}[^'\n]*)*)",
                       proc.stdout)
    return [" ".join(line.split()) for line in found]


def test_each_round_names_the_stage_and_step_and_the_last_says_ended(tmp_path: Path) -> None:
    proc = _run(tmp_path, False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = _lines(proc)
    assert any(", stage vllm-build, step 2/3: RUN make -j2 vllm, running" in line for line in lines), lines
    assert lines[-1].endswith(", stage vllm-build, step 3/3: LABEL org.sparkfleet.release=lab, ended"), lines
    assert (tmp_path / "build" / "image.iid").read_text().startswith("sha256:ab")
    assert "Successfully built" in (tmp_path / "build" / "build.log").read_text()


def test_a_failed_build_fails_with_the_end_of_its_log(tmp_path: Path) -> None:
    proc = _run(tmp_path, True)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "localhost: docker build failed (rc 1" in out, out[-3000:]
    assert "nvcc fatal : Unsupported gpu architecture 'compute_121a'" in out, out[-3000:]
    assert "compiling csrc/ops.cu" in out
