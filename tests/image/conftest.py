"""Image and model test plumbing: the shared loader (testlib), tiny git upstreams with patch series."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from testlib import ROOT, load_source, run_module  # noqa: F401  (run_module is a fixture)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def subprocess_runner(args: List[str], cwd: Optional[str], env: Dict[str, str]) -> Tuple[int, str, str]:
    """The Runner shape spark_upstream expects, backed by subprocess (the module uses run_command)."""
    proc = subprocess.run(args, cwd=cwd if cwd and os.path.isdir(cwd) else None, env={**os.environ, **env},
                          capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def git(cwd: Path, *args: str, date: str = "2026-01-02T03:04:05+00:00") -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Upstream Author", "GIT_AUTHOR_EMAIL": "author@example.org",
           "GIT_COMMITTER_NAME": "Upstream Author", "GIT_COMMITTER_EMAIL": "author@example.org",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull}
    proc = subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True)
    return proc.stdout.strip()


class Upstream:
    """A local upstream repository with a pinned base commit and a two-patch series made by format-patch."""

    def __init__(self, root: Path) -> None:
        self.repo = root / "upstream.git-src"
        self.repo.mkdir(parents=True)
        git(self.repo, "init", "-q")
        (self.repo / "server.py").write_text("PORT = 8000\nNAME = 'standin'\n")
        (self.repo / "README").write_text("stand-in upstream\n")
        git(self.repo, "add", ".")
        git(self.repo, "commit", "-qm", "base")
        self.base = git(self.repo, "rev-parse", "HEAD")
        git(self.repo, "checkout", "-qb", "series")
        (self.repo / "server.py").write_text("PORT = 8000\nNAME = 'sparkfleet'\n")
        git(self.repo, "commit", "-qam", "Rename the served model", date="2026-02-03T04:05:06+00:00")
        (self.repo / "extra.txt").write_text("added by patch two\n")
        git(self.repo, "add", "extra.txt")
        git(self.repo, "commit", "-qm", "Add extra file", date="2026-02-04T05:06:07+00:00")
        self.patch_dir = root / "patches"
        git(self.repo, "format-patch", "-q", "-o", str(self.patch_dir), self.base)
        self.patches = sorted(p.name for p in self.patch_dir.iterdir())
        self.expected_tree = git(self.repo, "rev-parse", "HEAD^{tree}")
        git(self.repo, "checkout", "-q", "main")
        # Upstream moves on after the pin: the pin must still be fetched by id.
        (self.repo / "later.txt").write_text("later\n")
        git(self.repo, "add", "later.txt")
        git(self.repo, "commit", "-qm", "later")


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path)


@pytest.fixture
def module_warnings(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """Warnings the module emits, captured per test (Ansible's global warning list is shared by the suite)."""
    from ansible.module_utils import basic

    captured: List[str] = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: captured.append(str(warning)))
    return captured
