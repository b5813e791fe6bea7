"""The Anakin loop of an actor-critic (Podracer; the PureJaxRL pattern): for JAX-native envs (gymnax,
pgx) one jitted program rolls B envs T steps with `lax.scan` and runs the agent's update on them, so
nothing leaves the device between a rollout and its update.

With `policy_lag=1` the rollout of iteration i is played by the parameters before the previous
update, as Cleanba's synchronous actor-learner schedule plays them (the learner trains on data of
the second-latest policy): off-policy corrections (PPO's ratio, IMPALA's V-trace) then see a real
one-version lag. A seed fixes every key: the same seed gives the same parameters, bit for bit.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from moozi.actor_critic.learner import Learner
from moozi.actor_critic.networks import PolicyNetwork, ActorCriticTrainState
from moozi.actor_critic.rollout import init_carry, make_rollout
from moozi.actor_critic.trainer_state import TrainerState
from moozi.envs.base import JaxEnv


class AnakinTrainer(TrainerState):
    """Holds one run's state on a JAX-native env and calls its jitted iteration: the learner's
    `update(state, rollout, key) -> (state, metrics)` applies `updates_per_rollout` optimizer steps."""

    def __init__(self, env: JaxEnv, learner: Learner, *, seed: int = 0):
        super().__init__(learner, env.spec.obs_shape, seed)
        self.env = env
        self.carry = jax.jit(init_carry, static_argnums=(0, 1))(env, self.num_envs, self.carry_key)
        rollout = make_rollout(env, learner.network, self.rollout_steps)
        update, policy_lag = learner.update, learner.policy_lag

        def iteration(state: ActorCriticTrainState, acting_params, carry, key):
            rollout_key, update_key = jax.random.split(key)
            carry, batch, finished, returns = rollout(acting_params, carry, rollout_key)
            new_state, metrics = update(state, batch, update_key)
            episodes = finished.sum()
            metrics["episodes"] = episodes
            metrics["episode_return"] = jnp.where(episodes > 0, returns.sum() / jnp.maximum(episodes, 1), jnp.nan)
            next_acting = state.params if policy_lag else new_state.params
            return new_state, next_acting, carry, metrics

        self._iteration = jax.jit(iteration)
        self._evaluation = _evaluation_steps(env, learner.network)

    def iteration(self) -> dict[str, float]:
        """One rollout of B x T env steps and its update; returns the update's metrics."""
        self._key, key = jax.random.split(self._key)
        self.state, self.acting_params, self.carry, metrics = self._iteration(
            self.state, self.acting_params, self.carry, key)
        return self.count_iteration(metrics)

    def environment_state(self) -> Any:
        return self.carry

    def set_environment_state(self, carry: Any) -> None:
        self.carry = carry

    def evaluate(self, episodes: int, *, seed: int = 0, greedy: bool = False, max_steps: int = 5_000) -> np.ndarray:
        """Returns of `episodes` episodes of the latest parameters, one per env, all played at once,
        each cut after `max_steps` steps (a cut episode counts its return so far)."""
        key = jax.random.PRNGKey(seed)
        carry = jax.jit(init_carry, static_argnums=(0, 1))(self.env, episodes, key)
        done = np.zeros(episodes, bool)
        collected: list[float] = []
        steps, chunk = 0, 100
        while len(collected) < episodes and steps < max_steps:
            key, sub = jax.random.split(key)
            carry, finished, finished_returns = self._evaluation(self.state.params, carry, sub, chunk, greedy)
            finished, finished_returns = np.asarray(finished), np.asarray(finished_returns)
            for t in range(finished.shape[0]):
                for b in np.flatnonzero(finished[t] & ~done):
                    collected.append(float(finished_returns[t, b]))
                    done[b] = True  # each env's first episode only: no bias toward short episodes
            steps += chunk
        collected += [float(r) for r in np.asarray(carry.episode_return)[~done]]  # cut episodes
        return np.asarray(collected[:episodes], np.float32)


def _evaluation_steps(env: JaxEnv, network: PolicyNetwork):
    def run(params, carry, key, num_steps: int, greedy: bool):
        carry, _, finished, returns = make_rollout(env, network, num_steps, greedy=greedy)(params, carry, key)
        return carry, finished, returns

    return jax.jit(run, static_argnames=("num_steps", "greedy"))
