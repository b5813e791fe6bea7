"""The model-free agents beside MuZero and AlphaZero (moozi/core): PPO and IMPALA, one module each
(`ppo`, `impala`: its settings, loss, update and `make_learner`), on a shared actor-critic (`networks`,
`policy_step`, `rollout`, and the loops that run them: `anakin_loop` for JAX-native games, `host_rollouts`
for the host games' envs). An agent's config section picks its learner here."""

from __future__ import annotations

from moozi.actor_critic.anakin_loop import AnakinTrainer
from moozi.actor_critic.learner import Learner
from moozi.actor_critic import impala, ppo
from moozi.actor_critic.impala import IMPALAConfig
from moozi.actor_critic.ppo import PPOConfig
from moozi.envs.base import JaxEnv


def make_learner(config: PPOConfig | IMPALAConfig, obs_shape: tuple[int, ...], num_actions: int, *,
                 num_envs: int | None = None, rollout_steps: int | None = None,
                 policy_lag: int | None = None, dtype: str = "float32") -> Learner:
    """The learner of the agent whose settings `config` holds; B, T and the lag from `config` unless given;
    `dtype` the network's compute dtype (`network.dtype`)."""
    if isinstance(config, PPOConfig):
        make = ppo.make_learner
    elif isinstance(config, IMPALAConfig):
        make = impala.make_learner
    else:
        raise TypeError(f"no actor-critic learner for {type(config).__name__}")
    return make(config, obs_shape, num_actions, num_envs=num_envs, rollout_steps=rollout_steps, policy_lag=policy_lag,
                dtype=dtype)


def make_anakin_trainer(env: JaxEnv, config: PPOConfig | IMPALAConfig, *, seed: int = 0, **shape) -> AnakinTrainer:
    """The agent on a JAX-native env, its whole rollout-and-update loop jitted:

        trainer = make_anakin_trainer(gymnax.make("gymnax:Breakout-MinAtar"), PPOConfig(), seed=0)
        metrics = trainer.iteration()  # one rollout of B x T env steps and its update
        returns = trainer.evaluate(episodes=100)
    """
    return AnakinTrainer(env, make_learner(config, env.spec.obs_shape, env.spec.num_actions, **shape), seed=seed)


__all__ = ["AnakinTrainer", "IMPALAConfig", "Learner", "PPOConfig", "make_anakin_trainer", "make_learner"]
