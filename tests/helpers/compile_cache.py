"""Where the tests keep compiled XLA programs: one fresh directory per test run."""

import os
import shutil
import tempfile

_VARIABLE = "MOOZI_TEST_JAX_CACHE"
_created: str | None = None


def compilation_cache_dir() -> str:
    """MOOZI_TEST_JAX_CACHE if set, else a new temporary directory for this test run.

    The run's first process (pytest, or xdist's controller) makes the directory and puts it in the
    environment, so the xdist workers, Ray's role actors and `moozi` subprocesses it starts all share
    it: a program compiled by one test is loaded by every later one. Nothing outlives the run. A cache
    kept across runs (the one `moozi train` uses, ~/.cache/moozi/jax) once crashed CI: an xdist worker
    died with a segmentation fault inside XLA while loading a program an earlier run had stored, and the
    run never finished. Set MOOZI_TEST_JAX_CACHE=DIR to keep programs between runs on purpose.
    """
    global _created
    directory = os.environ.get(_VARIABLE)
    if not directory:
        directory = _created = tempfile.mkdtemp(prefix="moozi-test-jax-")
        os.environ[_VARIABLE] = directory
    return directory


def remove_created_directory() -> None:
    """Deletes the directory compilation_cache_dir made, if this process made one."""
    global _created
    if _created is not None:
        shutil.rmtree(_created, ignore_errors=True)
        os.environ.pop(_VARIABLE, None)
        _created = None
