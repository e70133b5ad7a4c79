"""Documentation shared by the modules that only read and measure (check mode is the same run)."""
from __future__ import annotations


class ModuleDocFragment:
    """`extends_documentation_fragment: [spark_read_only]` in a module's DOCUMENTATION."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Read-only; behaves the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
"""
