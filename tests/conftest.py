"""Makes helper modules in tests/ (e.g. `conformance`) importable from every test file."""

import pathlib
import sys

_TESTS_DIR = str(pathlib.Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
