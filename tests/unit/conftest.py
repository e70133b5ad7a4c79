"""The unit tests' fixtures come from the shared testlib (also used by tests/image and tests/serve)."""
from testlib import ROOT, ModuleExit, ModuleFail, load_source, run_module  # noqa: F401
