"""validate.yml and render.yml run for real against shipped, test-only and broken inventories."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from reference_tables import PAIR, RING, TRIANGLE

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks",
           ANSIBLE_STDOUT_CALLBACK="default")


def play(inventory: Path, playbook: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLAYBOOK), "-i", str(inventory), str(ROOT / "playbooks" / playbook), *extra],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=180)


def render(inventory: Path, out: Path) -> dict[str, Any]:
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((out / "plan.json").read_text())


def rows(plan: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(n["host"], n["rank"], i["netdev"], i["rdma"], i["peer_host"], i["address"])
            for n in plan["nodes"] for i in n["interfaces"]]


def env_file(path: Path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


@pytest.mark.parametrize("name,expected", [("tp3-triangle", TRIANGLE), ("tp4-ring", RING), ("tp2-pair", PAIR)])
def test_shipped_inventory_renders_the_reference_plan(tmp_path: Path, name: str, expected: list[Any]) -> None:
    out = tmp_path / "render"
    plan = render(ROOT / "inventories" / name, out)
    assert rows(plan) == expected
    hosts = [n["host"] for n in plan["nodes"]]
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    per_node = ("netplan.yaml", "nccl.env") + (("serve.json",) if name != "tp2-pair" else ())
    assert written == sorted(["plan.json"] + [f"{h}/{f}" for h in hosts for f in per_node])
    for node in plan["nodes"]:
        netplan_path = out / node["host"] / "netplan.yaml"
        assert stat.S_IMODE(netplan_path.stat().st_mode) == 0o600
        doc = yaml.safe_load(netplan_path.read_text())
        eth = doc["network"]["ethernets"]
        assert doc["network"]["version"] == 2
        assert "enP7s7" not in eth
        assert {k: v["addresses"] for k, v in eth.items()} == {i["netdev"]: [i["address"]] for i in node["interfaces"]}
        for settings in eth.values():
            assert settings["mtu"] == 9000
            assert settings["dhcp4"] is False and settings["dhcp6"] is False
            assert settings["accept-ra"] is False and settings["link-local"] == []
            # The shipped inventories keep DGX OS's NetworkManager renderer: IPv6 off through its keyfile too.
            assert settings["networkmanager"]["passthrough"] == {"ipv6.method": "disabled"}
        env = env_file(out / node["host"] / "nccl.env")
        assert env["NCCL_IB_HCA"] == "=" + ",".join(sorted(i["rdma"] for i in node["interfaces"]))
        assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "enP7s7"
        assert env["VLLM_HOST_IP"] == node["mgmt_address"]


def test_ring_env_is_the_tp4_profile(tmp_path: Path) -> None:
    render(ROOT / "inventories" / "tp4-ring", tmp_path)
    env = env_file(tmp_path / "dgx2" / "nccl.env")
    assert env["NCCL_ALGO"] == "Ring" and env["NCCL_SWITCHLESS_BIDIRECTIONAL"] == "2"
    assert env["NCCL_THREAD_THRESHOLDS"] == "-2 -2 -2 1 1 1"
    assert json.loads(env["SPARKNET_ROCE_PEER_HCAS"]) == {"2": ["rocep1s0f0", "roceP2p1s0f0"],
                                                          "0": ["rocep1s0f1", "roceP2p1s0f1"]}


def test_host_vars_inventory(tmp_path: Path) -> None:
    plan = render(ROOT / "tests" / "inventories" / "ring5-hostvars", tmp_path)
    assert plan["topology"] == "ring"
    first = plan["nodes"][0]
    assert (first["host"], first["node_id"], first["mgmt_address"], first["mgmt_interface"]) == (
        "spark-a", 2, "172.30.0.10", "eno1")
    # The closing cable joins rank 4 (node 9) and rank 0 (node 2): subnet 172.29.1.0/24.
    assert first["interfaces"][2]["address"] == "172.29.1.2/24"
    doc = yaml.safe_load((tmp_path / "spark-a" / "netplan.yaml").read_text())
    assert doc["network"]["renderer"] == "networkd"
    env = env_file(tmp_path / "spark-c" / "nccl.env")
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_ALGO"] == "Ring"
    assert not [k for k in env if k.startswith("SPARKNET_")]


def test_inline_inventory_with_custom_ports(tmp_path: Path) -> None:
    plan = render(ROOT / "tests" / "inventories" / "triangle-inline", tmp_path)
    assert [n["host"] for n in plan["nodes"]] == ["node-a", "node-b", "node-c"]
    node_c = plan["nodes"][2]
    assert [(i["netdev"], i["rdma"], i["address"]) for i in node_c["interfaces"]] == [
        ("cx0a", "mlx5_0", "11.13.1.3/24"), ("cx0b", "mlx5_1", "11.13.2.3/24"),
        ("cx1a", "mlx5_2", "11.23.1.3/24"), ("cx1b", "mlx5_3", "11.23.2.3/24")]
    env = env_file(tmp_path / "node-c" / "nccl.env")
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3"
    assert env["NCCL_IB_GID_INDEX"] == "5"


def write_inventory(path: Path, hosts: dict[str, dict[str, Any]], group: dict[str, Any]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts, "vars": group}}))
    return path


def triangle_hosts() -> dict[str, dict[str, Any]]:
    return {f"n{r}": {"ansible_host": f"10.1.0.{r + 1}", "spark_rank": r} for r in range(3)}


@pytest.mark.parametrize("change,message", [
    (lambda h, g: g.update(spark_topology="star"), "host n0: spark_topology must be one of pair, triangle, ring"),
    (lambda h, g: g.update(spark_topology="ring"), "spark_topology ring needs 4-9 hosts in group spark, found 3"),
    (lambda h, g: h["n2"].update(spark_rank=0), "hosts n0, n2: spark_rank 0 is duplicated"),
    (lambda h, g: h["n1"].update(spark_rank="one"), "host n1: spark_rank must be an integer"),
    (lambda h, g: h["n1"].update(spark_node_id=12), "host n1: spark_node_id must be within 1-9, got 12"),
    (lambda h, g: h["n2"].update(ansible_host="10.1.0.1"), "hosts n0, n2: spark_mgmt_address 10.1.0.1 is duplicated"),
    (lambda h, g: g.update(spark_fabric_prefix=256), "host n0: spark_fabric_prefix must be a first octet"),
    (lambda h, g: g.update(spark_fabric_ports=[{"port": 0, "paths": []}]), "host n0: spark_fabric_ports port 0 must define paths 1 and 2"),
    (lambda h, g: g.update(spark_nccl_overrides={"NCCL_DEBUG": "INFO\nLD_PRELOAD=/x.so"}),
     "host n0: spark_nccl_overrides.NCCL_DEBUG must not contain a newline, '=' or a control character"),
])
def test_validate_refuses_bad_inventories(tmp_path: Path, change: Any, message: str) -> None:
    hosts, group = triangle_hosts(), {"spark_topology": "triangle"}
    change(hosts, group)
    inventory = write_inventory(tmp_path / "inv", hosts, group)
    result = play(inventory, "validate.yml")
    assert result.returncode != 0
    assert message in result.stdout, result.stdout
    out = tmp_path / "out"
    assert play(inventory, "render.yml", "-e", f"spark_render_dir={out}").returncode != 0
    assert not out.exists(), "render must write nothing for an invalid inventory"


def earlier_render(out: Path, hosts: list[str], with_serve: bool) -> None:
    """Files as an earlier render of other hosts left them (a render takes long on a shared machine)."""
    (out / "plan.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text("{}\n")
    for host in hosts:
        (out / host).mkdir(exist_ok=True)
        for name in ("netplan.yaml", "nccl.env") + (("serve.json",) if with_serve else ()):
            (out / host / name).write_text(f"earlier {host} {name}\n")


def test_a_refused_inventory_leaves_an_earlier_render_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    earlier_render(out, ["n0", "n1", "n2"], True)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    hosts, group = triangle_hosts(), {"spark_topology": "triangle", "spark_serve_guard_steady_interval": 60}
    result = play(write_inventory(tmp_path / "inv", hosts, group), "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode != 0
    assert "host n0: spark_serve_guard_steady_interval must be at most 5 seconds, got 60" in result.stdout, result.stdout
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("content", ["---\n", "---\nspark:\n  hosts: {}\n"], ids=["empty", "no-hosts"])
def test_an_inventory_without_nodes_is_one_clear_line(tmp_path: Path, content: str) -> None:
    (tmp_path / "hosts.yml").write_text(content)
    result = play(tmp_path, "validate.yml")
    assert result.returncode != 0
    assert "- group spark has no hosts: the inventory defines no cluster node" in result.stdout, result.stdout
    assert "Error while resolving" not in result.stdout and "object has no element" not in result.stdout


def test_render_removes_the_files_of_an_earlier_render(tmp_path: Path) -> None:
    earlier_render(tmp_path, ["dgx1", "dgx2", "dgx3"], True)
    (tmp_path / "notes.txt").write_text("kept: render only removes the files it writes\n")
    plan = render(ROOT / "inventories" / "tp2-pair", tmp_path)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    hosts = [n["host"] for n in plan["nodes"]]
    assert written == sorted(["notes.txt", "plan.json"] + [f"{h}/{f}" for h in hosts for f in ("netplan.yaml", "nccl.env")])


def test_render_requires_an_output_directory() -> None:
    result = play(ROOT / "inventories" / "tp3-triangle", "render.yml")
    assert result.returncode != 0
    assert "Set the output directory: -e spark_render_dir=DIR" in result.stdout


def test_validate_passes_every_shipped_inventory() -> None:
    for inventory in sorted((ROOT / "inventories").iterdir()):
        result = play(inventory, "validate.yml")
        assert result.returncode == 0, f"{inventory.name}: {result.stdout}"
        assert "Inventory valid" in result.stdout


# --- serving specs ----------------------------------------------------------------------------

def serve_specs(out: Path, hosts: list[str]) -> dict[str, dict[str, Any]]:
    return {h: json.loads((out / h / "serve.json").read_text()) for h in hosts}


@pytest.mark.parametrize("name,size,image", [("tp3-triangle", 3, "vllm-ds41f-kkref:04c30fa98e79-r6"),
                                             ("tp4-ring", 4, "vllm-ds41f-kkref:19f2c20ed4d6-r6d")])
def test_serve_json_is_what_each_rank_launches(tmp_path: Path, name: str, size: int, image: str) -> None:
    plan = render(ROOT / "inventories" / name, tmp_path)
    head = plan["nodes"][0]
    specs = serve_specs(tmp_path, [n["host"] for n in plan["nodes"]])
    engine_args = set()
    for node in plan["nodes"]:
        spec = specs[node["host"]]
        assert set(spec) == {"name", "image", "command", "env", "run"}
        assert (spec["name"], spec["image"]) == ("dsv41-karmic-kraken", image)
        command = spec["command"]
        tail = ["--node-rank", str(node["rank"]), "--master-addr", head["mgmt_address"], "--master-port", "9999"]
        if node["rank"] == 0:
            assert command[-6:] == tail and "--headless" not in command
        else:
            assert command[-7:] == tail + ["--headless"]
        engine_args.add(json.dumps(command[:-7 if node["rank"] else -6]))
        assert command[0] == "/models"
        assert command[command.index("--tensor-parallel-size") + 1] == command[command.index("--nnodes") + 1] == str(size)
        assert json.loads(command[command.index("--speculative-config") + 1])["draft_tensor_parallel_size"] == size
        # The rank's environment carries its collective environment unchanged.
        collective = env_file(tmp_path / node["host"] / "nccl.env")
        assert {k: spec["env"][k] for k in collective} == collective
        assert spec["env"]["VLLM_HOST_IP"] == node["mgmt_address"] and spec["env"]["HF_HUB_OFFLINE"] == "1"
        run = spec["run"]
        assert (run["network_mode"], run["ipc_mode"], run["shm_size"]) == ("host", "host", "16g")
        assert "memlock:-1:-1" in run["ulimits"] and run["devices"] == ["/dev/infiniband:/dev/infiniband:rwm"]
        assert [v.split(":")[1:] for v in run["volumes"]] == [["/models", "ro"], ["/cache", "rw"]]
    assert len(engine_args) == 1, "every rank must launch the same engine arguments"


@pytest.mark.parametrize("name", ["tp3-triangle", "tp4-ring", "switched8"])
def test_every_file_is_rendered_from_what_plan_json_holds(tmp_path: Path, name: str) -> None:
    """plan.json holds per node its interfaces, collective environment and serve spec; the files say the same."""
    inventories = ROOT / ("tests/inventories" if name == "switched8" else "inventories")
    plan = render(inventories / name, tmp_path)
    assert plan["group"] == "spark"
    for node in plan["nodes"]:
        host = node["host"]
        eth = yaml.safe_load((tmp_path / host / "netplan.yaml").read_text())["network"]
        assert eth["renderer"] == node["netplan_renderer"]
        assert {k: v["addresses"] for k, v in eth["ethernets"].items()} == {
            i["netdev"]: [i["address"]] for i in node["interfaces"]}
        env_path = tmp_path / host / "nccl.env"
        assert env_file(env_path) == node["nccl"]["env"]
        assert f"(profile {node['nccl']['profile']})" in env_path.read_text().splitlines()[0]
        assert node["nccl"]["env"]["NCCL_IB_GID_INDEX"] == str(node["gid_index"])
        if plan["serve"]["refusals"]:
            assert not (tmp_path / host / "serve.json").exists()
        else:
            assert json.loads((tmp_path / host / "serve.json").read_text()) == plan["serve"]["specs"][host]


def test_pair_renders_no_serve_json_and_says_why(tmp_path: Path) -> None:
    result = play(ROOT / "inventories" / "tp2-pair", "render.yml", "-e", f"spark_render_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not list(tmp_path.rglob("serve.json"))
    said = " ".join(result.stdout.split())  # the YAML result format folds long messages
    assert "No serve.json rendered; serve would refuse:" in said
    assert "topology pair has no serving profile: DeepSeek V4.1 Flash does not fit in two DGX Sparks" in said


# --- serving profiles by name ----------------------------------------------------------------------

@pytest.mark.parametrize("topology,count,group,expected", [
    ("triangle", 3, {"spark_serve_profile": "tp3-r6-4k"},
     {"--max-model-len": "262144", "--kv-cache-memory-bytes": "2362232012", "--attention-backend": "TILELANG",
      "image": "vllm-ds41f-kkref:04c30fa98e79-r6", "VLLM_DS41_KERNEL_BACKEND": "tilelang"}),
    ("ring", 4, {"spark_serve_profile": "tp4-r6", "spark_serve_overrides": {"kernel_backend": "b12x"}},
     {"--max-model-len": "1048576", "--long-prefill-token-threshold": "8192", "--attention-backend": "B12X",
      "--moe-backend": "b12x", "image": "vllm-ds41f-kkref:04c30fa98e79-r6", "VLLM_DS41_KERNEL_BACKEND": "b12x"}),
], ids=["tp3-r6-4k", "tp4-r6-b12x"])
def test_a_named_profile_renders(tmp_path: Path, topology: str, count: int, group: dict[str, Any],
                                 expected: dict[str, str]) -> None:
    hosts = {f"n{r}": {"ansible_host": f"10.1.0.{r + 1}", "spark_rank": r} for r in range(count)}
    inventory = write_inventory(tmp_path / "inv", hosts, {"spark_topology": topology, **group})
    render(inventory, tmp_path / "out")
    for host in hosts:
        spec = json.loads((tmp_path / "out" / host / "serve.json").read_text())
        command = spec["command"]
        for key, value in expected.items():
            found = spec["image"] if key == "image" else spec["env"].get(key) if key.isupper() else \
                command[command.index(key) + 1]
            assert found == value, (host, key)


def test_a_64k_profile_on_a_4k_host_plan_renders_no_serve_json(tmp_path: Path) -> None:
    group = {"spark_topology": "triangle", "spark_kernel_candidate_release": "7.0.0-1019-nvidia"}
    inventory = write_inventory(tmp_path / "inv", triangle_hosts(), group)
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={tmp_path / 'out'}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not list((tmp_path / "out").rglob("serve.json"))
    said = " ".join(result.stdout.split())
    assert ("host n0: profile tp3-r6-64k requires the 64k kernel, the planned kernel (spark_kernel_candidate_release "
            "7.0.0-1019-nvidia) is the 4k flavour") in said


# --- the switched fabric -----------------------------------------------------------------------------

def switched_hosts(count: int) -> dict[str, dict[str, Any]]:
    return {f"sw{r + 1}": {"ansible_host": f"10.2.0.{r + 1}", "spark_rank": r} for r in range(count)}


def assert_switched_render(out: Path, plan: dict[str, Any], count: int, profile: str) -> None:
    """Every node on every rail with its node id as host octet, the unconfirmed rule said in each netplan."""
    assert plan["topology"] == "switched" and len(plan["nodes"]) == count
    assert [r["subnet"] for r in plan["rails"]] == ["10.100.1.0/24", "10.100.2.0/24", "10.101.1.0/24", "10.101.2.0/24"]
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted(["plan.json"] + [f"{n['host']}/{f}" for n in plan["nodes"] for f in ("netplan.yaml", "nccl.env")])
    for node in plan["nodes"]:
        n = node["node_id"]
        text = (out / node["host"] / "netplan.yaml").read_text()
        assert f"the host octet is the node id\n# ({n}). That host-octet rule is the reference's example and UNCONFIRMED" in text
        eth = yaml.safe_load(text)["network"]["ethernets"]
        assert {k: v["addresses"] for k, v in eth.items()} == {
            "enp1s0f0np0": [f"10.100.1.{n}/24"], "enP2p1s0f0np0": [f"10.100.2.{n}/24"],
            "enp1s0f1np1": [f"10.101.1.{n}/24"], "enP2p1s0f1np1": [f"10.101.2.{n}/24"]}
        assert {v["mtu"] for v in eth.values()} == {9000}
        assert eth["enP2p1s0f1np1"]["networkmanager"]["name"] == f"cx7 {node['host']} switch port1 path2"
        env_path = out / node["host"] / "nccl.env"
        assert env_path.read_text().startswith(f"# sparkfleet: collective environment of {node['host']} (profile {profile}).\n")
        env = env_file(env_path)
        assert env["NCCL_IB_HCA"] == "=roceP2p1s0f0,roceP2p1s0f1,rocep1s0f0,rocep1s0f1"
        assert (env["NCCL_IB_TC"], env["NCCL_MAX_NCHANNELS"], env["NCCL_PROTO"]) == ("106", "8", "^LL128")
        assert env["VLLM_HOST_IP"] == node["mgmt_address"] and "SPARKNET_ROCE_PEER_HCAS" not in env
        if profile == "switched":
            assert (env["SPARKNET_ROCE_HCA"], env["SPARKNET_ROCE_TOPOLOGY"], env["SPARKNET_ROCE_TRAFFIC_CLASS"]) == (
                "rocep1s0f0,roceP2p1s0f0", "direct", "106")
        else:
            assert not [k for k in env if k.startswith("SPARKNET_")]


def test_switched_pair_renders_the_nccl_only_control(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv", switched_hosts(2),
                                {"spark_topology": "switched", "spark_nccl_profile": "switched-nccl-only"})
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={tmp_path / 'out'}")
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert_switched_render(tmp_path / "out", plan, 2, "switched-nccl-only")
    said = " ".join(result.stdout.split())
    assert "topology switched has no serving profile: no serving profile is measured on a switch yet" in said


def test_switched_eight_node_inventory_renders(tmp_path: Path) -> None:
    plan = render(ROOT / "tests" / "inventories" / "switched8", tmp_path)
    assert_switched_render(tmp_path, plan, 8, "switched")
    assert [n["node_id"] for n in plan["nodes"]] == [1, 2, 3, 4, 5, 6, 7, 200]
    assert env_file(tmp_path / "spark-h" / "nccl.env")["NCCL_DEBUG"] == "INFO"


# The profile/topology refusals are unit-tested (tests/unit/test_switched_plan.py); one playbook run shows a
# switched refusal stops render before it writes.
@pytest.mark.parametrize("count,group,message", [
    (17, {"spark_topology": "switched"}, "spark_topology switched needs 2-16 hosts in group spark, found 17"),
], ids=["seventeen"])
def test_validate_refuses_a_bad_switched_inventory(tmp_path: Path, count: int, group: dict[str, Any], message: str) -> None:
    inventory = write_inventory(tmp_path / "inv", switched_hosts(count), group)
    out = tmp_path / "out"
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode != 0
    assert message in result.stdout, result.stdout
    assert not out.exists(), "render must write nothing for an invalid inventory"


# --- a serving override that holds a secret -------------------------------------------------------------

def test_a_secret_in_the_serving_overrides_stays_out_of_the_output_and_serve_json_is_private(tmp_path: Path) -> None:
    secret = "sk-render-" + os.urandom(12).hex()
    hosts = triangle_hosts()
    group = {"spark_topology": "triangle", "spark_serve_overrides": {"args": {"--api-key": secret}}}
    inventory = write_inventory(tmp_path / "inv", hosts, group)
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={tmp_path / 'out'}", "-v", "--diff")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert secret not in result.stdout + result.stderr
    for host in hosts:
        path = tmp_path / "out" / host / "serve.json"
        spec = json.loads(path.read_text())
        assert spec["command"][spec["command"].index("--api-key") + 1] == secret  # what serve will launch
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # plan.json holds the same specs.
    assert stat.S_IMODE((tmp_path / "out" / "plan.json").stat().st_mode) == 0o600


def test_a_refused_serving_setting_is_shown_with_the_secrets_redacted(tmp_path: Path) -> None:
    """The refusal is not hidden to protect a secret: it names host and setting, and a value the site marks
    secret (spark_site_secrets) reads <redacted> wherever it appears, the refused value included."""
    secret = "sk-render-" + os.urandom(12).hex()
    group = {"spark_topology": "triangle", "spark_serve_profile": secret, "spark_site_secrets": [secret],
             "spark_serve_overrides": {"args": {"--api-key": secret}}}
    out = tmp_path / "out"
    result = play(write_inventory(tmp_path / "inv", triangle_hosts(), group), "render.yml",
                  "-e", f"spark_render_dir={out}", "-v")
    assert result.returncode != 0
    assert "host n0: spark_serve_profile '<redacted>' is not a serving profile" in result.stdout + result.stderr
    assert secret not in result.stdout + result.stderr
    assert not out.exists(), "a refused render writes nothing"
