"""The parameter optimizer role (thesis 5.2.17): holds the TrainState and applies updates."""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import Config
from moozi.core.train_step import TrainState, agent_variables, init_train_state, make_train_step
from moozi.core.types import TrainingTarget
from moozi.errors import MooziError
from moozi.builders import build_network, env_spec, example_stacked_obs, make_loss, seed_key


class NonFiniteError(MooziError):
    """A loss term or a parameter became NaN or infinite."""


@dataclasses.dataclass
class UpdateResult:
    metrics: dict[str, float]  # mean over the updates of this call
    priorities: list[tuple[np.ndarray, np.ndarray]]  # (indices, new δ) per batch, for the replay buffer
    version: int  # parameter version after the updates (= number of updates applied)
    seconds: float


def _all_finite(tree) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


class ParameterOptimizer:
    def __init__(self, config: Config):
        self.config = config
        spec = env_spec(config)
        network = build_network(config, spec)
        self.state: TrainState = init_train_state(
            network, config.optimizer, seed_key(config.seed, 0), example_stacked_obs(config, spec)
        )
        loss, loss_config = make_loss(config)  # MuZero's loss, or Stochastic MuZero's with its chance terms
        self._train_step = make_train_step(network, loss_config, config.optimizer, loss=loss)
        self._params_finite = jax.jit(_all_finite)
        self._rng = seed_key(config.seed, 2)

    @property
    def version(self) -> int:
        return int(self.state.step)

    def get_params(self, network: str = "online"):
        """The acting variables of the latest version, as host arrays (cheap to ship to workers);
        `network="target"`: the target network's (what `train.agent_network="target"` plays)."""
        return jax.device_get(agent_variables(self.state, network))

    def update(self, batches: list[tuple[TrainingTarget, np.ndarray]], progress: float = 0.0) -> UpdateResult:
        """One update per batch; `progress`: the share of the run's planned length done (the learning
        rate's decay with optimizer.decay_over="run")."""
        start = time.perf_counter()
        progress = np.float32(progress)
        summed: dict[str, float] = {}
        priorities = []
        for batch, indices in batches:
            # The key is a function of the update count, which checkpoints hold, so a resumed
            # learner draws the same keys as an uninterrupted one.
            key = jax.random.fold_in(self._rng, self.state.step)
            self.state, metrics, new_priorities = self._train_step(self.state, batch, key, progress)
            # Parameters are checked after every update, not once per call: a finite loss can
            # still come with an overflowing step, and the message must name that update.
            variables = (self.state.params, self.state.batch_stats)
            metrics, params_finite = jax.device_get((metrics, self._params_finite(variables)))
            update_index = int(self.state.step)
            bad = [name for name, value in metrics.items() if not np.all(np.isfinite(value))]
            if bad:
                raise NonFiniteError(
                    f"non-finite {', '.join(sorted(bad))} at update {update_index}; "
                    "training stopped, the last checkpoint is intact"
                )
            if not params_finite:
                raise NonFiniteError(
                    f"non-finite parameters after update {update_index}; "
                    "training stopped, the last checkpoint is intact"
                )
            for name, value in metrics.items():
                summed[name] = summed.get(name, 0.0) + float(value)
            priorities.append((np.asarray(indices), np.asarray(new_priorities)))
        mean = {name: value / max(len(batches), 1) for name, value in summed.items()}
        return UpdateResult(mean, priorities, self.version, time.perf_counter() - start)

    def get_state(self) -> TrainState:
        return jax.device_get(self.state)

    def set_state(self, state: TrainState) -> None:
        self.state = jax.device_put(state)

    def template(self) -> TrainState:
        return self.state
