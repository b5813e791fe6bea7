"""Test-session setup: a JAX compilation cache shared by every test of the run."""

import os

from tests.helpers.compile_cache import compilation_cache_dir, remove_created_directory


def pytest_configure(config):
    # Many tests build the same jitted programs (acting, train step) again in new drivers and
    # workers; JAX's persistent compilation cache lets every one after the first load the compiled
    # program instead of recompiling it. The directory is new for each run (tests/helpers/compile_cache.py):
    # only programs this run compiled, on this machine with these libraries, are ever loaded.
    # Every program is kept, however fast it compiled: a test file makes hundreds of small ones (eager
    # ops, tiny networks) and loading them is faster than compiling them again (tests/core/test_loss.py
    # with test_planner.py: 79 s with only programs of 0.5 s or more kept, 51 s with all).
    import jax

    settings = {
        "jax_compilation_cache_dir": compilation_cache_dir(),
        "jax_persistent_cache_min_compile_time_secs": 0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    for name, value in settings.items():
        jax.config.update(name, value)
        # Also for the processes the tests start (Ray's role actors, `moozi` subprocesses), which
        # read JAX's settings from the environment: each would otherwise compile its programs anew.
        os.environ.setdefault(name.upper(), str(value))


def pytest_unconfigure(config):
    # Only the process that made the directory removes it: xdist's controller (or pytest with -n 0),
    # after every worker has finished.
    remove_created_directory()


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
