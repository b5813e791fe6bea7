"""History stacking (thesis 5.2.6): the last L frames and L actions as one image.

Layout (docs/envs.md, the history input): frames o_{t-L+1..t} and actions a_{t-L..t-1} become an
array (H, W, L*(C + A)): first the L frames' channels in time order, then L
one-hot action planes (each divided by A) in time order. Before t = 0 the
frames are zeros and the actions are the dummy action 0.

Each action plane is one value over the whole board; the resnet's first convolution relies on it
and reads them from one cell (moozi/core/network.py, `_ConstantPlanesConv`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from moozi.envs.base import DUMMY_ACTION


def stack_history(frames, actions, num_actions: int):
    """frames [..., L, H, W, C], actions [..., L] int -> [..., H, W, L*(C+A)] float32."""
    *batch, length, height, width, channels = frames.shape
    frames = jnp.asarray(frames, jnp.float32)
    # [..., L, H, W, C] -> [..., H, W, L, C] -> [..., H, W, L*C]
    frame_planes = jnp.moveaxis(frames, -4, -2).reshape(*batch, height, width, length * channels)
    action_planes = jax.nn.one_hot(actions, num_actions, dtype=jnp.float32) / num_actions
    action_planes = action_planes.reshape(*batch, 1, 1, length * num_actions)
    action_planes = jnp.broadcast_to(action_planes, (*batch, height, width, length * num_actions))
    return jnp.concatenate([frame_planes, action_planes], axis=-1)


class HistoryState(NamedTuple):
    """The last L frames and actions of every env of a batch, oldest first.

    After `push_history` at step t, `frames[:, -1]` is o_t and `actions[:, -1]`
    is a_{t-1}, the action that led to o_t, so `history_input` gives the
    thesis's pi(a | o_{t-L+1..t}, a_{t-L..t-1}).
    """

    frames: jax.Array  # [B, L, H, W, C] float32
    actions: jax.Array  # [B, L] int32 (augmented indices)


def init_history(batch_size: int, history_length: int, obs_shape: tuple[int, int, int]) -> HistoryState:
    """An empty history: zero frames and the dummy action everywhere (thesis 5.2.4: a_i = 0 for i < 0)."""
    return HistoryState(
        frames=jnp.zeros((batch_size, history_length, *obs_shape), jnp.float32),
        actions=jnp.full((batch_size, history_length), DUMMY_ACTION, jnp.int32),
    )


def push_history(state: HistoryState, obs, is_first, last_action) -> HistoryState:
    """Appends o_t [B, H, W, C] and a_{t-1} [B] to every row, dropping the oldest entry.

    Rows where `is_first` [B] is True start a new episode: their history is
    cleared first, and their a_{-1} is the dummy action whatever `last_action`
    says (the action given on a reset step belongs to the previous episode).
    """
    is_first = jnp.asarray(is_first, bool)
    frames = jnp.where(is_first[:, None, None, None, None], 0.0, state.frames)  # [B, L, H, W, C]
    actions = jnp.where(is_first[:, None], DUMMY_ACTION, state.actions)  # [B, L]
    last_action = jnp.where(is_first, DUMMY_ACTION, jnp.asarray(last_action, jnp.int32))  # [B]
    obs = jnp.asarray(obs, jnp.float32)[:, None]  # [B, 1, H, W, C]
    return HistoryState(
        frames=jnp.concatenate([frames[:, 1:], obs], axis=1),
        actions=jnp.concatenate([actions[:, 1:], last_action[:, None]], axis=1),
    )


def history_input(state: HistoryState, num_actions: int):
    """The representation function's input [B, H, W, L*(C+A)] (see `stack_history`)."""
    return stack_history(state.frames, state.actions, num_actions)
