"""`python3 -m standin_vllm serve MODEL [flags]`."""
import sys

from .entry import main

sys.exit(main())
