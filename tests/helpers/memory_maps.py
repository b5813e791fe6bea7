"""A process's memory mappings, and releasing the compiled programs that hold most of them in the tests.

Each XLA:CPU executable maps about three regions (code, constants, data) and keeps them while a
cache holds it. A jitted function at module level keeps one executable for every new static argument
or shape it meets (its cache holds the static argument too), so an xdist worker that runs ~500 tests
accumulates tens of thousands of mappings. At Linux's limit (vm.max_map_count, 65,530 by default)
the next mmap fails and XLA crashes the process with a segmentation fault wherever it was mapping
memory: CI saw it compiling (the Anakin self-play segment), serializing and loading programs, always
near the end of a run, and the xdist controller then hung until CI's time ran out.
"""

from __future__ import annotations

import gc
import pathlib


def memory_map_limit() -> int | None:
    """vm.max_map_count, or None where there is no such setting (not Linux)."""
    try:
        return int(pathlib.Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None


def memory_maps() -> int:
    """How many memory mappings this process holds."""
    with open("/proc/self/maps", "rb") as maps:
        return sum(1 for _ in maps)


def release_compiled_programs() -> None:
    """Frees every executable JAX's caches hold; programs still needed are compiled again."""
    import jax

    jax.clear_caches()
    gc.collect()
