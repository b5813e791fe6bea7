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

    def reset(self, seed: int | None = None) -> StepOutput:
        """New episodes in every env; `seed` restarts the key stream (as a new JaxVectorEnv(seed) would)."""
        if seed is not None:
            self._key = jax.random.key(seed)
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


class JaxSingleEnv:
    """One copy of a JAX-native game behind the host `Env` interface (`reset(seed)`, `step(action,
    is_last)`), so a loaded agent plays and is evaluated on gymnax or pgx one episode at a time, as on
    any host env. Compiled once: each reset only reseeds."""

    def __init__(self, env: JaxEnv):
        self.env = env
        self.spec = env.spec
        self._vector = JaxVectorEnv(env, 1)

    def reset(self, seed: int | None = None) -> StepOutput:
        return _first(self._vector.reset(seed))

    def step(self, action, is_last) -> StepOutput:
        return _first(self._vector.step([action], [is_last]))

    @property
    def state(self):
        return jax.tree.map(lambda x: x[0], self._vector.state)

    def close(self) -> None:
        self._vector.close()


def _first(out: StepOutput) -> StepOutput:
    return StepOutput(*(x[0] for x in out))
