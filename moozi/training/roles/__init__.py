"""The roles of a training run (thesis 5.2.12-5.2.17), one per module, as plain classes.

The search agents' roles, which `SearchLoop` (moozi/training/search_loop.py) starts and calls:
`parameter_optimizer` updates the parameters, `replay_buffer` holds the buffer,
`self_play` and `anakin_self_play` generate training trajectories (host envs;
JAX-native envs in one compiled program), `testing_worker` measures the greedy
agent and `reanalyze_worker` re-searches stored trajectories. `actor_critic`
holds the rollout workers of PPO and IMPALA on host games, which `HostTrainer`
(moozi/training/actor_critic_host_loop.py) starts and calls. None of them knows
about Ray: the backend (moozi/training/backends/) wraps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from moozi.training.episodes import RolloutResult


class TrainingWorker(Protocol):
    """What `SearchLoop` calls on a training rollout worker, whichever kind the game takes
    (`search_loop.training_worker_class`): `self_play.TrainingRolloutWorker` for host envs,
    `anakin_self_play.AnakinRolloutWorker` for JAX-native ones."""

    def run(self, params, num_steps: int, policy_version: int) -> RolloutResult: ...

    def state_dict(self) -> dict[str, np.ndarray]: ...

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None: ...
