"""spark_progress and spark_job_progress: job state, build steps in both builders' formats, bytes under a
directory, read positions from a /proc tree in the kernel's fdinfo format, log lines, and the progress line."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, List, Optional

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_progress import (
    ProgressError, build_step, job_ended, new_lines, progress_line, read_position, tree_bytes)

GIB = 1024 ** 3


@pytest.mark.parametrize("text, ended", [
    (None, False), ("", False), ("{not json", False), ("[1]", False),
    ('{"started": true, "finished": false, "ansible_job_id": "j1"}', False),
    ('{"started": 1, "finished": 0, "ansible_job_id": "j1"}', False),
    ('{"rc": 0, "stdout": "", "changed": true}', True),
    ('{"failed": true, "msg": "Timeout exceeded", "child_pid": 12}', True),
    ('{"changed": false, "verdict": "pass"}', True),
])
def test_job_ended_reads_the_async_results_file(text: Optional[str], ended: bool) -> None:
    assert job_ended(text) is ended


LEGACY = """Sending build context to Docker daemon  3.072kB
Step 1/9 : FROM sparkfleet-lab/base:1 AS vllm-build
 ---> 5d0da3dc9764
Step 2/9 : RUN make -j4    vllm
 ---> Running in 1b2c3d4e5f60
Step 3/9 : FROM sparkfleet-lab/base:1
Step 4/9 : COPY --from=vllm-build /out /opt
""".splitlines()

BUILDKIT = """#1 [internal] load build definition from Dockerfile
#1 DONE 0.0s
#5 [nccl-build 1/4] FROM docker.io/library/ubuntu@sha256:0123
#7 [nccl-build 3/4] RUN make -j12 src.build NVCC_GENCODE=-gencode=arch=compute_121a,code=sm_121a
#7 41.3 Compiling  bootstrap.cc
#9 [2/3] COPY --from=nccl-build /out /opt
""".splitlines()


@pytest.mark.parametrize("lines, stage, expected", [
    (LEGACY[:4], None, ("vllm-build", "step 2/9: RUN make -j4 vllm")),
    (LEGACY, None, (None, "step 4/9: COPY --from=vllm-build /out /opt")),
    (LEGACY[5:6], "vllm-build", (None, "step 3/9: FROM sparkfleet-lab/base:1")),
    (BUILDKIT[:5], None, ("nccl-build", "step 3/4: RUN make -j12 src.build "
                                        "NVCC_GENCODE=-gencode=arch=compute_121a,code=sm_121a")),
    (BUILDKIT, None, ("nccl-build", "step 2/3: COPY --from=nccl-build /out /opt")),
    (["#7 41.3 Compiling  bootstrap.cc"], "nccl-build", ("nccl-build", None)),
    ([], None, (None, None)),
])
def test_build_step_names_stage_and_step_in_both_builders_output(lines: List[str], stage: Optional[str],
                                                                 expected: tuple) -> None:
    assert build_step(lines, stage) == expected


def test_a_long_step_is_cut_to_one_short_line() -> None:
    _, step = build_step([f"Step 1/2 : RUN {'x' * 300}"])
    assert step is not None and len(step) < 140 and step.endswith("…")


def test_tree_bytes_sums_regular_files_including_partial_ones(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 1000)
    (tmp_path / ".cache" / "download").mkdir(parents=True)
    (tmp_path / ".cache" / "download" / "b.incomplete").write_bytes(b"y" * 24)
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert tree_bytes(str(tmp_path)) == 1024 + len(os.readlink(tmp_path / "link"))
    assert tree_bytes(str(tmp_path / "a")) == 1000
    assert tree_bytes(str(tmp_path / "absent")) == 0


def _proc(root: Path, pid: int, fd: int, target: Path, pos: int) -> None:
    (root / str(pid) / "fd").mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "fdinfo").mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "fd" / str(fd)).symlink_to(target)
    # The kernel's fdinfo format (Documentation/filesystems/proc.rst), tab after the colon.
    (root / str(pid) / "fdinfo" / str(fd)).write_text(f"pos:\t{pos}\nflags:\t0100000\nmnt_id:\t29\nino:\t131\n")


def test_read_position_takes_the_holder_of_the_archive_from_a_proc_tree(tmp_path: Path) -> None:
    archive, other = tmp_path / "img.tar", tmp_path / "other.tar"
    archive.write_bytes(b"")
    other.write_bytes(b"")
    proc = tmp_path / "proc"
    _proc(proc, 812, 0, archive, 4 * GIB)
    _proc(proc, 813, 0, other, 9 * GIB)
    _proc(proc, 900, 5, archive, GIB)
    (proc / "self").mkdir()
    (proc / "1234").mkdir()  # a process that ended between the listing and the read
    assert read_position(str(archive), str(proc)) == 4 * GIB
    assert read_position(str(tmp_path / "none.tar"), str(proc)) is None
    with pytest.raises(ProgressError, match="cannot list"):
        read_position(str(archive), str(tmp_path / "no-proc"))


def test_read_position_on_this_machine_sees_a_file_being_read(tmp_path: Path) -> None:
    archive = tmp_path / "img.tar"
    archive.write_bytes(b"z" * 8192)
    with open(archive, "rb", buffering=0) as handle:
        handle.read(5000)
        assert read_position(str(archive)) == 5000


def test_new_lines_returns_complete_lines_and_the_next_offset(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    assert new_lines(str(log), 0, 20) == ([], 0)
    log.write_text("one\r\ntwo\nthr")
    lines, offset = new_lines(str(log), 0, 20)
    assert (lines, offset) == (["one", "two"], 9)
    with open(log, "a") as handle:
        handle.write("ee\nfour\n")
    assert new_lines(str(log), offset, 20) == (["three", "four"], 20)
    assert new_lines(str(log), 0, 1) == (["four"], 20)
    assert new_lines(str(log), 500, 20) == (["one", "two", "three", "four"], 20)  # rewritten: from its start
    with pytest.raises(ProgressError, match="must be >= 0"):
        new_lines(str(log), -1, 20)


@pytest.mark.parametrize("args, expected", [
    (("download", 61.9, False, 12 * GIB, 160 * GIB, 9 * GIB, 30),
     "download: 61 s, 12.0 GiB of 160.0 GiB (7.5 %), 102.4 MiB/s, running"),
    (("download", 5, True, 1536), "download: 5 s, 1.5 KiB, ended"),
    (("image build on dgx1", 120, False, None, 0, None, 0, "vllm-build", "step 2/9: RUN make"),
     "image build on dgx1: 120 s, stage vllm-build, step 2/9: RUN make, running"),
    (("bench", 0, False), "bench: 0 s, running"),
])
def test_progress_line(args: tuple, expected: str) -> None:
    assert progress_line(*args) == expected


@pytest.mark.parametrize("args, message", [
    (("x", -1, False), "elapsed_s must be seconds >= 0"),
    (("x", True, False), "elapsed_s must be seconds >= 0"),
    (("x", 1, False, -3), "done_bytes must be >= 0"),
    (("x", 1, False, "many"), "done_bytes must be a byte count"),
    (("x", 1, False, 3, True), "total_bytes must be a byte count"),
])
def test_progress_line_refuses_what_is_not_a_count(args: tuple, message: str) -> None:
    with pytest.raises(ProgressError, match=message):
        progress_line(*args)


def test_the_filters_format_lines_and_name_bad_input() -> None:
    from ansible.errors import AnsibleFilterError
    from ansible_collections.sparkfleet.spark.plugins.filter.sparkfleet_progress import (
        spark_progress_line, spark_progress_lines)
    assert spark_progress_line("download", "30.5", False, 10) == "download: 30 s, 10 B, running"
    assert spark_progress_lines({"lines": ["decode 1", " "]}, "bench", 12.2) == ["bench: 12 s: decode 1"]
    with pytest.raises(AnsibleFilterError, match="ended must be a boolean"):
        spark_progress_line("x", 1, "no")
    with pytest.raises(AnsibleFilterError, match="spark_progress_line: done_bytes must be >= 0"):
        spark_progress_line("x", 1, False, -1)
    with pytest.raises(AnsibleFilterError, match="must be a spark_job_progress result"):
        spark_progress_lines(["x"], "bench", 1)


def test_module_waits_for_the_job_and_measures(run_module: Any, tmp_path: Path) -> None:
    job, log = tmp_path / "job", tmp_path / "build.log"
    job.write_text(json.dumps({"started": 1, "finished": 0, "ansible_job_id": "1.2"}))
    log.write_text("Step 1/2 : FROM base AS builder\nStep 2/2 : RUN make\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.safetensors").write_bytes(b"w" * 300)
    failed, result = run_module("spark_job_progress", {
        "results_file": str(job), "wait_s": 0.2, "bytes_under": [str(tmp_path / "models")],
        "log": str(log), "reader_of": str(tmp_path / "models" / "w.safetensors")}, check_mode=True)
    assert not failed and not result["changed"] and result["ended"] is False and result["waited_s"] >= 0.2
    assert result["bytes"] == 300 and result["read_bytes"] is None and result["read_size"] == 300
    assert (result["stage"], result["step"], result["log_offset"]) == ("builder", "step 2/2: RUN make", 52)
    job.write_text(json.dumps({"rc": 0, "changed": True}))
    failed, result = run_module("spark_job_progress", {"results_file": str(job), "wait_s": 30, "log": str(log),
                                                       "log_offset": 52, "stage": "builder", "step": "step 2/2: RUN make"})
    assert not failed and result["ended"] is True and result["waited_s"] < 5
    assert (result["lines"], result["stage"], result["step"]) == ([], "builder", "step 2/2: RUN make")
    failed, result = run_module("spark_job_progress", {"wait_s": -1})
    assert failed and "wait_s must be >= 0" in result["msg"]
