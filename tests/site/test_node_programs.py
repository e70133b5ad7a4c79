"""Programs that run on the nodes, shipped whole: each runs from the files installed beside it and nothing else,
with the standard library only (no collection, no site-packages on a node's system Python)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import jinja2
import pytest
import yaml

from testlib import COLLECTION, load_source

SERVE = COLLECTION / "roles" / "serve"
UTILS = COLLECTION / "plugins" / "module_utils"
# Imports the program and prints the top-level names of every module outside the standard library that it loaded.
CHECK = """import sys
import {program}
print(" ".join(sorted({{name.partition(".")[0] for name in sys.modules}} - set(sys.stdlib_module_names) - {{"__main__"}})))
"""


def supervisor_files() -> dict[str, Path]:
    """What the serve role installs beside the supervisor, by the name it has on the node: src as the file lookup
    resolves it (a plain name from the role's files/, the rest from spark_serve_supervisor_source_dir)."""
    tasks = yaml.safe_load((SERVE / "tasks" / "supervisor.yml").read_text())
    task = next(t for t in tasks if t["name"] == "Serve | Install the supervisor's program and configuration on every rank")
    source_dir = str(UTILS)
    shipped = {}
    for item in task["vars"]["serve_supervisor_programs"]:
        src = jinja2.Template(item["src"]).render(spark_serve_supervisor_source_dir=source_dir)
        shipped[item["dest"]] = Path(src) if src.startswith("/") else SERVE / "files" / src
    return shipped


def guard_files() -> dict[str, Path]:
    """What spark_memory_guard writes into its program_dir (the watcher and its library, from the module's bundle)."""
    module = load_source("modules", "spark_memory_guard")
    return {module.PROGRAM: UTILS / "spark_memguard_watch.py", module.LIBRARY: UTILS / "spark_memguard.py"}


def run_shipped(tmp_path: Path, shipped: dict[str, Path], script: str) -> subprocess.CompletedProcess[str]:
    """Run a script among copies of the shipped files: -E -S -s leave no PYTHONPATH, site-packages or user site, so
    only the standard library and the script's own directory (first on sys.path, as for the program) remain."""
    for name, source in shipped.items():
        shutil.copy(source, tmp_path / name)
    (tmp_path / "check.py").write_text(script, encoding="utf-8")
    return subprocess.run([sys.executable, "-E", "-S", "-s", str(tmp_path / "check.py")], capture_output=True,
                          text=True, check=False, cwd=tmp_path, timeout=60)


@pytest.mark.parametrize(("shipped", "program"), [(supervisor_files, "supervise"), (guard_files, "memguard")])
def test_a_node_program_imports_the_standard_library_and_its_shipped_siblings_only(
        tmp_path: Path, shipped: Callable[[], dict[str, Path]], program: str) -> None:
    files = shipped()
    done = run_shipped(tmp_path, files, CHECK.format(program=program))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == sorted(Path(name).stem for name in files)


def test_the_supervisor_runs_from_its_shipped_copies(tmp_path: Path) -> None:
    done = run_shipped(tmp_path, supervisor_files(), (
        "import supervise, spark_serve_supervise as s\n"
        "print(s.restart_steps([s.Rank('a', 0, 'x', True), s.Rank('b', 1, 'y', False)]))\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("[('stop', 'a'), ('stop', 'b'), ('start', 'b'), ('start', 'a'), ('wait', 'a'), "
                                   "('steady', 'a'), ('steady', 'b')]")


def test_the_serve_role_ships_every_file_of_its_own_and_no_second_copy_of_a_library() -> None:
    shipped = supervisor_files()
    own = {path for path in shipped.values() if path.parent == SERVE / "files"}
    assert own == set((SERVE / "files").glob("*.py"))
    assert not {path.name for path in own} & {path.name for path in UTILS.glob("*.py")}
    assert {path.name for path in shipped.values()} - {path.name for path in own} == {"spark_serve_engine.py",
                                                                                      "spark_memguard.py"}
