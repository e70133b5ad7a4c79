"""Serve test plumbing: the shared loader and run_module fixture of tests/testlib.py."""
from testlib import ROOT, load_source, run_module  # noqa: F401  (run_module is a fixture)
