"""Serve test plumbing: the shared loader and run_module fixture of tests/unit/conftest.py."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from testlib import load_source, run_module  # noqa: E402,F401  (run_module is a fixture)
