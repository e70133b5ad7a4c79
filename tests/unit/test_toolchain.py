"""requirements.yml documents exactly the collection versions the pinned ansible bundle installs."""
from __future__ import annotations

import configparser
import json
import re
import subprocess

import yaml

from testlib import COLLECTION, ROOT


def test_requirements_yml_matches_the_bundled_collections() -> None:
    listed = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-galaxy"), "collection", "list", "--format", "yaml"],
                            capture_output=True, text=True, check=True).stdout
    installed: dict[str, str] = {}
    for collections in yaml.safe_load(listed).values():
        for name, info in collections.items():
            installed.setdefault(name, info["version"])
    wanted = yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]
    assert wanted, "requirements.yml lists no collections"
    for entry in wanted:
        assert installed.get(entry["name"]) == entry["version"], entry


def _ini_keys(entries: list[dict[str, str]] | None) -> set[tuple[str, str]]:
    return {(entry.get("section", "defaults"), entry["key"]) for entry in entries or []}


def _plugin_ini_keys(kind: str, name: str) -> set[tuple[str, str]]:
    doc = json.loads(subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-doc"), "--json", "-t", kind, name],
                                    capture_output=True, text=True, check=True).stdout)
    return {key for option in doc[name]["doc"]["options"].values() for key in _ini_keys(option.get("ini"))}


def test_every_ansible_cfg_key_is_one_ansible_reads() -> None:
    """ansible-core ignores unknown keys silently (`result_format` looked right and did nothing)."""
    from ansible.config.manager import ConfigManager

    known = {key for definition in ConfigManager().get_configuration_definitions().values()
             for key in _ini_keys(definition.get("ini"))}
    known |= _plugin_ini_keys("callback", "ansible.builtin.default") | _plugin_ini_keys("connection", "ansible.builtin.ssh")
    config = configparser.ConfigParser()
    config.read(ROOT / "ansible.cfg")
    assert [(s, k) for s in config.sections() for k in config[s] if (s, k) not in known] == []
    assert config["defaults"]["callback_result_format"] == "yaml"


def test_requirements_yml_lists_every_collection_the_project_calls() -> None:
    """A module, filter or lookup called by its full name needs its collection listed (community.crypto was not)."""
    files = [ROOT / "site.yml", ROOT / "ansible.cfg", *ROOT.glob("playbooks/**/*.yml"), *COLLECTION.glob("roles/*/*/*.yml")]
    fqcn = re.compile(r"\b([a-z_]+\.[a-z_]+)\.[a-z_]+\b")
    used = {m for path in files for m in fqcn.findall(path.read_text())}
    listed = {entry["name"] for entry in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    namespaces = {name.split(".")[0] for name in listed} | {"ansible"}
    called = {name for name in used if name.split(".")[0] in namespaces and name != "ansible.builtin"}
    assert sorted(called - listed) == []
    assert "community.crypto" in called
