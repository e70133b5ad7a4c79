"""Pure planning of the serving launch: named profile + site settings -> per-rank serve spec, and refusals.

The profile is chosen by name (spark_serve_profile, or the topology's promoted default) from the collection's
table (module_utils/spark_serve_profiles.py) and changed per site by spark_serve_overrides; the container
name, ports, model, directories and guards are spark_serve_* site settings. The spec of a rank is exactly
what that rank launches (image, argv after the image, environment, docker run options), so render.yml and
the serve role compute the same thing from the same inventory. Refusals are reasons not to launch at all
(no profile, a profile for another shape or kernel, a kernel backend the arguments contradict, hosts that
miss the profile's kernel requirements); malformed settings are errors naming the host and the variable.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_memguard as _MEMGUARD
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_host as _HOST
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_pins as _PINS
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_policy as _POLICY
from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_serve_profiles as _PROFILES
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_data import plain as _plain

PREFIX = "spark_serve_"
PROFILE_KEYS = (
    "profile", "no_profile_reason", "topology", "nodes", "launch_enabled", "image", "container",
    "api_port", "master_port", "model_repo", "model_revision", "model_name", "binds", "vllm_args", "env",
    "run", "requires", "guard_startup_threshold", "guard_startup_interval", "guard_startup_wait",
    "guard_steady_threshold", "guard_steady_interval", "kernel_backend",
)
REQUIRED = tuple(k for k in PROFILE_KEYS if k not in ("no_profile_reason",))
# Site settings read from spark_serve_<key> (defaults: spark_serve_profiles.SETTINGS, the model's pins).
SITE_KEYS = tuple(_PROFILES.SETTINGS) + ("model_dir", "binds")
# Fields of the named profile: an inventory changes them through spark_serve_overrides, never on their own.
PROFILE_FIELDS = {"vllm_args": "args", "env": "env", "run": "run", "requires": "requires", "image": "image",
                  "topology": None, "nodes": None}
# Per-host plan facts the profile's kernel requirements are checked against before any host is contacted.
HOST_PLAN = "host_plan"
_FALSE = ("false", "no", "off", "0", "")
# Appended per rank by spark_serve_spec; a profile that carries them would launch them twice.
RANK_FLAGS = ("--node-rank", "--master-addr", "--master-port", "--headless")
SHAPE_FLAGS = ("--tensor-parallel-size", "--nnodes")
FLAVOURS = _PROFILES.FLAVOURS
_CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")  # Docker's own rule (two characters or more)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)




def _fail(host: str, field: str, problem: str) -> AnsibleFilterError:
    return AnsibleFilterError(f"host {host}: {PREFIX}{field} {problem}")


# --- profile checks -------------------------------------------------------------------------------

def _check_port(host: str, field: str, value: Any) -> None:
    if not _is_int(value) or not 1 <= value <= 65535:
        raise _fail(host, field, f"must be a port number 1-65535, got {value!r}")


def _check_arg(host: str, index: int, value: Any) -> None:
    if isinstance(value, bool) or value is None:
        raise _fail(host, f"vllm_args[{index}]", f"must be a string, a number or a mapping/list (JSON), got {value!r}")
    if not isinstance(value, (str, int, float, Mapping, list)):
        raise _fail(host, f"vllm_args[{index}]", f"has an unsupported type {type(value).__name__}")
    if isinstance(value, str) and value in RANK_FLAGS:
        raise _fail(host, f"vllm_args[{index}]", f"must not contain {value}: it is added per rank")


def _check_env(host: str, env: Any) -> None:
    if not isinstance(env, Mapping):
        raise _fail(host, "env", f"must be a mapping of variable to string, got {type(env).__name__}")
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise _fail(host, "env", f"has an invalid variable name {key!r}")
        if isinstance(value, (Mapping, list, bool)) or value is None:
            raise _fail(host, f"env.{key}", f"must be a string or a number, got {value!r}")


def _check_binds(host: str, binds: Any) -> None:
    if not isinstance(binds, list):
        raise _fail(host, "binds", f"must be a list of {{source, target, mode}}, got {type(binds).__name__}")
    targets = []
    for i, bind in enumerate(binds):
        field = f"binds[{i}]"
        if not isinstance(bind, Mapping) or set(bind) != {"source", "target", "mode"}:
            raise _fail(host, field, f"must have exactly source, target and mode, got {bind!r}")
        for key in ("source", "target"):
            if not isinstance(bind[key], str) or not bind[key].startswith("/") or ":" in bind[key]:
                raise _fail(host, f"{field}.{key}", f"must be an absolute path without ':', got {bind[key]!r}")
        if bind["mode"] not in ("ro", "rw"):
            raise _fail(host, f"{field}.mode", f"must be ro or rw, got {bind['mode']!r}")
        targets.append(bind["target"])
    dupes = sorted({t for t in targets if targets.count(t) > 1})
    if dupes:
        raise _fail(host, "binds", f"mounts {', '.join(dupes)} twice")


def _check_requires(host: str, requires: Any) -> None:
    if not isinstance(requires, Mapping) or set(requires) != {"kernel_flavour", "page_size", "memory_saver"}:
        raise _fail(host, "requires", f"must have exactly kernel_flavour, page_size and memory_saver, got {requires!r}")
    if requires["kernel_flavour"] not in FLAVOURS:
        raise _fail(host, "requires.kernel_flavour", f"must be one of {', '.join(FLAVOURS)}, got {requires['kernel_flavour']!r}")
    if requires["page_size"] != FLAVOURS[requires["kernel_flavour"]]:
        raise _fail(host, "requires.page_size", f"must be {FLAVOURS[requires['kernel_flavour']]} for the "
                                                f"{requires['kernel_flavour']} flavour, got {requires['page_size']!r}")
    if not isinstance(requires["memory_saver"], bool):
        raise _fail(host, "requires.memory_saver", f"must be true or false, got {requires['memory_saver']!r}")
    if requires["memory_saver"] and requires["kernel_flavour"] != "64k":
        raise _fail(host, "requires.memory_saver", "can only be required with the 64k kernel flavour")


def _check_guards(host: str, profile: Mapping[str, Any]) -> None:
    errors = _MEMGUARD.setting_errors(profile)
    if errors:
        field, problem = errors[0]
        raise _fail(host, field, problem)


def _check_scalars(host: str, profile: Mapping[str, Any]) -> None:
    for key in ("profile", "topology", "image", "model_repo", "model_revision", "model_name"):
        if not isinstance(profile[key], str) or not profile[key].strip():
            raise _fail(host, key, f"must be a non-empty string, got {profile[key]!r}")
    if not _is_int(profile["nodes"]) or profile["nodes"] < 2:
        raise _fail(host, "nodes", f"must be an integer >= 2, got {profile['nodes']!r}")
    if not isinstance(profile["launch_enabled"], bool):
        raise _fail(host, "launch_enabled", f"must be true or false, got {profile['launch_enabled']!r}")
    if not isinstance(profile["container"], str) or not _CONTAINER_NAME.match(profile["container"]):
        raise _fail(host, "container", f"must be a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*), got {profile['container']!r}")
    if profile["kernel_backend"] not in _PROFILES.BACKENDS:
        raise _fail(host, "overrides.kernel_backend", f"must be one of {', '.join(_PROFILES.BACKENDS)}, "
                                                      f"got {profile['kernel_backend']!r}")
    _check_port(host, "api_port", profile["api_port"])
    _check_port(host, "master_port", profile["master_port"])
    if profile["api_port"] == profile["master_port"]:
        raise _fail(host, "master_port", f"must differ from {PREFIX}api_port ({profile['api_port']})")


def check_profile(host: str, profile: Any) -> None:
    """Raise naming host and variable when a (non-null) profile is malformed."""
    if not isinstance(profile, Mapping):
        raise AnsibleFilterError(f"host {host}: the serving profile must be a mapping, got {type(profile).__name__}")
    missing = [f"{PREFIX}{k}" for k in REQUIRED if profile.get(k) is None]
    if missing:
        raise AnsibleFilterError(f"host {host}: serving profile {profile.get('profile')!r} is missing {', '.join(missing)}")
    _check_scalars(host, profile)
    if not isinstance(profile["vllm_args"], list) or not profile["vllm_args"]:
        raise _fail(host, "vllm_args", "must be a non-empty list")
    for i, arg in enumerate(profile["vllm_args"]):
        _check_arg(host, i, arg)
    _check_env(host, profile["env"])
    if not isinstance(profile["run"], Mapping):
        raise _fail(host, "run", f"must be a mapping of docker run options, got {type(profile['run']).__name__}")
    for key in ("network_mode", "ipc_mode"):
        if profile["run"].get(key) != "host":
            raise _fail(host, f"run.{key}", f"must be host (rendezvous, Gloo and worker shared memory), got {profile['run'].get(key)!r}")
    if "env" in profile["run"] or "volumes" in profile["run"]:
        raise _fail(host, "run", "must not carry env or volumes (use spark_serve_env and spark_serve_binds)")
    _check_binds(host, profile["binds"])
    _check_requires(host, profile["requires"])
    _check_guards(host, profile)


# --- extraction -----------------------------------------------------------------------------------

def _is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() in _FALSE)


def _site(host: str, hv: Mapping[str, Any]) -> dict[str, Any]:
    site = {key: _plain(hv[PREFIX + key]) if PREFIX + key in hv else default
            for key, default in _PROFILES.SETTINGS.items()}
    if PREFIX + "model_dir" in hv:
        site["model_dir"] = _plain(hv[PREFIX + "model_dir"])
    else:
        site["model_dir"] = _plain(_PINS.host_value(hv, "spark_model_dir"))
    site["binds"] = (_plain(hv[PREFIX + "binds"]) if PREFIX + "binds" in hv else
                     [{"source": site["model_dir"], "target": "/models", "mode": "ro"},
                      {"source": site["cache_dir"], "target": "/cache", "mode": "rw"}])
    return site


def _refuse_loose_fields(host: str, hv: Mapping[str, Any]) -> None:
    for key, field in PROFILE_FIELDS.items():
        if PREFIX + key in hv:
            where = f"spark_serve_overrides.{field}" if field else "another spark_serve_profile"
            raise _fail(host, key, f"is a field of the named serving profile: choose the profile with "
                                   f"spark_serve_profile and change it with {where}")


def _overrides(host: str, hv: Mapping[str, Any]) -> dict[str, Any]:
    overrides = _plain(hv.get(PREFIX + "overrides")) or {}
    errors = _PROFILES.override_errors(overrides)
    if errors:
        field, problem = errors[0]
        raise _fail(host, field, problem)
    return overrides


def _host_plan(hv: Mapping[str, Any]) -> dict[str, Any]:
    return {"kernel_candidate_release": _plain(_PINS.host_value(hv, "spark_kernel_candidate_release")),
            # The memory_saver role installs it unless the site turns it off.
            "memory_saver_enabled": not _is_false(hv.get("spark_memory_saver_enabled", True))}


def _profile_name(host: str, hv: Mapping[str, Any], count: int) -> Any:
    if PREFIX + "profile" in hv:
        name = _plain(hv[PREFIX + "profile"])
    else:
        name = _PROFILES.default_name(hv.get("spark_topology"), count)
    if name is not None and name not in _PROFILES.PROFILES:
        raise _fail(host, "profile", f"{name!r} is not a serving profile (one of {', '.join(_PROFILES.PROFILES)})")
    return name


def spark_serve_profile(host: str, hv: Mapping[str, Any], count: int) -> dict[str, Any]:
    """One host's serving profile: the named profile, its overrides and the site settings, checked."""
    _refuse_loose_fields(host, hv)
    name = _profile_name(host, hv, count)
    if name is None:
        reason = hv.get(PREFIX + "no_profile_reason") or _PROFILES.no_profile_reason(hv.get("spark_topology"), count)
        return {"profile": None, "no_profile_reason": _plain(reason)}
    overrides = _overrides(host, hv)
    chosen = _PROFILES.resolve(name, overrides)
    site = _site(host, hv)
    if "image" in overrides:
        image = chosen["image"]
    else:
        image = _plain(hv["spark_image_tag"]) if hv.get("spark_image_tag") else chosen["image"]
    profile = {
        "profile": name, "topology": chosen["topology"], "nodes": chosen["nodes"], "image": image,
        "kernel_backend": chosen["kernel_backend"], "vllm_args": _PROFILES.argv(chosen["args"], site),
        "env": chosen["env"], "run": chosen["run"], "requires": chosen["requires"],
    }
    profile.update({k: site[k] for k in SITE_KEYS if k != "cache_dir" and k != "model_dir"})
    profile[HOST_PLAN] = _host_plan(hv)
    check_profile(host, profile)
    return profile


