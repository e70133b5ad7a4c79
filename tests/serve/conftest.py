"""Serve test plumbing: the shared loader and run_module fixture of tests/unit/conftest.py."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sparkfleet_unit_conftest", ROOT / "tests" / "unit" / "conftest.py")
assert _spec and _spec.loader
_unit = sys.modules.get(_spec.name)
if _unit is None:
    _unit = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _unit
    _spec.loader.exec_module(_unit)

load_source = _unit.load_source
run_module = _unit.run_module
