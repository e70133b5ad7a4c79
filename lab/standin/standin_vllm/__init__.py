"""Stand-in vLLM server: a TEST DOUBLE for the lab, never a serving engine.

It speaks the slice of vLLM's OpenAI-compatible HTTP API and its multi-node launch that sparkfleet's
roles, readiness checks and bench client touch, with timing that follows a configured model exactly,
so tests know the truth they measure against. See README.md next to this package.
"""
from __future__ import annotations

VERSION = "0.0.0+standin"
