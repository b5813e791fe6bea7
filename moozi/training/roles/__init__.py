"""The roles of a training run (thesis 5.2.12-5.2.16), one per module, as plain classes.

`parameter_optimizer` updates the parameters, `replay` holds the buffer,
`self_play` and `anakin_self_play` generate training trajectories (host envs;
JAX-native envs in one compiled program), `testing` measures the greedy agent
and `reanalyze` re-searches stored trajectories. None of them knows about Ray:
the backend (moozi/training/backends/) wraps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from moozi.training.episodes import RolloutResult


class TrainingWorker(Protocol):
    """What the driver calls on a training rollout worker, whichever kind the game takes
    (`search_loop.training_worker_class`): `self_play.TrainingRolloutWorker` for host envs,
    `anakin_self_play.AnakinRolloutWorker` for JAX-native ones."""

    def run(self, params, num_steps: int, policy_version: int) -> RolloutResult: ...

    def state_dict(self) -> dict[str, np.ndarray]: ...

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None: ...
