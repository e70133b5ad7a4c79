"""The bench's API key never has to be on a command line: the CLI and the module read it from a 0600 key file
themselves (api_key_file) or from $OPENAI_API_KEY; bench.yml writes a vaulted spark_bench_api_key to a private
file for the run and refuses a key passed as `-e spark_bench_api_key=...`."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import MODEL, Standin
from testlib import ROOT

from sparkfleet_bench.client import read_api_key
KEY = "sk-plantedBENCHkey0sparkfleet0test"
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"


def _key_file(tmp_path: Path, mode: int = 0o600, text: str = KEY + "\n") -> Path:
    path = tmp_path / "bench-api-key"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_key_file_is_read_and_stripped(tmp_path: Path) -> None:
    assert read_api_key(str(_key_file(tmp_path)), {}) == KEY
    assert read_api_key("", {"OPENAI_API_KEY": KEY}) == KEY
    assert read_api_key("", {}) is None


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_key_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ValueError, match=r"api_key_file: .* mode 0o6\d\d.*0600"):
        read_api_key(str(_key_file(tmp_path, mode)), {})


def test_missing_and_empty_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="api_key_file: cannot read"):
        read_api_key(str(tmp_path / "absent"), {"OPENAI_API_KEY": KEY})
    with pytest.raises(ValueError, match="is empty"):
        read_api_key(str(_key_file(tmp_path, text="\n")), {})


def test_module_refuses_a_bad_key_file_without_printing_a_key(run_module: Any, tmp_path: Path) -> None:
    failed, result = run_module("spark_bench", {"url": "http://127.0.0.1:9", "output_dir": str(tmp_path),
                                                "api_key_file": str(_key_file(tmp_path, 0o644))}, check_mode=True)
    assert failed and "0600" in result["msg"] and KEY not in str(result)
    failed, result = run_module("spark_bench", {"url": "http://127.0.0.1:9", "output_dir": str(tmp_path),
                                                "api_key_file": str(_key_file(tmp_path))}, check_mode=True)
    assert not failed and result["planned_points"]


def _play(*extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(PLAYBOOK), "playbooks/bench.yml", "--check", "-e", "spark_bench_url=http://127.0.0.1:9",
                           "-e", "spark_bench_output_dir=/tmp/sparkfleet-bench-key-check", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)


def test_playbook_refuses_a_key_on_the_command_line() -> None:
    proc = _play("-e", f"spark_bench_api_key={KEY}")
    assert proc.returncode != 0
    assert "spark_bench_api_key is on the ansible-playbook command line" in proc.stdout, proc.stdout[-2000:]
    assert KEY not in proc.stdout


def test_playbook_takes_a_key_from_a_vars_file_or_a_key_file(tmp_path: Path) -> None:
    (tmp_path / "vault.yml").write_text(f"spark_bench_api_key: {KEY}\n")
    proc = _play("-e", f"@{tmp_path / 'vault.yml'}")
    assert proc.returncode == 0, proc.stdout[-2000:]
    proc = _play("-e", f"spark_bench_api_key_file={_key_file(tmp_path)}", "-vvv")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert KEY not in proc.stdout


class _Sampler:
    """Every command line on this machine, read from /proc every 20 ms while a run lasts (`ps -eo args`)."""

    def __init__(self) -> None:
        self.lines: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    self.lines.add(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
                except OSError:
                    continue
            time.sleep(0.02)

    def __enter__(self) -> "_Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def test_a_real_run_sends_the_key_to_the_server_and_to_no_command_line(standin: Callable[..., Standin],
                                                                      tmp_path: Path) -> None:
    """Not --check: the stand-in wants the key (VLLM_API_KEY, as vLLM), so only a run that delivered it passes;
    meanwhile every command line on the machine and the -vvv output are searched for it."""
    server = standin({"VLLM_API_KEY": KEY, "STANDIN_ITL_S": "0.002"})
    tiny = ["-e", f"spark_bench_url={server.url}", "-e", f"spark_bench_model={MODEL}",
            "-e", '{"spark_bench_suites": ["decode"], "spark_bench_concurrency": [1], "spark_bench_cases": ["code-nothink"]}',
            "-e", "spark_bench_max_tokens=16", "-e", "spark_bench_min_samples=2", "-e", "spark_bench_max_samples=2"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    refused = subprocess.run([str(PLAYBOOK), "playbooks/bench.yml", *tiny, "-e", f"spark_bench_output_dir={tmp_path / 'no-key'}"],
                             cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert refused.returncode != 0 and "401" in refused.stdout, refused.stdout[-2000:]
    with _Sampler() as sampler:
        proc = subprocess.run([str(PLAYBOOK), "playbooks/bench.yml", "-vvv", *tiny,
                               "-e", f"spark_bench_output_dir={tmp_path / 'key'}",
                               "-e", f"spark_bench_api_key_file={_key_file(tmp_path)}"],
                              cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert KEY not in proc.stdout and KEY not in proc.stderr
    assert any("bench.yml" in line for line in sampler.lines), "the sampler saw the run"
    assert not [line for line in sampler.lines if KEY in line]
