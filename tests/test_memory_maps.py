"""What tests/conftest.py's release of compiled programs relies on: cached XLA:CPU executables hold
memory mappings, and emptying JAX's caches gives them back."""

import pathlib

import jax
import jax.numpy as jnp
import pytest

from tests.helpers.memory_maps import memory_maps, release_compiled_programs

pytestmark = pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")


class _Scale:
    """A static argument: every new one is a new program, and the jit cache keeps it alive."""

    def __init__(self, k: float):
        self.k = k


def _scaled(scale: _Scale, x):
    return jnp.sin(x) * scale.k + jnp.cos(x)


_scaled_jit = jax.jit(_scaled, static_argnums=0)


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_cached_programs_hold_memory_maps_until_the_caches_are_emptied():
    release_compiled_programs()
    before = memory_maps()
    for k in range(100):
        _scaled_jit(_Scale(k), jnp.ones(3)).block_until_ready()
    held = memory_maps() - before
    assert held >= 200  # about three per executable
    release_compiled_programs()
    assert memory_maps() - before < held / 2
