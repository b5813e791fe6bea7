"""IMPALA on a JAX-native env, the whole loop jitted (moozi/agents/actor_critic/anakin.py). The rollout
of iteration i is played by the parameters one update old (`policy_lag=1`, Cleanba's synchronous
schedule), so V-trace corrects a real lag, as it does for IMPALA's actors."""

from __future__ import annotations

from moozi.agents.actor_critic.anakin import AnakinTrainer
from moozi.agents.actor_critic.networks import make_policy_network
from moozi.agents.impala.config import IMPALAConfig
from moozi.agents.impala.learning import make_optimizer, make_update
from moozi.envs.base import JaxEnv


def make_anakin_trainer(env: JaxEnv, config: IMPALAConfig, *, num_envs: int, rollout_steps: int, seed: int = 0,
                        policy_lag: int = 1) -> AnakinTrainer:
    network = make_policy_network(config.torso, config.mlp_hidden_sizes, env.spec.obs_shape, env.spec.num_actions)
    optimizer = make_optimizer(config, num_envs * rollout_steps)
    return AnakinTrainer(
        env, network, optimizer, make_update(network, optimizer, config), num_envs=num_envs,
        rollout_steps=rollout_steps, updates_per_rollout=1, seed=seed, policy_lag=policy_lag,
    )
