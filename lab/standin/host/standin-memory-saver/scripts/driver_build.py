#!/usr/bin/env python3
"""Lab stand-in of the memory saver's build driver: build-dkms, check-install, clean.

Mirrors the reference's steps on the stand-in nvidia-uvm source so DKMS, patching, signing and the
pre-install guard run for real in the lab. Not the upstream project's code.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def fail(message: str) -> None:
    print(f"driver-build: {message}", file=sys.stderr)
    raise SystemExit(1)


def provenance() -> dict:
    return json.loads((HERE / "provenance.json").read_text())


def run(argv: list[str], **kwargs) -> str:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        fail(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def check_environment(kernel: str, headers: Path, prov: dict) -> None:
    # UTS_RELEASE is what vermagic carries; Debian's include/config/kernel.release holds the upstream version.
    release_file = headers / "include/generated/utsrelease.h"
    if not release_file.is_file() or f'"{kernel}"' not in release_file.read_text():
        fail(f"{release_file} does not name kernel {kernel}")
    status = run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", prov["source_package"]])
    if status.strip() != f"installed {prov['source_version']}":
        fail(f"{prov['source_package']} is '{status.strip()}', expected installed {prov['source_version']}")
    for rel, digest in prov["patches"].items():
        actual = hashlib.sha256((HERE / rel).read_bytes()).hexdigest()
        if actual != digest:
            fail(f"{rel} sha256 {actual} differs from provenance {digest}")


def build(kernel: str, headers: Path) -> None:
    prov = provenance()
    check_environment(kernel, headers, prov)
    work = HERE / prov["workspace"]
    if work.is_symlink() or any(p.is_symlink() for p in work.parents if p != HERE and HERE in p.parents):
        fail(f"refusing a symlinked workspace {work}")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(prov["source_tree"], work)
    for rel in prov["patches"]:
        run(["patch", "-p1", "--fuzz=0", "--batch", "-i", str(HERE / rel)], cwd=work)
    run(["make", "-C", str(headers), f"M={work / 'nvidia-uvm'}", "modules"])
    built = work / "nvidia-uvm" / "nvidia-uvm.ko"
    version = run(["modinfo", "-F", "version", str(built)]).strip()
    vermagic = run(["modinfo", "-F", "vermagic", str(built)]).split()
    if version != prov["driver"] or not vermagic or vermagic[0] != kernel:
        fail(f"built module has version {version!r} and vermagic {vermagic[:1]}, expected {prov['driver']} / {kernel}")
    shutil.copy2(built, work / "nvidia-uvm.ko")
    receipt = {
        "schema": 1, "kernel": kernel, "driver": prov["driver"], "default_on": True,
        "module_sha256": hashlib.sha256(built.read_bytes()).hexdigest(), "signed": False,
        "profile": "64k", "package_version": prov["package_version"], "standin": True,
    }
    (work / "build.json").write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"driver-build: built {work / 'nvidia-uvm.ko'} for {kernel}")


def check_install(kernel: str, headers: Path) -> None:
    prov = provenance()
    check_environment(kernel, headers, prov)
    for line in run(["dkms", "status"]).splitlines():
        if line.startswith(("nvidia/", "nvidia-")):
            fail(f"a competing NVIDIA DKMS package is registered: {line}")
    found = subprocess.run(["modinfo", "-k", kernel, "-F", "filename", "nvidia_uvm"],
                           check=False, capture_output=True, text=True)
    path = found.stdout.strip()
    if found.returncode == 0 and "/updates/" in path and "/updates/dkms/" not in path:
        fail(f"another nvidia_uvm override is installed: {path}")
    print(f"driver-build: install checks passed for {kernel}")


def clean() -> None:
    shutil.rmtree(HERE / ".work", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="driver-build")
    parser.add_argument("action", choices=["build-dkms", "check-install", "clean"])
    parser.add_argument("--kernel")
    parser.add_argument("--headers", type=Path)
    args = parser.parse_args()
    if args.action == "clean":
        clean()
        return
    if not args.kernel or not args.headers:
        fail(f"{args.action} needs --kernel and --headers")
    os.chdir(HERE)
    (build if args.action == "build-dkms" else check_install)(args.kernel, args.headers)


if __name__ == "__main__":
    main()
