"""PPO on a JAX-native env, the whole rollout-and-update loop jitted (moozi/agents/actor_critic/anakin.py).

    trainer = make_anakin_trainer(env, PPOConfig(), num_envs=64, rollout_steps=128, seed=0)
    metrics = trainer.iteration()  # one rollout of B x T env steps and its epochs of updates
    returns = trainer.evaluate(episodes=100)
"""

from __future__ import annotations

from moozi.agents.actor_critic.anakin import AnakinTrainer
from moozi.agents.actor_critic.networks import make_policy_network
from moozi.agents.ppo.config import PPOConfig
from moozi.agents.ppo.learning import make_optimizer, make_update
from moozi.envs.base import JaxEnv


def make_anakin_trainer(env: JaxEnv, config: PPOConfig, *, num_envs: int, rollout_steps: int, seed: int = 0,
                        policy_lag: int = 0) -> AnakinTrainer:
    network = make_policy_network(config.torso, config.mlp_hidden_sizes, env.spec.obs_shape, env.spec.num_actions)
    optimizer = make_optimizer(config, num_envs * rollout_steps)
    return AnakinTrainer(
        env, network, optimizer, make_update(network, optimizer, config), num_envs=num_envs,
        rollout_steps=rollout_steps, updates_per_rollout=config.num_epochs * config.num_minibatches,
        seed=seed, policy_lag=policy_lag,
    )
