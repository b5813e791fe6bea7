"""History stacking (thesis 5.2.6): the last L frames and L actions as one image.

Layout (DESIGN.md): frames o_{t-L+1..t} and actions a_{t-L..t-1} become an
array (H, W, L*(C + A)): first the L frames' channels in time order, then L
one-hot action planes (each divided by A) in time order. Before t = 0 the
frames are zeros and the actions are the dummy action 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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
