"""What an actor-critic agent hands the loops that run it (the Anakin loop, the host loop): its network,
optimizer and pure update, and the shape of its rollouts. Each agent builds one (`make_learner` in
moozi/agents/<agent>/learning.py); moozi/builders.py picks the agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import optax

from moozi.agents.actor_critic.networks import PolicyNetwork


class Learner(NamedTuple):
    network: PolicyNetwork
    optimizer: optax.GradientTransformation
    update: Callable  # (TrainState, Rollout, key) -> (TrainState, metrics); pure
    num_envs: int  # B
    rollout_steps: int  # T
    updates_per_rollout: int  # optimizer steps one `update` call applies
    policy_lag: int  # 0: rollouts by the latest parameters; 1: by the parameters one update older
