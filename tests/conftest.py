"""Test-session setup: no persistent compilation cache, and the longest tests first."""

import os


def pytest_configure(config):
    # No compiled program is written to or read from disk during the tests. JAX's persistent
    # compilation cache made the suite faster (each new driver loads the programs an earlier test
    # compiled), but XLA:CPU crashed the process with a segmentation fault, now and then, both while
    # loading a stored program and while serializing a new one (`executable.serialize()`); the xdist
    # worker died and the run hung at its end. A suite that passes every time is worth more than the
    # minutes the cache saved. `moozi` subprocesses started by the tests inherit this setting
    # (MOOZI_JAX_CACHE="" turns off the CLI's cache, moozi/cli.py), and JAX's own variables are
    # cleared so that a cache configured in the caller's shell is not used either.
    os.environ["MOOZI_JAX_CACHE"] = ""
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"):
        os.environ.pop(name, None)
    import jax

    jax.config.update("jax_compilation_cache_dir", None)


def _start_order(item) -> int:
    # The longest tests start first, so that no worker is left with one of them while the others
    # idle at the end: the learning regressions (minutes of training each), then the Ray tests,
    # which run one after another on one worker (xdist_group "ray") and mostly wait on processes.
    if item.path.name == "test_learning.py" and item.get_closest_marker("slow"):
        return 0
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args and group.args[0] == "ray":
        return 1
    return 2


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_start_order)  # stable: the order within each class stays as collected
