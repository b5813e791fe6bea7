"""What an actor-critic run holds between iterations, whichever loop steps its envs: the learner's
`ActorCriticTrainState`, the parameters the next rollout acts with, the run's key and its counters; and how that
state becomes a checkpoint's pytree and arrays and comes back, bit for bit (exact resume)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from moozi.actor_critic.learner import Learner
from moozi.actor_critic.networks import ActorCriticTrainState, example_obs


class TrainerState:
    """The base of `AnakinTrainer` (anakin_loop.py) and `HostTrainer` (moozi/training/actor_critic_host_loop.py),
    which add the envs and their `iteration`. A checkpoint's arrays (`state_arrays`) are the key, the counters and
    the envs' state as a pytree, which a trainer that holds its envs gives through `environment_state` and takes
    back through `set_environment_state` (`AnakinTrainer`: its rollout carry). `HostTrainer`'s envs live in its
    rollout workers, so it overrides `state_arrays` and `load_state_arrays` and leaves these two hooks unused."""

    def __init__(self, learner: Learner, obs_shape: tuple[int, ...], seed: int):
        self.learner = learner
        self.network = learner.network
        self.num_envs = learner.num_envs
        self.rollout_steps = learner.rollout_steps
        self.updates_per_rollout = learner.updates_per_rollout
        init_key, self.carry_key, self._key = jax.random.split(jax.random.PRNGKey(seed), 3)
        params = learner.network.init(init_key, example_obs(obs_shape))
        self.state = ActorCriticTrainState(params, learner.optimizer.init(params))
        self.acting_params = params
        self.env_steps = 0
        self.updates = 0

    def count_iteration(self, metrics) -> dict[str, float]:
        self.env_steps += self.num_envs * self.rollout_steps
        self.updates += self.updates_per_rollout
        out = {k: float(v) for k, v in jax.device_get(metrics).items()}
        out.update(env_steps=self.env_steps, updates=self.updates)
        return out

    # --- checkpoints ---------------------------------------------------------------------
    def learner_tree(self) -> dict:
        """The parameters and optimizer state: a checkpoint's `train_state` (msgpack)."""
        return {"train": self.state, "acting_params": self.acting_params}

    def set_learner_tree(self, tree: dict) -> None:
        self.state = ActorCriticTrainState(*tree["train"])
        self.acting_params = tree["acting_params"]

    def environment_state(self) -> Any:
        """The envs' state as a pytree of arrays, saved by `state_arrays` (a trainer that holds its envs)."""
        raise NotImplementedError

    def set_environment_state(self, state: Any) -> None:
        """Puts back a state `environment_state` gave, read by `load_state_arrays`."""
        raise NotImplementedError

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The key, the counters and the envs' state as named arrays (a checkpoint's npz)."""
        arrays = {"key": np.asarray(jax.device_get(self._key)),
                  "counters": np.asarray([self.env_steps, self.updates], np.int64)}
        for i, leaf in enumerate(jax.tree.leaves(self.environment_state())):
            arrays[f"env/{i:04d}"] = np.asarray(jax.device_get(leaf))
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self._key = jax.numpy.asarray(arrays["key"])
        self.env_steps, self.updates = (int(x) for x in arrays["counters"])
        template = self.environment_state()
        leaves, treedef = jax.tree.flatten(template)
        saved = [arrays[f"env/{i:04d}"] for i in range(len(leaves)) if f"env/{i:04d}" in arrays]
        if len(saved) != len(leaves):
            raise ValueError(f"the checkpoint holds {len(saved)} env arrays, this run's envs have {len(leaves)}")
        self.set_environment_state(jax.tree.unflatten(treedef, [
            jax.numpy.asarray(a, dtype=np.asarray(t).dtype) if isinstance(t, jax.Array) else np.asarray(a, np.asarray(t).dtype)
            for a, t in zip(saved, leaves)]))
