"""Data contracts of the learning core (docs/training.md; thesis 5.2.8).

Shapes: B batch, T time, L history length, K unroll steps, A actions (dummy
included), (H, W, C) one env frame, C_h = L * (C + A) stacked channels.
"""

from __future__ import annotations

from typing import Any, NamedTuple

Array = Any


class Trajectory(NamedTuple):
    """One episode's step samples stacked on a time axis [T] (thesis 5.2.8).

    Step t holds the env output o_t (with r_t, the reward for arriving at o_t,
    and the flags), the action a_t chosen at o_t, and the search statistics at
    o_t. The last step has is_last=True; its action is the dummy action 0 and
    its p* is the search's visit distribution over the legal set {dummy}.
    """

    obs: Array  # [T, H, W, C] float32 (or uint8 where the env's obs are binary)
    action: Array  # [T] int32: a_t, augmented index
    reward: Array  # [T] float32: r_t (0 at t = 0)
    is_first: Array  # [T] bool
    is_last: Array  # [T] bool
    legal_actions: Array  # [T, A] bool
    to_play: Array  # [T] int32 (-1 single-agent)
    root_value: Array  # [T] float32: v*_t, from the player to move at t
    action_probs: Array  # [T, A] float32: p*_t


class TrainingTarget(NamedTuple):
    """A batch of training targets for the loss (thesis 5.2.8-5.2.9). Leading axis [B].

    The N-step return is split so the learner can bootstrap from either the
    stored v* or a target network:
        G^N_{t+k} = partial_return[k] + bootstrap_discount[k] * v(o_{t+k+N})
    where v is `bootstrap_value[k]` (stored v*) or the target network's value
    of `bootstrap_stacked_obs[k]`. bootstrap_discount already carries gamma^N,
    the two-player sign, and is 0 when t+k+N lies past the episode end.
    """

    stacked_obs: Array  # [B, H, W, C_h]: history input at t (thesis 5.2.6)
    next_stacked_obs: Array  # [B, H, W, C_h]: history input at t+1 (self-consistency)
    actions: Array  # [B, K] int32: a_t .. a_{t+K-1}; dummy (0) past the episode end
    rewards: Array  # [B, K] float32: r_{t+1} .. r_{t+K}; 0 past the end
    action_probs: Array  # [B, K+1, A] float32: p*_t .. p*_{t+K}
    policy_mask: Array  # [B, K+1] float32: 1 up to and including the last step, 0 past it
    root_values: Array  # [B, K+1] float32: v*_t .. v*_{t+K}; 0 past the end
    partial_return: Array  # [B, K+1] float32: discounted reward part of G^N_{t+k}
    bootstrap_discount: Array  # [B, K+1] float32
    bootstrap_value: Array  # [B, K+1] float32: stored v*_{t+k+N} (0 past the end)
    consistency_mask: Array  # [B] float32: 0 when t is the episode's last step (no o_{t+1})
    importance_weight: Array  # [B] float32: (1/(N P(i)))^beta / max, 1 for uniform
    bootstrap_stacked_obs: Array | None = None  # [B, K+1, H, W, C_h] only with target-network bootstrap
    # [B, K] float32: 1 where the player to move changes from t+k to t+k+1; only in games whose turns
    # may repeat (EnvSpec.turns_alternate False), where the model learns it (docs/stochastic.md).
    turn_passes: Array | None = None
    # Territory games (EnvSpec.territory) whose loss asks for them (moozi/core/territory.py): each point's
    # owner at the episode's end [B, H, W] in {1, 0, -1} and the final score margin [B], both from the
    # view of the player to move at t.
    ownership: Array | None = None
    score_margin: Array | None = None


def sub_state(state: dict, prefix: str) -> dict:
    """The entries of a flat state dict (name -> array, as checkpoints store them) under `prefix`
    ("replay/", "recorder/", ...), with the prefix taken off their names."""
    return {name[len(prefix):]: value for name, value in state.items() if name.startswith(prefix)}
