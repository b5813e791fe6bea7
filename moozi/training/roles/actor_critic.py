"""The rollout workers of the model-free agents (agent=ppo, agent=impala) on host envs: each training
rollout worker steps its share of the B envs with the parameters it is given and returns the rollout;
the testing rollout worker plays fresh episodes. Both run inline or as Ray actors, like MuZero's."""

from __future__ import annotations

import numpy as np

from moozi.actor_critic.host_rollouts import HostRollouts, evaluate_on_host, policy_functions
from moozi.builders import env_spec, make_actor_critic_learner, make_vector_env
from moozi.config import Config
from moozi.errors import MooziError


def envs_per_worker(config: Config, num_envs: int) -> int:
    workers = config.train.num_training_workers
    if num_envs % workers:
        raise MooziError(f"{config.agent}.num_envs={num_envs} does not split evenly over "
                         f"train.num_training_workers={workers}")
    return num_envs // workers


class ActorCriticRolloutWorker:
    """Training rollout worker `index`: envs seeded seed + index * b + j, as one VectorEnv of all B would be."""

    def __init__(self, config: Config, index: int):
        learner = make_actor_critic_learner(config, env_spec(config))
        b = envs_per_worker(config, learner.num_envs)
        envs = make_vector_env(config, b, config.seed + index * b, config.env.num_processes)
        self.rollouts = HostRollouts(envs, learner.network, learner.rollout_steps)

    def rollout(self, params, key) -> tuple:
        return self.rollouts.collect(params, key)

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.rollouts.state_dict()

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.rollouts.load_state_dict(state)

    def close(self) -> None:
        self.rollouts.close()


class ActorCriticTestingWorker:
    """The sampled (or greedy) policy over fresh episodes, each cut after `max_steps` steps."""

    __test__ = False

    def __init__(self, config: Config):
        self.config = config
        self._policy = policy_functions(make_actor_critic_learner(config, env_spec(config)).network)

    def run(self, params, episodes: int, seed: int, max_steps: int, greedy: bool = False) -> np.ndarray:
        envs = make_vector_env(self.config, episodes, seed)
        try:
            return evaluate_on_host(envs, self._policy, params, seed=seed, greedy=greedy, max_steps=max_steps)
        finally:
            envs.close()
