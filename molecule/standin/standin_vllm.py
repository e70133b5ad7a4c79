#!/usr/bin/env python3
"""Launcher of the stand-in vLLM server (a TEST DOUBLE): `standin_vllm.py serve MODEL [vLLM flags]`.

Runs with the standard library plus aiohttp >= 3.8 (Debian bookworm's python3-aiohttp is enough).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from standin_vllm.entry import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
