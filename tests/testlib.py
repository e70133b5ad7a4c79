"""Shared test plumbing (importable as `testlib`: pytest.ini puts tests/ on the path): load project modules
and filters the way Ansible does at run time."""
from __future__ import annotations

import copy

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The in-repo collection; pytest.ini puts collections/ on the path, so its Python imports as
# ansible_collections.sparkfleet.spark.* the way Ansible's collection loader names it at run time.
COLLECTION = ROOT / "collections" / "ansible_collections" / "sparkfleet" / "spark"
PLUGIN_KINDS = ("modules", "filter", "module_utils")
# The folder holding the bench package, sparkfleet_bench (pytest.ini puts it on the path too). A subprocess gets it
# on PYTHONPATH, so it runs this checkout's bench whichever checkout the venv's editable install points at.
BENCH_PARENT = COLLECTION / "plugins" / "module_utils"


def bench_command(module: str = "sparkfleet_bench") -> list[str]:
    """`python -m <module>` of this checkout's bench: sparkfleet_bench is the sparkfleet-bench command,
    sparkfleet_bench.scheduled the sparkfleet-bench-scheduled one (what the bench_schedule unit runs on a node).
    -S leaves site-packages out, so every run through it also shows the bench needs the standard library only."""
    return ["env", f"PYTHONPATH={BENCH_PARENT}", sys.executable, "-S", "-m", module]


def load_source(kind: str, name: str) -> ModuleType:
    """Import plugins/<kind>/<name>.py of the collection (kind modules, filter, module_utils), or <kind>/<name>.py
    of the repository, as a fresh standalone module."""
    path = (COLLECTION / "plugins" / kind if kind in PLUGIN_KINDS else ROOT / kind) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sparkfleet_{kind}_{name}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_role_file(role: str, name: str, siblings: dict[str, ModuleType]) -> ModuleType:
    """Import roles/<role>/files/<name>.py, a program or library that runs on the nodes, under its plain name.

    On a node it imports the files installed beside it by their plain names, and Python finds them because the
    program's own directory is first on its path; here each of those names is given the module already imported
    from the same file, so one file is one module object in a test."""
    for sibling, module in siblings.items():
        sys.modules[sibling] = module
    path = COLLECTION / "roles" / role / "files" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class ModuleExit(Exception):
    """Raised instead of exit_json so a test can inspect the result."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(json.dumps(result, default=str)[:200])
        self.result = result


class ModuleFail(ModuleExit):
    """Raised instead of fail_json."""


@pytest.fixture
def run_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run the collection's plugins/modules/<name>.py main() with arguments; return (failed, result)."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    def _exit(self: Any, **kwargs: Any) -> None:
        raise ModuleExit(kwargs)

    def _fail(self: Any, **kwargs: Any) -> None:
        raise ModuleFail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)

    def _run(name: str, args: dict[str, Any], check_mode: bool = False) -> tuple[bool, dict[str, Any]]:
        module = load_source("modules", name)
        full = dict(args)
        if check_mode:
            full["_ansible_check_mode"] = True
        with patch_module_args(full):
            try:
                module.main()
            except ModuleFail as exc:
                return True, exc.result
            except ModuleExit as exc:
                return False, exc.result
        raise AssertionError(f"{name} returned without exit_json/fail_json")

    yield _run


# Inventory mutations for the data-driven refusal tables: each returns a change applied to a list of raw entries.
def set_all(key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        for e in raw:
            e[key] = copy.deepcopy(value)
    return _change


def set_one(index: int, key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def _change(raw: list[dict[str, Any]]) -> None:
        raw[index][key] = copy.deepcopy(value)
    return _change
