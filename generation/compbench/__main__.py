"""``python -m vidlab.generation.compbench ...`` = ``vidlab compbench ...``."""

import sys

from vidlab.errors import run_command
from vidlab.generation.compbench.cli import compbench_main

raise SystemExit(run_command("vidlab compbench", compbench_main, sys.argv[1:]))
