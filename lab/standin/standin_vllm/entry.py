"""Entry point: flags are checked before aiohttp is imported, so usage errors never depend on it."""
from __future__ import annotations

import sys
from typing import List, Optional

from .config import parse_cli


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_cli(list(sys.argv[1:] if argv is None else argv))
    try:
        from .cli import run
    except ImportError as exc:
        print(f"standin: {exc}; the stand-in needs aiohttp >= 3.8 (Debian: python3-aiohttp)", file=sys.stderr)
        return 1
    return run(args)
