"""A simple backgammon opponent for pgx's backgammon: a greedy pip-count bot.

pgx plays a backgammon turn one checker move (one die) at a time; this bot
tries every legal checker move, looks at the board after it and keeps the one
with the best score for the mover:

    score = (opponent's pip count - own pip count) - 8 * own exposed blots + 2 * own made points

(a won game scores above everything). The pip counts reward running home and
hitting (a hit checker goes back 25 pips); the blot and point terms are the
first safety rules a beginner learns. It is greedy one die at a time, so it
sees neither the second die nor the opponent's reply: a recognisable
beginner, far above a random mover and far below GNU Backgammon.

The board (pgx's `_board`, 28 counts) is the player to move's view: indices
0..23 are the points from the mover's 24-point to its 1-point (the mover runs
towards 23 and bears off from 18..23), positive counts the mover's checkers,
negative the opponent's; 24 is the mover's bar, 25 the opponent's (negative),
26 and 27 the checkers borne off. pgx turns the board round (reversed and
negated) when the turn passes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

_BLOT_PENALTY = 8.0
_POINT_BONUS = 2.0
_WIN_SCORE = 1e6
_BAR, _OPPONENT_BAR = 24, 25


def flip_board(board: jax.Array) -> jax.Array:
    """The same position from the other player's side (pgx's own turn change)."""
    return -jnp.concatenate([board[23::-1], board[25:23:-1], board[27:25:-1]])


def pip_count_score(board: jax.Array) -> jax.Array:
    """The bot's score of a board seen by the player it belongs to (module docstring)."""
    board = board.astype(jnp.float32)
    points = board[:24]
    own, opponent = jnp.maximum(points, 0.0), jnp.maximum(-points, 0.0)
    index = jnp.arange(24, dtype=jnp.float32)
    own_pips = jnp.sum(own * (24.0 - index)) + 25.0 * board[_BAR]
    opponent_pips = jnp.sum(opponent * (index + 1.0)) + 25.0 * -board[_OPPONENT_BAR]
    # A blot is exposed when an opponent checker can still reach it: one on a point the opponent
    # has not yet passed (a higher index: the opponent runs towards 0) or on the bar.
    opponent_behind = jnp.cumsum(opponent[::-1])[::-1] - opponent  # opponent checkers on higher points
    exposed = (points == 1) & ((opponent_behind > 0) | (board[_OPPONENT_BAR] < 0))
    made = points >= 2
    return opponent_pips - own_pips - _BLOT_PENALTY * jnp.sum(exposed) + _POINT_BONUS * jnp.sum(made)


def pip_count_actions(library_env, states, key) -> jax.Array:
    """The bot's library action for each of a batch of pgx backgammon states (jit it)."""
    num_actions = states.legal_action_mask.shape[-1]
    actions = jnp.arange(num_actions, dtype=jnp.int32)

    def choose(state, key):
        mover = state.current_player

        def after(action):
            child = library_env.step(state, action, key)  # the key only rolls the next turn's dice
            board = jnp.where(child.current_player == mover, child._board, flip_board(child._board))
            won = child.terminated & (child.rewards[mover] > 0)
            return jnp.where(won, _WIN_SCORE, pip_count_score(board))

        scores = jax.vmap(after)(actions)
        return jnp.argmax(jnp.where(state.legal_action_mask, scores, -jnp.inf)).astype(jnp.int32)

    return jax.vmap(choose)(states, jax.random.split(key, states.legal_action_mask.shape[0]))


@functools.lru_cache(maxsize=1)
def pip_count_policy():
    """The bot on pgx's backgammon as one jitted `(states, key) -> library actions`, built once per process."""
    import pgx

    library_env = pgx.make("backgammon")
    return jax.jit(lambda states, key: pip_count_actions(library_env, states, key))
