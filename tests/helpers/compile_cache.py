"""Where the tests keep compiled XLA programs."""

import os

from moozi.cli import DEFAULT_COMPILATION_CACHE

# Read once, when the test session starts (conftest imports this first): some tests then set
# MOOZI_JAX_CACHE="" so that the `moozi` commands they call in-process leave JAX's settings alone.
_DIRECTORY = (os.environ.get("MOOZI_TEST_JAX_CACHE") or os.environ.get("MOOZI_JAX_CACHE")
              or DEFAULT_COMPILATION_CACHE)


def compilation_cache_dir() -> str:
    """MOOZI_TEST_JAX_CACHE if set, else the directory `moozi train` uses (MOOZI_JAX_CACHE, default
    ~/.cache/moozi/jax): a fresh clone on a machine that has run the tests, or moozi, before loads
    the programs compiled then instead of compiling them again (compiling is about half of a cold
    run). Time a cold run with MOOZI_TEST_JAX_CACHE=$(mktemp -d)."""
    return _DIRECTORY
