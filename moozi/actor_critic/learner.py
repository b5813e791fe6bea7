"""What an actor-critic agent hands the loops that run it (the Anakin loop, the host loop): its network,
optimizer and pure update, and the shape of its rollouts. Each agent builds one (`make_learner` in
moozi/actor_critic/ppo.py and impala.py, through `build_learner`); moozi/builders.py picks the agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import optax

from moozi.actor_critic.networks import PolicyNetwork, make_policy_network


class Learner(NamedTuple):
    network: PolicyNetwork
    optimizer: optax.GradientTransformation
    update: Callable  # (ActorCriticTrainState, Rollout, key) -> (ActorCriticTrainState, metrics); pure
    num_envs: int  # B
    rollout_steps: int  # T
    updates_per_rollout: int  # optimizer steps one `update` call applies
    policy_lag: int  # 0: rollouts by the latest parameters; 1: by the parameters one update older


def build_learner(config, obs_shape: tuple[int, ...], num_actions: int, *, make_optimizer: Callable,
                  make_update: Callable, updates_per_rollout: int, num_envs: int | None, rollout_steps: int | None,
                  policy_lag: int | None, dtype: str) -> Learner:
    """An agent's network (from its `torso`, `mlp_hidden_sizes` and `shared_torso` settings), its
    `make_optimizer(config, samples_per_rollout)` and `make_update(network, optimizer, config)`, for
    B x T rollouts (B, T and the lag from `config` unless given)."""
    num_envs = config.num_envs if num_envs is None else num_envs
    rollout_steps = config.rollout_steps if rollout_steps is None else rollout_steps
    network = make_policy_network(config.torso, config.mlp_hidden_sizes, obs_shape, num_actions,
                                  config.shared_torso, dtype)
    optimizer = make_optimizer(config, num_envs * rollout_steps)
    return Learner(network, optimizer, make_update(network, optimizer, config), num_envs, rollout_steps,
                   updates_per_rollout, config.policy_lag if policy_lag is None else policy_lag)
