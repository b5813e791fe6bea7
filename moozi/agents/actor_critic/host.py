"""The host loop of an actor-critic, for envs that step outside JAX (MinAtar, Atari, Gymnasium,
OpenSpiel): B envs of a `VectorEnv` step on the host, a jitted `act` picks their actions, and the T
steps become the same `Rollout` the Anakin loop builds on the device, for the same jitted update.

The policy lag is the Anakin loop's (moozi/agents/actor_critic/anakin.py): with lag 1 the rollout of
iteration i is played by the parameters one update older. A seed and a checkpoint fix everything:
the envs' own state is saved where the bridge can snapshot it (`VectorEnv.get_state`), so a resumed
run continues the same episodes; where it cannot, the resumed run starts new ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from moozi.agents.actor_critic.acting import act
from moozi.agents.actor_critic.learner import Learner
from moozi.agents.actor_critic.rollout import Rollout
from moozi.agents.actor_critic.trainer_state import TrainerState
from moozi.envs.base import StepOutput


def _copy(step: StepOutput) -> StepOutput:
    return StepOutput(*(np.array(x) for x in step))  # VectorEnv's outputs are views the next step overwrites


class HostTrainer(TrainerState):
    """`make_vector_env(num_envs, seed)` builds the B training envs and, for `evaluate`, fresh ones."""

    def __init__(self, make_vector_env: Callable[[int, int], Any], obs_shape: tuple[int, ...], learner: Learner, *,
                 seed: int = 0):
        super().__init__(learner, obs_shape, seed)
        self._make_vector_env = make_vector_env
        self.envs = make_vector_env(self.num_envs, seed)
        self.step = _copy(self.envs.reset())
        self.episode_return = np.zeros(self.num_envs, np.float32)
        network = learner.network
        self._act = jax.jit(lambda params, obs, legal, key: act(network, params, obs, legal, key))
        self._act_greedy = jax.jit(lambda params, obs, legal, key: act(network, params, obs, legal, key, greedy=True))
        self._value = jax.jit(lambda params, obs, legal: network.apply(params, obs, legal)[1])
        self._update = jax.jit(learner.update)

    def iteration(self) -> dict[str, float]:
        """One rollout of B x T env steps on the host and its jitted update; returns the update's metrics."""
        self._key, key = jax.random.split(self._key)
        rollout_key, update_key = jax.random.split(key)
        acting = self.acting_params
        records: dict[str, list] = {k: [] for k in ("obs", "legal_actions", "reward", "is_last", "action", "log_prob", "value")}
        finished_returns: list[float] = []
        step = self.step
        for step_key in jax.random.split(rollout_key, self.rollout_steps):
            policy = jax.device_get(self._act(acting, step.obs, step.legal_actions, step_key))
            for name, value in (("obs", step.obs), ("legal_actions", step.legal_actions), ("reward", step.reward),
                                ("is_last", step.is_last), ("action", policy.action), ("log_prob", policy.log_prob),
                                ("value", policy.value)):
                records[name].append(value)
            step = _copy(self.envs.step(np.asarray(policy.action), step.is_last))
            self.episode_return = np.where(step.is_first, 0.0, self.episode_return + step.reward).astype(np.float32)
            finished_returns.extend(self.episode_return[step.is_last].tolist())
        self.step = step
        next_value = self._value(acting, step.obs, step.legal_actions)
        rollout = Rollout(
            **{name: np.stack(values) for name, values in records.items()},
            next_obs=step.obs, next_legal_actions=step.legal_actions, next_reward=step.reward,
            next_is_last=step.is_last, next_value=next_value,
        )
        previous = self.state.params
        self.state, metrics = self._update(self.state, rollout, update_key)
        self.acting_params = previous if self.learner.policy_lag else self.state.params
        metrics = dict(metrics)
        metrics["episodes"] = len(finished_returns)
        metrics["episode_return"] = float(np.mean(finished_returns)) if finished_returns else float("nan")
        return self.count_iteration(metrics)

    def environment_state(self) -> Any:
        return {"step": self.step, "episode_return": self.episode_return, "snapshot": self.envs.get_state()}

    def set_environment_state(self, state: Any) -> None:
        if state["snapshot"]:
            self.envs.set_state({k: np.asarray(v) for k, v in state["snapshot"].items()})
            self.step = StepOutput(*(np.asarray(x) for x in state["step"]))
            self.episode_return = np.asarray(state["episode_return"], np.float32)

    def evaluate(self, episodes: int, *, seed: int = 0, greedy: bool = False, max_steps: int = 5_000) -> np.ndarray:
        """Returns of `episodes` episodes of the latest parameters on fresh envs, each env's first episode,
        all played at once, each cut after `max_steps` steps (a cut episode counts its return so far)."""
        envs = self._make_vector_env(episodes, seed)
        try:
            step = _copy(envs.reset())
            total = np.zeros(episodes, np.float64)
            done = np.zeros(episodes, bool)
            key = jax.random.PRNGKey(seed)
            choose = self._act_greedy if greedy else self._act
            for _ in range(max_steps):
                key, sub = jax.random.split(key)
                action = np.asarray(choose(self.state.params, step.obs, step.legal_actions, sub).action)
                step = _copy(envs.step(action, step.is_last))
                total += np.where(done, 0.0, step.reward)
                done |= step.is_last
                if done.all():
                    break
            return total.astype(np.float32)
        finally:
            envs.close()

    def close(self) -> None:
        self.envs.close()
