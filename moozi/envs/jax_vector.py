"""A JAX-native game (pgx, gymnax) behind the host VectorEnv interface.

The training system's host path steps envs outside the acting program; for
JaxEnv games this adapter runs B copies with one jitted, vmapped step and
hands numpy arrays back, so every role works unchanged with them. (The
Anakin path, where env steps live inside the acting program, is separate.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from moozi.envs.base import JaxEnv, StepOutput


class JaxVectorEnv:
    def __init__(self, env: JaxEnv, num_envs: int, seed: int = 0):
        self.env = env
        self.spec = env.spec
        self.num_envs = num_envs
        self._key = jax.random.key(seed)
        self._init = jax.jit(jax.vmap(env.init))
        self._step = jax.jit(jax.vmap(env.step))
        self._state = None

    def _keys(self):
        self._key, sub = jax.random.split(self._key)
        return jax.random.split(sub, self.num_envs)

    def reset(self) -> StepOutput:
        self._state, out = self._init(self._keys())
        return jax.tree.map(np.asarray, out)

    def step(self, actions, is_last) -> StepOutput:
        actions = jnp.asarray(np.asarray(actions, np.int32))
        is_last = jnp.asarray(np.asarray(is_last, bool))
        self._state, out = self._step(self._state, actions, is_last, self._keys())
        return jax.tree.map(np.asarray, out)

    @property
    def state(self):
        """The batched env state (device arrays); AlphaZero's search starts from it."""
        return self._state

    def close(self) -> None:
        self._state = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
