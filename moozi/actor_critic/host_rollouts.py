"""Rollouts of an actor-critic on host envs (MinAtar, Atari, Gymnasium): B envs of a `VectorEnv` step
on the host, a jitted `act` picks their actions, and the T steps become the same `Rollout` the Anakin
loop builds on the device (moozi/actor_critic/rollout.py), for the same jitted update.

`HostRollouts` is what a training rollout worker holds (moozi/training/roles/actor_critic.py);
`evaluate_on_host` is what the testing rollout worker runs.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from moozi.actor_critic.policy_step import act
from moozi.actor_critic.networks import PolicyNetwork
from moozi.actor_critic.rollout import Rollout
from moozi.envs.base import StepOutput


def _copy(step: StepOutput) -> StepOutput:
    return StepOutput(*(np.array(x) for x in step))  # VectorEnv's outputs are views the next step overwrites


class PolicyFunctions(NamedTuple):
    sample: object  # jitted (params, obs, legal, key) -> PolicyStep
    greedy: object
    value: object  # jitted (params, obs, legal) -> [B]


def policy_functions(network: PolicyNetwork) -> PolicyFunctions:
    return PolicyFunctions(
        jax.jit(lambda params, obs, legal, key: act(network, params, obs, legal, key)),
        jax.jit(lambda params, obs, legal, key: act(network, params, obs, legal, key, greedy=True)),
        jax.jit(lambda params, obs, legal: network.apply(params, obs, legal)[1]),
    )


class HostRollouts:
    """T-step rollouts of the B envs of `envs` (a VectorEnv), continuing their episodes across calls.

    The envs' own state is checkpointed where the bridge can snapshot it (`VectorEnv.get_state`), so a
    resumed run continues the same episodes; where it cannot (MinAtar, Gymnasium), it starts new ones.
    """

    def __init__(self, envs, network: PolicyNetwork, rollout_steps: int):
        self.envs = envs
        self.rollout_steps = rollout_steps
        self._policy = policy_functions(network)
        self.step = _copy(envs.reset())
        self.episode_return = np.zeros(envs.num_envs, np.float32)

    def collect(self, params, key) -> tuple[Rollout, np.ndarray]:
        """(the rollout as numpy arrays, the returns of the episodes that ended in it)."""
        records: dict[str, list] = {k: [] for k in ("obs", "legal_actions", "reward", "is_last", "action", "log_prob", "value")}
        finished: list[float] = []
        step = self.step
        for step_key in jax.random.split(key, self.rollout_steps):
            policy = jax.device_get(self._policy.sample(params, step.obs, step.legal_actions, step_key))
            for name, value in (("obs", step.obs), ("legal_actions", step.legal_actions), ("reward", step.reward),
                                ("is_last", step.is_last), ("action", policy.action), ("log_prob", policy.log_prob),
                                ("value", policy.value)):
                records[name].append(value)
            step = _copy(self.envs.step(np.asarray(policy.action), step.is_last))
            self.episode_return = np.where(step.is_first, 0.0, self.episode_return + step.reward).astype(np.float32)
            finished.extend(self.episode_return[step.is_last].tolist())
        self.step = step
        rollout = Rollout(
            **{name: np.stack(values) for name, values in records.items()},
            next_obs=step.obs, next_legal_actions=step.legal_actions, next_reward=step.reward,
            next_is_last=step.is_last, next_value=np.asarray(self._policy.value(params, step.obs, step.legal_actions)),
        )
        return rollout, np.asarray(finished, np.float32)

    def state_dict(self) -> dict[str, np.ndarray]:
        snapshot = self.envs.get_state()
        if not snapshot:
            return {}
        out = {f"snapshot/{k}": v for k, v in snapshot.items()}
        out.update({f"step/{name}": np.asarray(v) for name, v in self.step._asdict().items()})
        out["episode_return"] = self.episode_return
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if not state:
            return  # nothing was snapshotted: new episodes
        self.envs.set_state({k[len("snapshot/"):]: v for k, v in state.items() if k.startswith("snapshot/")})
        self.step = StepOutput(**{name: np.asarray(state[f"step/{name}"]) for name in StepOutput._fields})
        self.episode_return = np.asarray(state["episode_return"], np.float32)

    def close(self) -> None:
        self.envs.close()


def evaluate_on_host(envs, policy: PolicyFunctions, params, *, seed: int, greedy: bool, max_steps: int) -> np.ndarray:
    """Returns of the first episode of each env of `envs` (fresh), all played at once, each cut after
    `max_steps` steps (a cut episode counts its return so far)."""
    step = _copy(envs.reset())
    total = np.zeros(envs.num_envs, np.float64)
    done = np.zeros(envs.num_envs, bool)
    key = jax.random.PRNGKey(seed)
    choose = policy.greedy if greedy else policy.sample
    for _ in range(max_steps):
        key, sub = jax.random.split(key)
        action = np.asarray(choose(params, step.obs, step.legal_actions, sub).action)
        step = _copy(envs.step(action, step.is_last))
        total += np.where(done, 0.0, step.reward)
        done |= step.is_last
        if done.all():
            break
    return total.astype(np.float32)
