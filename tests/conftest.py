"""Test-session setup: a persistent JAX compilation cache shared by every test."""

import os
import pathlib


def pytest_configure(config):
    # Many tests build the same jitted programs (acting, train step) again in new
    # drivers and workers; JAX's persistent compilation cache lets every one
    # after the first load the compiled program instead of recompiling it.
    import jax

    cache_dir = pathlib.Path(__file__).resolve().parent.parent / ".jax_cache"
    settings = {
        "jax_compilation_cache_dir": str(cache_dir),
        "jax_persistent_cache_min_compile_time_secs": 0.5,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    for name, value in settings.items():
        jax.config.update(name, value)
        # Also for the processes the tests start (Ray's role actors, `moozi` subprocesses), which
        # read JAX's settings from the environment: each would otherwise compile its programs anew.
        os.environ.setdefault(name.upper(), str(value))
