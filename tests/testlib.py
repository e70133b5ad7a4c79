"""Shared test plumbing (importable as `testlib`: pytest.ini puts tests/ on the path): load project modules
and filters the way Ansible does at run time."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Ansible merges the project's module_utils/ into ansible.module_utils at run time; mimic that.
import ansible.module_utils  # noqa: E402

_MU = str(ROOT / "module_utils")
if _MU not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MU)


def load_source(kind: str, name: str) -> ModuleType:
    """Import library/<name>.py or filter_plugins/<name>.py as a standalone module."""
    path = ROOT / kind / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sparkfleet_{kind}_{name}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
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
    """Run library/<name>.py main() with arguments; return (failed, result)."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    def _exit(self: Any, **kwargs: Any) -> None:
        raise ModuleExit(kwargs)

    def _fail(self: Any, **kwargs: Any) -> None:
        raise ModuleFail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)

    def _run(name: str, args: dict[str, Any], check_mode: bool = False) -> tuple[bool, dict[str, Any]]:
        module = load_source("library", name)
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
