"""Every role's README variables table lists exactly the role's interface: each variable of
defaults/main.yml, each option of meta/argument_specs.yml (any entry point), and nothing else."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from testlib import COLLECTION

ROLES = sorted(path.name for path in (COLLECTION / "roles").iterdir() if (path / "defaults" / "main.yml").is_file())


def interface(role: str) -> tuple[set[str], set[str]]:
    """(defaults names, argument_specs option names of every entry point)."""
    base = COLLECTION / "roles" / role
    defaults = set(yaml.safe_load((base / "defaults" / "main.yml").read_text()) or {})
    specs: set[str] = set()
    spec_file = base / "meta" / "argument_specs.yml"
    if spec_file.is_file():
        for entry in (yaml.safe_load(spec_file.read_text()).get("argument_specs") or {}).values():
            specs |= set((entry or {}).get("options") or {})
    return defaults, specs


def variables_table(readme: str) -> list[str]:
    """First-column cells of the table under '## Variables' (up to the next heading)."""
    match = re.search(r"^## Variables\s*$(.*?)(?=^#)", readme + "\n#", re.M | re.S)
    assert match, "no '## Variables' section"
    rows = [line for line in match.group(1).splitlines() if line.startswith("|")]
    return [row.split("|")[1] for row in rows[2:]]


def names_in(cell: str, known: set[str]) -> list[str]:
    """Variable names of one cell; `a_b_c` / `_d` is shorthand for a sibling sharing a prefix of a_b_c."""
    names: list[str] = []
    for token in re.findall(r"`([a-z0-9_]+)`", cell):
        if token.startswith("spark_"):
            names.append(token)
        elif token.startswith("_") and names:
            first = names[0]
            cuts = [i for i, char in enumerate(first) if char == "_"]
            candidates = [first[:i] + token for i in reversed(cuts)]
            names.append(next((c for c in candidates if c in known), candidates[0]))
    return names


@pytest.mark.parametrize("role", ROLES)
def test_variables_table_matches_the_role_interface(role: str) -> None:
    defaults, specs = interface(role)
    known = defaults | specs
    listed = {name for cell in variables_table((COLLECTION / "roles" / role / "README.md").read_text())
              for name in names_in(cell, known)}
    assert sorted(defaults - specs) == [], f"{role}: defaults missing from meta/argument_specs.yml"
    assert sorted(known - listed) == [], f"{role}: variables missing from the README table"
    assert sorted(listed - known) == [], f"{role}: README rows that are not role variables"


def test_shorthand_rows_expand_to_siblings() -> None:
    known = {"spark_x_swap_4k", "spark_x_swap_64k", "spark_x_name", "spark_x_version"}
    assert names_in("`spark_x_swap_4k` / `_swap_64k`", known) == ["spark_x_swap_4k", "spark_x_swap_64k"]
    assert names_in("`spark_x_name` / `_version`", known) == ["spark_x_name", "spark_x_version"]
    assert names_in("`spark_x_name` / `_bogus`", known) == ["spark_x_name", "spark_x_bogus"]


def test_table_is_read_only_from_the_variables_section() -> None:
    readme = ("# r\n\n| `spark_r_elsewhere` | x |\n\n## Variables\n\n| Variable | Default | Meaning |\n|---|---|---|\n"
              "| `spark_r_a` | `1` | a |\n| `spark_r_b`, `spark_r_c` | `2` | b, c |\n\n## Tags\n\n| `spark_r_tag` | t |\n")
    cells = variables_table(readme)
    assert [names_in(cell, set()) for cell in cells] == [["spark_r_a"], ["spark_r_b", "spark_r_c"]]
