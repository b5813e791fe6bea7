"""Final-state targets of territory games (Go): who owns each point at the end, and by how much the
game was won (KataGo's ownership and score targets; Wu 2019, "Accelerating Self-Play Learning in Go").

A won or lost game gives each of its positions one bit of value target. Its final board gives 81
more (on 9x9): for every point, whether it ended as the mover's, the opponent's or nobody's. That
is a label about life and death at every position of the game, and KataGo measured ownership and
score targets together as worth about 1.65x the self-play compute to the same strength.

The count is Tromp-Taylor's area, the one pgx and OpenSpiel score with: a point belongs to a colour
when it holds one of its stones, or is empty and every empty region around it reaches stones of that
colour alone. The score margin is the mover's area minus the opponent's, minus komi when the mover
is black and plus komi when white. Both are read from the episode's last observation (where each
bridge shows its board: `EnvSpec.territory`) and turned to the view of the player to move at each
stored position: in a game whose turns alternate, that is the last position's mover when the two
are an even number of plies apart, the opponent otherwise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from moozi.envs.base import TerritorySpec


def _spread(reached, empty):
    """One step of the flood fill: empty points next to a reached point are reached. [H, W] bool."""
    padded = jnp.pad(reached, 1)
    near = padded[:-2, 1:-1] | padded[2:, 1:-1] | padded[1:-1, :-2] | padded[1:-1, 2:]
    return reached | (empty & near)


def _reach(stones, empty):
    """The stones and every empty point connected to them through empty points. [H, W] bool."""

    def not_done(carry):
        return carry[1]

    def grow(carry):
        reached, _ = carry
        grown = _spread(reached, empty)
        return grown, jnp.any(grown != reached)

    reached, _ = jax.lax.while_loop(not_done, grow, (stones, jnp.bool_(True)))
    return reached


def area_ownership(own, other):
    """[H, W] float32 in {1, 0, -1}: each point's Tromp-Taylor owner from `own`'s side, given the
    [H, W] bool stones of each side."""
    empty = ~own & ~other
    reaches_own, reaches_other = _reach(own, empty), _reach(other, empty)
    mine = own | (empty & reaches_own & ~reaches_other)
    theirs = other | (empty & reaches_other & ~reaches_own)
    return mine.astype(jnp.float32) - theirs.astype(jnp.float32)


def final_ownership_and_score(obs, territory: TerritorySpec):
    """(ownership [H, W], score margin []) of one observation's board, from its mover's view."""
    obs = jnp.asarray(obs, jnp.float32)
    first, second = obs[..., territory.first_plane] > 0.5, obs[..., territory.second_plane] > 0.5
    white_to_move = obs[..., territory.white_to_move_plane].max() > 0.5
    if territory.relative:
        own, other = first, second
    else:  # black's and white's planes
        own = jnp.where(white_to_move, second, first)
        other = jnp.where(white_to_move, first, second)
    ownership = area_ownership(own, other)
    komi = jnp.where(white_to_move, territory.komi, -territory.komi)
    return ownership, jnp.sum(ownership) + komi


def territory_targets(final_obs, plies_to_end, territory: TerritorySpec):
    """Ownership [B, H, W] and score margin [B] for positions `plies_to_end` [B] plies before the
    last observation `final_obs` [B, H, W, C] of their episode, each from its own mover's view."""
    ownership, score = jax.vmap(lambda o: final_ownership_and_score(o, territory))(final_obs)
    sign = jnp.where(jnp.asarray(plies_to_end) % 2 == 0, 1.0, -1.0).astype(jnp.float32)
    return ownership * sign[:, None, None], score * sign
