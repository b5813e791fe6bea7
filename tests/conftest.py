"""Test-session setup: no persistent compilation cache in the test processes (one of the run's own for
the processes they start), compiled programs released before a worker runs out of memory mappings, and
the longest tests first."""

import os
import shutil
import tempfile

import pytest

from tests.helpers.memory_maps import memory_map_limit, memory_maps, release_compiled_programs


# The compilation cache that the processes the tests start share (Ray's workers and cluster nodes,
# `moozi` subprocesses): one new directory per run, made by the first pytest process to configure
# (xdist's controller) and inherited by its workers.
SUBPROCESS_CACHE_VARIABLE = "MOOZI_TESTS_SUBPROCESS_JAX_CACHE"
_OWNED_CACHE = pytest.StashKey[str]()


def pytest_configure(config):
    # No compiled program is written to or read from disk by the test processes. A persistent cache
    # shared by the run's processes made the suite about 15% shorter here, but it is one more
    # mechanism inside XLA:CPU (serializing and loading executables) whose failures kill a worker,
    # and the segmentation faults CI saw happened inside it twice before one showed the cause
    # (tests/helpers/memory_maps.py). MOOZI_JAX_CACHE="" turns off the cache `moozi` keeps for a user
    # (moozi/cli.py), and JAX's own variables are cleared so that a cache configured in the caller's
    # shell is not used either.
    os.environ["MOOZI_JAX_CACHE"] = ""
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"):
        os.environ.pop(name, None)
    import jax

    jax.config.update("jax_compilation_cache_dir", None)
    # The processes the tests start do share one, read by JAX from its variable as they import it.
    # Each Ray test starts several actors (and the cluster tests whole nodes) that compile the same
    # tiny programs afresh, one Ray test after another; short-lived, they never come near the
    # memory-map limit that the crashes above reached in a long-lived worker.
    cache_dir = os.environ.get(SUBPROCESS_CACHE_VARIABLE)
    if not cache_dir:
        cache_dir = tempfile.mkdtemp(prefix="moozi-tests-jax-cache-")
        os.environ[SUBPROCESS_CACHE_VARIABLE] = cache_dir
        config.stash[_OWNED_CACHE] = cache_dir
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache_dir
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"  # as `moozi train` keeps its own


def pytest_unconfigure(config):
    owned = config.stash.get(_OWNED_CACHE, None)
    if owned is not None:
        shutil.rmtree(owned, ignore_errors=True)


_MAP_LIMIT = memory_map_limit()


@pytest.fixture(autouse=True)
def _release_compiled_programs_near_the_map_limit():
    # Once this process holds half the memory mappings Linux allows it, JAX's caches of compiled
    # programs are emptied: at the limit XLA crashes the worker (tests/helpers/memory_maps.py).
    yield
    if _MAP_LIMIT is not None and memory_maps() > _MAP_LIMIT // 2:
        release_compiled_programs()


def _start_order(item) -> int:
    # The longest tests start first, so that no worker is left with one of them while the others
    # idle at the end (longest-first is the classic heuristic for spreading jobs over machines): the
    # learning regressions (minutes of training each), then the Ray tests, which run one after
    # another on one worker (xdist_group "ray") and mostly wait on processes, then the other tests
    # marked slow, then the rest. Each worker holds up to three tests ahead (xdist's loadscope
    # scheduling), so the tests that end the run are quick ones, whatever their files' names.
    slow = item.get_closest_marker("slow") is not None
    if item.path.name == "test_learning.py" and slow:
        return 0
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args and group.args[0] == "ray":
        return 1
    return 2 if slow else 3


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_start_order)  # stable: the order within each class stays as collected
