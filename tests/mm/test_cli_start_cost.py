"""Every `mm` process builds the whole command line first (`mm --help`, each job's
start, each DR command): that must not import what only one command needs.

The drill's report imported matplotlib, and `mm drill`'s options imported the drill:
0.7 of the 1.1 CPU seconds of `mm mirror --help`, paid by every job and command.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# what only `mm drill` (its run and its report) or a backup needs
HEAVY = ("matplotlib", "mm.drill.run", "mm.drill.report", "pyarrow")


def test_building_the_command_line_imports_no_command_body() -> None:
    code = (
        "import sys\n"
        "from mm.cli import build_parser\n"
        "build_parser()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"building the parser imported {done.stdout.strip()}"


def test_the_drill_options_still_name_every_scenario() -> None:
    from mm.cli import build_parser
    from mm.drill.run import SCENARIOS

    help_text = build_parser().format_help()
    assert "drill" in help_text
    drill = subprocess.run(
        [sys.executable, "-m", "mm", "drill", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert drill.returncode == 0, drill.stderr
    assert f"in this order: {', '.join(SCENARIOS)}" in " ".join(drill.stdout.split())
