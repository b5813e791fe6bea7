"""The reanalyze rollout worker (thesis 5.2.11, 5.2.15): stored trajectories re-searched with new parameters."""

from __future__ import annotations

import jax
import numpy as np

from moozi.builders import env_spec, make_acting, seed_key
from moozi.config import Config
from moozi.core.history import init_history
from moozi.core.planner import reanalyze_planner_config
from moozi.core.types import Trajectory
from moozi.training.reanalyze_env import MockVectorEnv, TrajectorySupply


class ReanalyzeRolloutWorker:
    """Re-searches stored trajectories with the latest parameters (thesis 5.2.11, 5.2.15).

    Trajectories from the replay buffer are replayed step by step through a
    vectorized mock env (thesis 5.2.2-5.2.3) and the same jitted acting
    program as the training workers (history stacking + inference + search,
    root noise off); only the new v* and p* go back to the buffer.
    """

    def __init__(self, config: Config):
        self.config = config
        self.spec = env_spec(config)
        self.num_envs = config.train.reanalyze_num_envs
        self._act = make_acting(config, self.spec, reanalyze_planner_config(config.planner))
        self._rng = seed_key(config.seed, 3)

    def run(self, params, trajectories: list[tuple[int, Trajectory]]) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(trajectory_id, trajectory) pairs -> (trajectory_id, new root_value [T], new action_probs [T, A])."""
        if not trajectories:
            return []
        ids = [trajectory_id for trajectory_id, _ in trajectories]
        supply = TrajectorySupply([trajectory for _, trajectory in trajectories])
        env = MockVectorEnv(supply, min(self.num_envs, len(trajectories)), self.spec)
        history = init_history(env.num_envs, self.config.targets.history_length, self.spec.obs_shape)
        step = env.reset()
        last_action = np.zeros(env.num_envs, np.int32)
        finished = []
        while True:
            self._rng, key = jax.random.split(self._rng)
            history, out = self._act(params, history, step, last_action, None, key)
            env.record(np.asarray(out.root_value), np.asarray(out.action_probs))
            # The stored actions, not the search's, drive the history: the trajectory is fixed.
            last_action = env.stored_actions()
            step = env.step(last_action, step.is_last)
            finished.extend(env.pop_finished(with_ids=True))
            if not env.active.any():  # every trajectory was re-searched and the supply is empty
                break
        return [(ids[index], t.root_value, t.action_probs) for index, t in finished]
