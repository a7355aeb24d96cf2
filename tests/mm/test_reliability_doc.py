"""docs/reliability.md names tests that exist: every `tests/...py` it cites is a file,
and every `file.py::test_name` (parameters aside) a test function in it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?")


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_every_cited_test_exists() -> None:
    text = DOC.read_text()
    cited = CITED.findall(text)
    assert len(cited) >= 30, "the page cites its tests"
    for file, name in cited:
        path = ROOT / file
        assert path.is_file(), f"docs/reliability.md cites {file}, which does not exist"
        if name:
            assert name in _functions(path), (
                f"docs/reliability.md cites {file}::{name}: no such test"
            )
    # the short `test_x[...]` rows of the bad-input table are tests of test_bad_input_cli
    cli = _functions(ROOT / "tests" / "mm" / "test_bad_input_cli.py")
    for name in set(re.findall(r"`(test_\w+)(?:\[|`)", text)):
        known = cli | {n for f, _ in cited for n in _functions(ROOT / f)}
        assert name in known, f"docs/reliability.md names {name}, found in none of its test files"
    assert "FAULTS_1_3" not in text and "_CASES" not in text, "a placeholder is left"
