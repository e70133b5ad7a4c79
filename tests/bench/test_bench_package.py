"""The bench as a Python package: bench/pyproject.toml builds the collection's module_utils/sparkfleet_bench,
with no dependencies, the two commands and galaxy.yml's version; the measuring path imports nothing beyond the
standard library; the venv carries the commands (make setup)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from testlib import BENCH_PARENT, COLLECTION, ROOT, bench_command

PACKAGE = BENCH_PARENT / "sparkfleet_bench"


def test_pyproject_builds_the_collections_package() -> None:
    project = tomllib.loads((ROOT / "bench" / "pyproject.toml").read_text())
    assert project["project"]["name"] == "sparkfleet-bench"
    assert project["project"]["dependencies"] == [] and "optional-dependencies" not in project["project"]
    assert project["project"]["scripts"] == {"sparkfleet-bench": "sparkfleet_bench.cli:main",
                                             "sparkfleet-bench-scheduled": "sparkfleet_bench.scheduled:main"}
    setuptools = project["tool"]["setuptools"]
    assert setuptools["packages"] == ["sparkfleet_bench"]
    assert (ROOT / "bench" / setuptools["package-dir"]["sparkfleet_bench"]).resolve() == PACKAGE
    # one version: the package's __version__, which test_bench_cli holds equal to galaxy.yml
    assert project["project"]["dynamic"] == ["version"]
    assert setuptools["dynamic"]["version"] == {"attr": "sparkfleet_bench.__version__"}


def test_the_measuring_path_needs_the_standard_library_only(tmp_path: Path) -> None:
    """Every module of the package, and a whole CLI run (stopped at an unreachable server, reports and plots
    written), in an interpreter without site-packages: what it loaded is the standard library and the package."""
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert {"cli", "client", "suites", "scheduled", "plots", "sampler"} <= set(modules)
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module('sparkfleet_bench.' + name)\n"
        "from sparkfleet_bench.cli import main\n"
        f"code = main(['--url', 'http://127.0.0.1:9', '--output-dir', {str(tmp_path / 'out')!r}, '--suites', 'decode',"
        " '--concurrency', '1', '--cases', 'prose', '--timeout', '2'])\n"
        "tops = {m.split('.')[0] for m in sys.modules}\n"
        "print(code, sorted(tops - set(sys.stdlib_module_names) - {'sparkfleet_bench', '__main__'}))\n")
    proc = subprocess.run(["env", f"PYTHONPATH={BENCH_PARENT}", sys.executable, "-S", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "1 []", proc.stdout[-2000:]  # verdict fail (unreachable), nothing else
    assert (tmp_path / "out" / "bench.json").is_file()


def test_the_venv_has_the_commands() -> None:
    """make setup installs bench/ into the venv; its commands are the package's entry points."""
    declared = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["version"]
    bin_dir = Path(sys.executable).parent
    missing = [name for name in ("sparkfleet-bench", "sparkfleet-bench-scheduled") if not (bin_dir / name).is_file()]
    assert not missing, f"{missing} not in {bin_dir}: run make setup (it installs bench/ into the venv)"
    version = subprocess.run([str(bin_dir / "sparkfleet-bench"), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"sparkfleet-bench {declared}", version.stderr
    scheduled = subprocess.run([str(bin_dir / "sparkfleet-bench-scheduled"), "--help"], capture_output=True, text=True,
                               timeout=60)
    assert scheduled.returncode == 0 and scheduled.stdout.startswith("usage: sparkfleet-bench-scheduled")


def test_python_m_runs_the_cli() -> None:
    proc = subprocess.run(bench_command() + ["--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: sparkfleet-bench")
