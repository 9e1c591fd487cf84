"""``python -m generation.compbench ...`` = ``vidlab compbench ...``."""

import sys

from generation.compbench.cli import compbench_main
from vidlab.errors import run_command

raise SystemExit(run_command("vidlab compbench", compbench_main, sys.argv[1:]))
