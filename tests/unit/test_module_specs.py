"""Every module's argument spec is what its DOCUMENTATION says (as ansible-test's validate-modules holds them):
the same options and suboptions, each with the same type, required, default, elements and choices. The spec is
taken from the AnsibleModule the module's main() builds, so a default computed in code (spark_bench takes its
defaults from the bench library) is compared too."""
from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml

from testlib import COLLECTION

MODULES = sorted(path.stem for path in (COLLECTION / "plugins" / "modules").glob("spark_*.py"))
FIELDS = ("type", "required", "default", "elements", "choices")


class _Built(Exception):
    """Raised by the stand-in AnsibleModule with the argument spec main() gave it."""


def built_spec(name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """(argument spec main() builds, DOCUMENTATION options) of one module."""
    module = importlib.import_module(f"ansible_collections.sparkfleet.spark.plugins.modules.{name}")

    def stand_in(argument_spec: dict[str, Any], **_: Any) -> None:
        raise _Built(argument_spec)

    monkeypatch.setattr(module, "AnsibleModule", stand_in)
    with pytest.raises(_Built) as built:
        module.main()
    return built.value.args[0], yaml.safe_load(module.DOCUMENTATION).get("options") or {}


def _normal(option: dict[str, Any]) -> dict[str, Any]:
    """The compared fields, with AnsibleModule's implicit values (type str, not required, no default)."""
    return {"type": option.get("type", "str"), "required": bool(option.get("required", False)),
            "default": option.get("default"), "elements": option.get("elements"), "choices": option.get("choices")}


def differences(spec: dict[str, Any], doc: dict[str, Any], prefix: str = "") -> list[str]:
    """Every way spec and doc disagree, named by option path and field."""
    found: list[str] = []
    for name in sorted(set(spec) | set(doc)):
        path = prefix + name
        if name not in doc or name not in spec:
            found.append(f"{path}: {'not documented' if name not in doc else 'documented, not in the spec'}")
            continue
        ours, theirs = _normal(spec[name]), _normal(doc[name])
        found += [f"{path}.{key}: spec {ours[key]!r}, documented {theirs[key]!r}"
                  for key in FIELDS if ours[key] != theirs[key]]
        found += differences(spec[name].get("options") or {}, doc[name].get("suboptions") or {}, path + ".")
    return found


@pytest.mark.parametrize("name", MODULES)
def test_argument_spec_is_the_documentation(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, doc = built_spec(name, monkeypatch)
    assert differences(spec, doc) == []


@pytest.mark.parametrize("spec, doc, expected", [
    ({"a": {"type": "int", "default": 1}}, {"a": {"type": "int", "default": 1, "description": "x"}}, []),
    ({"a": {}}, {"a": {"description": "x"}}, []),
    ({"a": {"type": "int", "default": 2}}, {"a": {"type": "int", "default": 1}}, ["a.default: spec 2, documented 1"]),
    ({"a": {"type": "int", "choices": [1, 2]}}, {"a": {"type": "int"}}, ["a.choices: spec [1, 2], documented None"]),
    ({"a": {}, "b": {}}, {"a": {}, "c": {}}, ["b: not documented", "c: documented, not in the spec"]),
    ({"a": {"type": "list", "elements": "dict", "options": {"n": {"required": True}}}},
     {"a": {"type": "list", "elements": "dict", "suboptions": {"n": {}}}},
     ["a.n.required: spec True, documented False"]),
])
def test_differences_names_option_and_field(spec: dict[str, Any], doc: dict[str, Any], expected: list[str]) -> None:
    assert differences(spec, doc) == expected


def test_bench_defaults_are_the_bench_library_defaults() -> None:
    """spark_bench's option defaults come from BenchConfig and MonitorSpec, so the module, the CLI and the scheduled
    runner cannot drift apart (and the test above holds DOCUMENTATION to the same values)."""
    from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench.monitor import MonitorSpec
    from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench.suites import BenchConfig
    from ansible_collections.sparkfleet.spark.plugins.modules.spark_bench import ARGS

    config, monitor = BenchConfig(url="u", output_dir="o"), MonitorSpec(node="n")
    shared = [name for name in ARGS if hasattr(config, name) and not ARGS[name].get("required")]
    assert len(shared) >= 25
    assert {name: ARGS[name]["default"] for name in shared} == {name: getattr(config, name) for name in shared}
    options = ARGS["monitors"]["options"]
    assert {name: spec["default"] for name, spec in options.items() if name != "node"} == {
        name: getattr(monitor, name) for name in options if name != "node"}
