"""python -m sparkfleet_bench: the bench CLI (the sparkfleet-bench command)."""
import sys

from .cli import main

sys.exit(main())
