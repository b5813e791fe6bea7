"""A hand-made model with the Network interface and known answers, for planner and acting tests."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax.numpy as jnp

# Action 0 is the dummy; the best arm is 3. mctx's default Q transform (as MuZero's pseudocode) scores
# unvisited arms at the minimum, so PUCT can linger on the best arm seen so far until sqrt(N) in the
# prior term grows; 32 simulations are enough here for every row to find arm 3.
BANDIT_REWARDS = [0.0, -0.5, -0.2, 1.0, -0.8]


class FakeOutput(NamedTuple):
    """Same fields as moozi.core.network.NetworkOutput."""

    hidden_state: Any  # [B] int32 state id
    value: Any  # [B]
    reward: Any  # [B]
    policy_logits: Any  # [B, A]
    value_logits: Any  # [B, Z]
    reward_logits: Any  # [B, Z]


@dataclasses.dataclass(frozen=True)
class TableNetwork:
    """A known model with the Network interface: the hidden state is an integer state id.

    `variables` holds the tables: next_state [S, A] int32, reward [S, A],
    value [S], logits [S, A], and obs_weight (the root value adds
    obs_weight * mean(stacked_obs), so root values depend on the input).
    The root is always state 0.
    """

    def initial_inference(self, variables, stacked_obs):
        batch = stacked_obs.shape[0]
        state = jnp.zeros((batch,), jnp.int32)
        obs_term = variables["obs_weight"] * jnp.mean(stacked_obs.reshape(batch, -1), axis=-1)
        return self._output(variables, state, variables["value"][state] + obs_term, jnp.zeros((batch,)))

    def recurrent_inference(self, variables, hidden_state, action):
        next_state = variables["next_state"][hidden_state, action]
        reward = variables["reward"][hidden_state, action]
        return self._output(variables, next_state, variables["value"][next_state], reward)

    @staticmethod
    def _output(variables, state, value, reward):
        batch = state.shape[0]
        return FakeOutput(
            hidden_state=state,
            value=value.astype(jnp.float32),
            reward=reward.astype(jnp.float32),
            policy_logits=variables["logits"][state],
            value_logits=jnp.zeros((batch, 11)),
            reward_logits=jnp.zeros((batch, 11)),
        )


def table_variables(next_state, reward, value, logits=None, obs_weight=0.0):
    next_state = jnp.asarray(next_state, jnp.int32)
    num_states, num_actions = next_state.shape
    if logits is None:
        logits = jnp.zeros((num_states, num_actions))
    return {
        "next_state": next_state,
        "reward": jnp.asarray(reward, jnp.float32),
        "value": jnp.asarray(value, jnp.float32),
        "logits": jnp.asarray(logits, jnp.float32),
        "obs_weight": jnp.float32(obs_weight),
    }
