#!/usr/bin/env python3
"""Write the router's hash-locked requirements: vllm-router at the pinned version and everything it needs, each
file pip may pick on a router host (Linux x86-64 and aarch64, CPython 3.11 to 3.13) hashed.

Run by a maintainer after a version bump (make router-lock); the role only reads the file. pip resolves each
platform and Python version on its own; one version per package across all of them is required, so every
router host runs the same code.

  tools/router_lock.py --version 0.1.17 --out <collection>/roles/router/files/vllm-router-0.1.17.txt
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ARCHES = ("x86_64", "aarch64")
PYTHONS = ("3.11", "3.12", "3.13")
# Newest first; pip takes a wheel tagged with any of these.
MANYLINUX = ("manylinux_2_28", "manylinux_2_17", "manylinux2014")


def resolve(version: str, arch: str, python: str) -> dict[str, tuple[str, str]]:
    """name -> (version, sha256 of the file pip picked) for one platform and Python version."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        platforms = [arg for tag in MANYLINUX for arg in ("--platform", f"{tag}_{arch}")]
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
                        "--only-binary=:all:", *platforms, "--python-version", python, "--implementation", "cp",
                        "--report", str(report), f"vllm-router=={version}"], check=True)
        found = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower().replace("_", "-"):
            (item["metadata"]["version"], item["download_info"]["archive_info"]["hashes"]["sha256"])
            for item in found}


def lock(version: str) -> str:
    versions: dict[str, set[str]] = {}
    hashes: dict[str, set[str]] = {}
    for arch in ARCHES:
        for python in PYTHONS:
            for name, (ver, digest) in resolve(version, arch, python).items():
                versions.setdefault(name, set()).add(ver)
                hashes.setdefault(name, set()).add(digest)
    split = {name: sorted(found) for name, found in versions.items() if len(found) > 1}
    if split:
        raise SystemExit(f"router_lock: packages resolve to different versions across platforms: {split}")
    lines = [f"# vllm-router {version} and its dependencies, hash-locked for Linux x86-64 and aarch64, CPython "
             f"{PYTHONS[0]}-{PYTHONS[-1]}.", "# Written by tools/router_lock.py; do not edit by hand."]
    for name in sorted(versions):
        ver = next(iter(versions[name]))
        lines.append(f"{name}=={ver} " + " ".join(f"--hash=sha256:{h}" for h in sorted(hashes[name])))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.write_text(lock(args.version))
    print(f"router_lock: wrote {args.out}")


if __name__ == "__main__":
    main()
