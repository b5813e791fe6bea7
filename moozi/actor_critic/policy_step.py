"""Acting with PPO's policy: a sampled (training) or greedy (testing) legal action, its
log-probability under the acting policy and the value estimate, for a batch of env outputs."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from moozi.actor_critic.networks import PolicyNetwork


class PolicyStep(NamedTuple):
    action: jax.Array  # [B] int32 (the dummy on is_last steps, where it is the only legal action)
    log_prob: jax.Array  # [B]
    value: jax.Array  # [B]


def act(network: PolicyNetwork, params, obs, legal_actions, key, greedy: bool = False) -> PolicyStep:
    logits, value = network.apply(params, obs, legal_actions)
    if greedy:
        action = jnp.argmax(logits, axis=-1)
    else:
        action = jax.random.categorical(key, logits)
    log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
    return PolicyStep(action.astype(jnp.int32), log_prob, value)
