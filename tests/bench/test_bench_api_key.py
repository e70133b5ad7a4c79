"""The bench's API key never has to be on a command line: the CLI and the module read it from a 0600 key file
themselves (api_key_file) or from $OPENAI_API_KEY; bench.yml writes a vaulted spark_bench_api_key to a private
file for the run and refuses a key passed as `-e spark_bench_api_key=...`."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from testlib import ROOT

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_bench_client import read_api_key
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
