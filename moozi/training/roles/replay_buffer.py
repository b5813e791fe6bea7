"""The replay buffer role (thesis 5.2.16): batched calls around `moozi.core.replay.ReplayBuffer`.

Every method moves whole batches (rollout results, lists of training
batches), so the Ray backend pays one call per iteration, not per step.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np

from moozi.config import Config
from moozi.core.replay import ReplayBuffer
from moozi.core.types import sub_state
from moozi.builders import env_spec, learns_chance_outcomes, learns_territory, symmetry_augment
from moozi.errors import MooziError
from moozi.runs.checkpoint import load_arrays


class ReplayRole:
    def __init__(self, config: Config):
        self.config = config
        spec = env_spec(config)
        # Stochastic MuZero's batches also carry the history inputs at t+1 .. t+K (its chance encoder's).
        self.buffer = ReplayBuffer(config.replay, config.targets, spec, seed=config.seed,
                                   augment=symmetry_augment(config, spec),
                                   future_observations=learns_chance_outcomes(config),
                                   territory_targets=learns_territory(config, spec))
        self.added_steps = 0
        self.added_trajectories = 0

    @classmethod
    def from_checkpoint(cls, config: Config, checkpoint_dir: str | pathlib.Path) -> "ReplayRole":
        """The replay a `ckpt-*` checkpoint saved (`best-*` ones keep none), for the benches that read it."""
        replay = sub_state(load_arrays(checkpoint_dir), "replay/")
        if not replay:
            raise MooziError(f"{checkpoint_dir} holds no replay snapshot")
        role = cls(config)
        role.load_state_dict(replay)
        return role

    def add_rollouts(self, results) -> int:
        """Adds the trajectories of rollout results, in order; returns the steps added."""
        trajectories = [trajectory for result in results for trajectory in result.trajectories]
        self.buffer.add_many(trajectories)
        added = sum(len(trajectory.action) for trajectory in trajectories)
        self.added_trajectories += len(trajectories)
        self.added_steps += added
        return added

    def ready(self) -> bool:
        return self.buffer.ready()

    def sample_batches(self, num_batches: int, batch_size: int):
        """`num_batches` training batches as host arrays, each with its buffer indices."""
        out = []
        for _ in range(num_batches):
            batch, indices = self.buffer.sample(batch_size)
            out.append((jax.device_get(batch), np.asarray(indices)))
        return out

    def update_priorities(self, update_result) -> None:
        for indices, priorities in update_result.priorities:
            self.buffer.update_priorities(indices, priorities)

    def sample_trajectories(self, num_trajectories: int):
        return self.buffer.sample_trajectories(num_trajectories)

    def replace_search_statistics(self, updates) -> int:
        """Writes reanalysed (trajectory_id, root_value, action_probs) back; returns steps updated."""
        steps = 0
        for trajectory_id, root_value, action_probs in updates:
            self.buffer.replace_search_statistics(trajectory_id, root_value, action_probs)
            steps += len(root_value)
        return steps

    def stats(self) -> dict[str, float]:
        stats = {f"replay_{k}": float(v) for k, v in self.buffer.stats().items()}
        stats["replay_added_steps"] = float(self.added_steps)
        return stats

    def state_dict(self) -> dict[str, np.ndarray]:
        state = dict(self.buffer.state_dict())
        state["role_counters"] = np.asarray([self.added_steps, self.added_trajectories], np.int64)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        state = dict(state)
        counters = state.pop("role_counters", None)
        self.buffer.load_state_dict(state)
        if counters is not None:
            self.added_steps, self.added_trajectories = (int(x) for x in counters)
