"""Helpers shared by the test suite (brokers, unique names, CLI subprocesses).

pytest puts tests/ on sys.path (for tests/conftest.py), and tests/mm/ (no
__init__.py) would then shadow the editable-installed `mm` package as a namespace
package. Importing this package first puts the repository root ahead of it, so
the real `mm` wins. (``pythonpath = ["."]`` in the pytest config would do the same.)
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