def spark_serve_profiles(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> dict[str, Any]:
    """host -> serving profile ({"profile": None, "no_profile_reason"} where the site or shape serves none)."""
    if isinstance(hosts, str) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError("spark_serve_profiles: expected the list of hosts of group 'spark'")
    profiles: dict[str, Any] = {}
    for host in hosts:
        try:
            hv = hostvars[host]
        except KeyError as exc:
            raise AnsibleFilterError(f"spark_serve_profiles: host {host} has no variables") from exc
        profiles[str(host)] = spark_serve_profile(str(host), hv, len(hosts))
    return profiles


# --- spec -----------------------------------------------------------------------------------------

def _argv_item(value: Any) -> str:
    if isinstance(value, (Mapping, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def spark_serve_args(profile: Mapping[str, Any]) -> list[str]:
    """The profile's engine arguments as argv strings (mappings and lists as compact JSON)."""
    return [_argv_item(v) for v in profile["vllm_args"]]


def _head(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    heads = [n for n in plan.get("nodes", []) if n.get("rank") == 0]
    if len(heads) != 1:
        raise AnsibleFilterError("spark_serve_spec: the plan has no single rank-0 node")
    return heads[0]


def _env(host: str, profile: Mapping[str, Any], nccl_env: Mapping[str, Any]) -> dict[str, str]:
    env = {str(k): str(v) for k, v in nccl_env.items()}
    for key, value in profile["env"].items():
        if key in env and env[key] != str(value):
            raise _fail(host, f"env.{key}", f"({value}) conflicts with the collective environment ({env[key]}); "
                                            "NCCL and socket variables belong in spark_nccl_overrides")
        env[key] = str(value)
    return dict(sorted(env.items()))


def _run(profile: Mapping[str, Any]) -> dict[str, Any]:
    run = dict(profile["run"])
    run["volumes"] = [f"{b['source']}:{b['target']}:{b['mode']}" for b in profile["binds"]]
    return dict(sorted(run.items()))


def spark_serve_spec(node: Mapping[str, Any], plan: Mapping[str, Any], profile: Mapping[str, Any],
                     nccl_env: Mapping[str, Any]) -> dict[str, Any]:
    """What one rank launches: {"name", "image", "command", "env", "run"} (serve.json)."""
    host = str(node.get("host", "?"))
    check_profile(host, profile)
    head = _head(plan)
    command = spark_serve_args(profile) + [
        "--node-rank", str(node["rank"]),
        "--master-addr", str(head["mgmt_address"]),
        "--master-port", str(profile["master_port"]),
    ]
    if node["rank"] >= 1:
        command.append("--headless")
    return {
        "name": profile["container"],
        "image": profile["image"],
        "command": command,
        "env": _env(host, profile, nccl_env),
        "run": _run(profile),
    }


# --- refusals -------------------------------------------------------------------------------------

def _flag_values(args: Sequence[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def _draft_tp(profile: Mapping[str, Any]) -> Any:
    args = profile["vllm_args"]
    for i, arg in enumerate(args[:-1]):
        if arg == "--speculative-config":
            spec = args[i + 1]
            return spec.get("draft_tensor_parallel_size") if isinstance(spec, Mapping) else "not a mapping"
    return None


def spark_serve_size_refusals(profile: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    """A named profile that does not fit the group's shape: its topology and node count, and the engine's
    tensor-parallel, node and draft sizes. Validation of several serving groups refuses these per group."""
    name, count, topology = profile["profile"], len(plan["nodes"]), plan["topology"]
    refusals = []
    if (profile["topology"], profile["nodes"]) != (topology, count):
        refusals.append(f"profile {name} is for a {profile['topology']} of {profile['nodes']} nodes, "
                        f"the plan is a {topology} of {count} nodes")
    args = spark_serve_args(profile)
    for flag in SHAPE_FLAGS:
        values = _flag_values(args, flag)
        if values != [str(count)]:
            refusals.append(f"profile {name}: {flag} must appear once with the node count {count}, found {values}")
    draft = _draft_tp(profile)
    if draft is not None and draft != count:
        refusals.append(f"profile {name}: --speculative-config draft_tensor_parallel_size must be {count}, got {draft!r}")
    return refusals


def _shape_refusals(profile: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    name, args = profile["profile"], spark_serve_args(profile)
    refusals = spark_serve_size_refusals(profile, plan)
    refusals += [f"profile {name}: {problem}" for problem in
                 _PROFILES.backend_errors(profile["kernel_backend"], args, profile["env"])]
    if not profile["launch_enabled"]:
        refusals.append(f"profile {name} has spark_serve_launch_enabled: false")
    return refusals


def _plan_refusals(host: str, name: str, requires: Mapping[str, Any], plan: Any) -> list[str]:
    """A 64 KiB profile on hosts the inventory does not plan a 64 KiB kernel or the Memory Saver for."""
    if not isinstance(plan, Mapping):
        return []
    refusals = []
    release = plan.get("kernel_candidate_release")
    if requires["kernel_flavour"] == "64k" and _HOST.page_flavour(str(release)) != "64k":
        refusals.append(f"host {host}: profile {name} requires the 64k kernel, the planned kernel "
                        f"(spark_kernel_candidate_release {release}) is the {_HOST.page_flavour(str(release))} flavour")
    if requires["memory_saver"] and not plan.get("memory_saver_enabled", True):
        refusals.append(f"host {host}: profile {name} requires the Memory Saver, the host plan disables it "
                        "(spark_memory_saver_enabled: false)")
    return refusals


def _drift_refusals(profiles: Mapping[str, Any], order: Sequence[str]) -> list[str]:
    """Any difference between ranks' engine settings hangs startup without an error; refuse it."""
    first = order[0]
    refusals = []
    for host in order[1:]:
        keys = sorted(k for k in set(profiles[first]) | set(profiles[host])
                      if k != HOST_PLAN and profiles[first].get(k) != profiles[host].get(k))
        if keys:
            refusals.append(f"host {host}: {', '.join(PREFIX + k for k in keys)} differ from {first}'s "
                            "(every rank must launch the same profile)")
    return refusals


def _fact(facts: Mapping[str, Any], key: str) -> tuple[Any, str]:
    value = facts.get(key)
    reason = (facts.get("unavailable") or {}).get(key) or "not reported"
    return value, reason


def _host_refusals(host: str, name: str, requires: Mapping[str, Any], facts: Any) -> list[str]:
    if not isinstance(facts, Mapping):
        return [f"host {host}: no host facts to check profile {name}'s requirements (gather spark_host_facts first)"]
    refusals = []
    release, why = _fact(facts, "kernel_release")
    flavour = facts.get("page_size_flavour") or (None if release is None else
                                                 ("64k" if str(release).endswith("-64k") else "4k"))
    if flavour != requires["kernel_flavour"]:
        refusals.append(f"host {host}: kernel {release if release is not None else '(' + why + ')'} is not the "
                        f"{requires['kernel_flavour']} flavour required by profile {name}")
    page_size, why = _fact(facts, "page_size")
    if page_size != requires["page_size"]:
        shown = page_size if page_size is not None else f"unknown ({why})"
        refusals.append(f"host {host}: page size {shown}, profile {name} requires {requires['page_size']}")
    if requires["memory_saver"]:
        packing, why = _fact(facts, "uvm_packing")
        if str(packing).strip() != "Y":
            shown = f"uvm_pack_sysmem_leaf_tables={packing}" if packing is not None else why
            refusals.append(f"host {host}: memory saver is not active ({shown}), profile {name} requires it")
    return refusals


def spark_serve_refusals(profiles: Mapping[str, Any], plan: Mapping[str, Any],
                         host_facts: Mapping[str, Any] | None = None) -> list[str]:
    """Every reason not to serve this plan; [] when it may launch. Host checks only when facts are given."""
    if not isinstance(profiles, Mapping) or not isinstance(plan, Mapping) or "nodes" not in plan:
        raise AnsibleFilterError("spark_serve_refusals: expected (spark_serve_profiles, spark_plan[, host facts])")
    order = [n["host"] for n in sorted(plan["nodes"], key=lambda n: n["rank"])]
    absent = [h for h in order if h not in profiles]
    if absent:
        raise AnsibleFilterError(f"spark_serve_refusals: no serving profile extracted for {', '.join(absent)}")
    head = profiles[order[0]]
    if head.get("profile") is None:
        reason = head.get("no_profile_reason")
        return [f"topology {plan['topology']} has no serving profile" + (f": {reason}" if reason else
                                                                          " (spark_serve_profile is null or not set)")]
    refusals = _drift_refusals(profiles, order)
    if refusals:
        return refusals
    refusals = _shape_refusals(head, plan)
    for host in order:
        refusals += _plan_refusals(host, head["profile"], head["requires"], profiles[host].get(HOST_PLAN))
    if host_facts is not None:
        for host in order:
            refusals += _host_refusals(host, head["profile"], head["requires"], host_facts.get(host))
    return refusals


def _fabric_refusals(host: str, probe: Mapping[str, Any], policy: str) -> list[str]:
    """kho=off on the command line and GID index N holding each planned address as RoCE v2: a peer reboot moves
    GIDs, and without kho=off ibv_reg_mr fails under memory pressure; NCCL then fails with "unhandled system
    error" minutes into the start. Under `available` a node without RDMA devices has neither to check."""
    try:
        optional = _POLICY.not_applicable(policy, host)
    except _POLICY.PolicyError as err:
        raise AnsibleFilterError(str(err)) from None
    gid = probe.get("gid") if isinstance(probe.get("gid"), Mapping) else {}
    if optional and not gid.get("rdma_class"):
        return []
    refusals = []
    kho_off = (probe.get("host") or {}).get("kho_off")
    if kho_off is not True:
        shown = "cannot be read" if kho_off is None else "is not on it"
        refusals.append(f"host {host}: kho=off {shown} (/proc/cmdline); RDMA memory registration needs it: "
                        "run playbooks/host.yml and reboot")
    if not gid.get("rdma_class"):
        refusals.append(f"host {host}: no /sys/class/infiniband (no RDMA device, is mlx5_ib loaded?); "
                        f"{_POLICY.NAME}={_POLICY.REQUIRE} serves only with the fabric's RDMA devices")
    elif gid.get("ok") is not True:
        refusals.append(f"host {host}: {gid.get('msg', 'GID check did not run')}; run playbooks/fabric.yml "
                        "(it re-applies the addresses and verifies the GIDs) before serving")
    return refusals


def spark_serve_fabric_refusals(probes: Mapping[str, Any], policies: Mapping[str, Any]) -> list[str]:
    """Every rank's fabric refusals ({host: spark_serve_probe result}, {host: spark_device_policy})."""
    if not isinstance(probes, Mapping) or not isinstance(policies, Mapping):
        raise AnsibleFilterError("spark_serve_fabric_refusals: expected ({host: probe}, {host: device policy})")
    out: list[str] = []
    for host in sorted(probes):
        probe = probes[host]
        if not isinstance(probe, Mapping):
            raise AnsibleFilterError(f"spark_serve_fabric_refusals: host {host}: no serve probe result")
        out += _fabric_refusals(str(host), probe, policies.get(host))
    return out


class FilterModule:
    """sparkfleet serving filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_serve_profiles": spark_serve_profiles,
            "spark_serve_spec": spark_serve_spec,
            "spark_serve_args": spark_serve_args,
            "spark_serve_refusals": spark_serve_refusals,
            "spark_serve_fabric_refusals": spark_serve_fabric_refusals,
        }
