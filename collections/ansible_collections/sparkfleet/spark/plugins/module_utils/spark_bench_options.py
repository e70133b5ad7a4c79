"""The bench's options as Ansible sees them: each option's type, with its default taken from BenchConfig and
MonitorSpec, where the defaults are declared once. The spark_bench module builds its argument spec here, and
the bench_schedule role's filter types and checks a scheduled run's options with the same spec."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench.monitor import MonitorSpec
from ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench.suites import BenchConfig, validate

# Options that are not BenchConfig fields: the key arrives as a file, the progress goes to a log.
OWN_DEFAULTS: dict[str, Any] = {"api_key_file": "", "progress_log": ""}

OPTION_TYPES: dict[str, dict[str, Any]] = {
    "url": {"type": "str", "required": True},
    "model": {"type": "str"},
    "output_dir": {"type": "path", "required": True},
    "suites": {"type": "list", "elements": "str"},
    "concurrency": {"type": "list", "elements": "int"},
    "cases": {"type": "list", "elements": "str"},
    "depths": {"type": "list", "elements": "int"},
    "min_samples": {"type": "int"},
    "max_samples": {"type": "int"},
    "precision": {"type": "float"},
    "tolerance": {"type": "float"},
    "compare": {"type": "str"},
    "seed": {"type": "int"},
    "force_compare": {"type": "bool"},
    "identity": {"type": "dict"},
    "sparkfleet_version": {"type": "str"},
    "timeout": {"type": "float"},
    "max_tokens": {"type": "int"},
    "prefill_sizes": {"type": "list", "elements": "int"},
    "prefill_texts": {"type": "list", "elements": "str"},
    "prefill_repeats": {"type": "int"},
    "prefix_tokens": {"type": "int"},
    "admission_tokens": {"type": "int"},
    "needle_tokens": {"type": "int"},
    "idle_timeout": {"type": "float"},
    "poll_interval": {"type": "float"},
    "api_key_file": {"type": "path"},
    "extra_body": {"type": "dict"},
    "progress_log": {"type": "path"},
    "monitors": {"type": "list", "elements": "dict"},
    "monitor_limits": {"type": "dict"},
}

MONITOR_TYPES: dict[str, dict[str, Any]] = {
    "node": {"type": "str", "required": True},
    "argv": {"type": "list", "elements": "str"},
    "remote_shell": {"type": "bool"},
    "memory_floor_gib": {"type": "float"},
    "gpu_required": {"type": "bool"},
    "python": {"type": "str"},
}


def field_defaults(cls: type) -> dict[str, Any]:
    """{field: its default} of a dataclass, for the fields that have one (a fresh copy of mutable ones)."""
    found: dict[str, Any] = {}
    for item in dataclasses.fields(cls):
        if item.default is not dataclasses.MISSING:
            found[item.name] = item.default
        elif item.default_factory is not dataclasses.MISSING:
            found[item.name] = item.default_factory()
    return found


def _with_defaults(types: Mapping[str, dict[str, Any]], defaults: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each option's spec with its default (required options have none)."""
    return {name: dict(spec) if spec.get("required") else {**spec, "default": defaults[name]}
            for name, spec in types.items()}


def argument_spec() -> dict[str, dict[str, Any]]:
    """The spark_bench module's argument spec, defaults included."""
    spec = _with_defaults(OPTION_TYPES, {**field_defaults(BenchConfig), **OWN_DEFAULTS})
    spec["monitors"]["options"] = _with_defaults(MONITOR_TYPES, field_defaults(MonitorSpec))
    return spec


def typed_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the options given, typed as the module would type them; every problem, named by option) for a run
    configured outside the module: strings from -e and templating become numbers and lists, then the bench's own
    validate() judges them together with the defaults of the options not given."""
    spec = {name: value for name, value in argument_spec().items() if name not in ("url", "output_dir")}
    result = ArgumentSpecValidator(spec).validate(dict(options))
    if result.error_messages:
        return {}, list(result.error_messages)
    typed = {name: result.validated_parameters[name] for name in options}
    fields = {name: value for name, value in typed.items() if name not in OWN_DEFAULTS}
    return typed, [p for p in validate(BenchConfig(url="http://bench.invalid", output_dir="-", **fields))]
