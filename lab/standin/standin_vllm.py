#!/usr/bin/env python3
"""Launcher of the stand-in vLLM server (a TEST DOUBLE): `standin_vllm.py serve MODEL [vLLM flags]`.

Runs with the standard library plus aiohttp >= 3.8 (Debian bookworm's python3-aiohttp is enough).
"""
import sys

# Run as a script, Python puts this file's (symlink-resolved) directory first on the path: the package beside it.
from standin_vllm.entry import main

if __name__ == "__main__":
    sys.exit(main())
