"""A game's step split exactly in two: the afterstate of the move, then the chance outcome.

    state s --move a--> afterstate as --chance outcome c, with its true probability--> state s'

AlphaZero mode with chance nodes (moozi/core/alphazero_chance.py, docs/stochastic.md) searches over
this split: the game's own rules give both halves and the true probabilities of the outcomes, where
Stochastic MuZero learns them. Applying `afterstate` and then `outcome` with a code drawn from
`chance_logits` is the bridge's `step` (without its reset), state for state and output for output
(backgammon: up to the order of two dice, below); tests/envs/test_afterstates.py and
tests/envs/test_afterstates_backgammon.py check it against `step` under many keys.

The split of pgx's generic step (`pgx.core.Env.step`) is here, once for every pgx game:

- a state that has already ended stays as it is with zero rewards (one certain outcome);
- otherwise the step count goes up, the game's move gives the afterstate, and the game's chance
  outcome gives the next state;
- an illegal action (a masked move, the dummy, an index out of range: the bridge's rule, see
  moozi/envs/pgx.py) still moves and draws as pgx does, then ends the game with pgx's penalty;
- a terminated state's legal mask is all True, and the observation is taken last.

What each game adds is its own move, whether chance follows it, and its own chance (`_GameSplit`);
where no chance follows a move, its one certain outcome is code 0 and leaves the afterstate as it is.
Two pgx games have one:

- 2048. Afterstate: the board after the slide and merges, with the move's reward (pgx's own
  `_slide_and_merge` on the turned board). Chance outcome, after every move: a new tile, code
  2 · cell + is_four (32 codes): a 2 with probability 0.9 / E and a 4 with 0.1 / E on each of the
  afterstate's E empty cells; every other code has logit -inf. pgx puts the tile on cell 0 when no
  cell is empty (only after an illegal move on a full board, which then ends the game), and so does
  the split.
- backgammon. pgx plays a turn one die at a time. Afterstate: the position after the checker move
  (pgx's `_update_by_action`; the no-op changes nothing), with the win check and its score (1, 2
  for a gammon, 3 for a backgammon: `_winning_step`). Chance follows only where the move ends the
  turn (no playable die left, or the no-op) and the game goes on: the next player's roll, 21 codes
  (`BACKGAMMON_ROLLS`), the 6 doubles with probability 1/36 and the 15 others with 2/36, and the
  state is pgx's `_change_turn` with that roll (the board turned to the next player's view, the
  dice, the playable dice, four of a double, and the legal mask, the no-op alone where no checker
  can move). Within a turn, and after a win, the outcome is certain. pgx rolls an ordered pair, so
  of a roll of two different dice it reaches one of two states that differ only in the order of
  `_dice` and of the first two `_playable_dice`; the split gives each roll once, the smaller die
  first. The two orders are the same game: the same observation and legal mask, and play goes on
  alike (tests/envs/test_afterstates_backgammon.py plays both on side by side). So for backgammon
  the step is reproduced state for state up to the order of a fresh roll's two dice.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from moozi.envs.base import DUMMY_ACTION, StepOutput

# pgx games whose split is written here, by their moozi names.
EXACT_CHANCE_GAMES = ("pgx:2048", "pgx:backgammon")

Array = jax.Array


class Afterstate(NamedTuple):
    """The game between the move and chance (unbatched; a batch of them is this with a leading axis)."""

    state: Any  # the library's state after the move, before chance; its rewards are the move's
    reward: Array  # float32: the mover's reward for the whole step, as the bridge's step reports it
    ended: Array  # bool: the state had already ended; the step changed nothing (one certain outcome)
    illegal: Array  # bool: the move was illegal; the outcome ends the game with the penalty
    mover: Array  # int32: the library's player who moved
    draws: Array  # bool: chance acts after this move; where False the one certain outcome is code 0


class ChanceRules(Protocol):
    """A game's exact split (unbatched pure functions; vmap them at the call site).

    afterstate(state, action) -> Afterstate: `action` is the bridge's (augmented) index.
    chance_logits(afterstate) -> [C] float32: the log of each outcome's true probability, -inf where
        impossible; at least one outcome is possible, so the logits always make a distribution.
    outcome(afterstate, code) -> (state, StepOutput): the next state and what the bridge's step
        returns for it; `code` is clipped into [0, C).
    """

    num_chance_outcomes: int

    def afterstate(self, state, action) -> Afterstate: ...

    def chance_logits(self, afterstate: Afterstate) -> Array: ...

    def outcome(self, afterstate: Afterstate, code) -> tuple[Any, StepOutput]: ...


class _GameSplit(NamedTuple):
    """One pgx game's `_step(state, action, key)` as move then chance (unbatched)."""

    num_chance_outcomes: int
    # (state with its step count raised, library action) -> (state with the move's rewards, draws): draws
    # is whether chance acts after this move (2048: always; backgammon: where the turn passes).
    move: Callable
    chance_logits: Callable  # (state after a move that draws) -> [C] log-probabilities, -inf where impossible
    chance: Callable  # (state after a move that draws, code) -> the state `_step` returns for that outcome


def _certain(num_codes: int) -> Array:
    """Logits of a distribution certain of code 0."""
    return jnp.full((num_codes,), -jnp.inf, jnp.float32).at[0].set(0.0)


class PgxChanceRules:
    """`ChanceRules` for a pgx game: pgx's generic step around the game's own split (`_GameSplit`).

    `bridge` is the game's `PgxEnv`; the outputs are the ones its `step` gives."""

    def __init__(self, bridge, game: _GameSplit):
        self._bridge = bridge
        self._env = bridge._env
        self._game = game
        self.num_chance_outcomes = game.num_chance_outcomes
        self._num_actions = bridge.spec.num_actions

    def afterstate(self, state, action) -> Afterstate:
        action = jnp.asarray(action, jnp.int32)
        mover = state.current_player
        # The bridge's rule: out-of-range actions and the dummy are illegal, and pgx gets a clipped index.
        in_range = (action > DUMMY_ACTION) & (action < self._num_actions)
        lib_action = jnp.clip(action - 1, 0, self._num_actions - 2)
        illegal = ~(state.legal_action_mask[lib_action] & in_range)
        ended = state.terminated | state.truncated
        moved, draws = self._game.move(state.replace(_step_count=state._step_count + 1), lib_action)
        kept = state.replace(rewards=jnp.zeros_like(state.rewards))
        after = jax.tree.map(lambda a, b: jnp.where(ended, a, b), kept, moved)
        penalized = self._env._step_with_illegal_action(after, mover)  # only its rewards are read here
        rewards = jnp.where(illegal, penalized.rewards, after.rewards)
        return Afterstate(after, rewards[mover].astype(jnp.float32), ended, illegal, mover,
                          jnp.asarray(draws, bool) & ~ended)

    def chance_logits(self, afterstate: Afterstate) -> Array:
        logits = self._game.chance_logits(afterstate.state)
        return jnp.where(afterstate.draws, logits, _certain(self.num_chance_outcomes))

    def outcome(self, afterstate: Afterstate, code) -> tuple[Any, StepOutput]:
        code = jnp.clip(jnp.asarray(code, jnp.int32), 0, self.num_chance_outcomes - 1)
        drawn = self._game.chance(afterstate.state, code)
        state = jax.tree.map(lambda a, b: jnp.where(afterstate.draws, a, b), drawn, afterstate.state)
        penalized = self._env._step_with_illegal_action(state, afterstate.mover)
        state = jax.tree.map(lambda a, b: jnp.where(afterstate.illegal, a, b), penalized, state)
        state = state.replace(legal_action_mask=state.legal_action_mask | state.terminated)
        state = state.replace(observation=self._env.observe(state))
        return state, self._bridge._output(state, state.rewards[afterstate.mover], False)


# ----------------------------------------------------------------------------------------- 2048


def _turned(board_2d, action, sign: int):
    """pgx's 2048 turns the board so that every move slides left: rot90 by `sign` · action."""
    return jax.lax.switch(action, [lambda k=k: jnp.rot90(board_2d, sign * k) for k in range(4)])


def _split_2048() -> _GameSplit:
    from pgx import play2048

    def move(state, action):
        board, reward = jax.vmap(play2048._slide_and_merge)(_turned(state._board.reshape((4, 4)), action, 1))
        board = _turned(board, action, -1)
        return state.replace(_board=board.ravel(), rewards=jnp.float32([reward.sum()])), jnp.bool_(True)

    def chance_logits(state):
        empty = state._board == 0  # [16]
        # pgx's draw of the cell with no empty cell lands on cell 0 (its probabilities are all zero).
        cells = jnp.where(empty.any(), empty, jnp.arange(16) == 0)
        p_cell = cells / cells.sum()
        probs = jnp.stack([0.9 * p_cell, 0.1 * p_cell], axis=-1).reshape(32)  # code 2 · cell + is_four
        return jnp.where(probs > 0, jnp.log(jnp.where(probs > 0, probs, 1.0)), -jnp.inf).astype(jnp.float32)

    def chance(state, code):
        board = state._board.at[code // 2].set(1 + code % 2)  # exponents: 1 is a 2, 2 is a 4
        legal = play2048._legal_action_mask(board.reshape((4, 4)))
        return state.replace(_board=board, legal_action_mask=legal, terminated=~legal.any())

    return _GameSplit(num_chance_outcomes=32, move=move, chance_logits=chance_logits, chance=chance)


# ----------------------------------------------------------------------------------- backgammon

# The 21 rolls as (die, die) in pgx's die values (0 is a one), the smaller first: the 6 doubles have
# probability 1/36 each, the 15 others 2/36 (pgx rolls an ordered pair; both orders are one roll here).
BACKGAMMON_ROLLS = tuple((a, b) for a in range(6) for b in range(a, 6))


def _split_backgammon() -> _GameSplit:
    from pgx import backgammon as bg

    rolls = jnp.asarray(BACKGAMMON_ROLLS, jnp.int32)  # [21, 2]
    logits = jnp.log(jnp.asarray([(1.0 if a == b else 2.0) / 36.0 for a, b in BACKGAMMON_ROLLS], jnp.float32))

    def move(state, action):
        # pgx's `_step` up to its roll: the checker move (a no-op leaves the state as it is), the win
        # check, and whether the turn passes (no playable die left, or the no-op).
        moved = bg._update_by_action(state, action)
        won = bg._is_all_off(moved._board)
        after = jax.tree.map(lambda a, b: jnp.where(won, a, b), bg._winning_step(moved), moved)
        return after, ~won & (bg._is_turn_end(moved) | (action // 6 == 0))

    def chance_logits(state):
        del state  # every turn starts with the same 21 rolls
        return logits

    def chance(state, code):
        # pgx's `_change_turn` with the roll given: the board turned to the next player's view, the dice,
        # the playable dice (four of a double) and the legal mask (the no-op alone where nothing moves).
        dice = rolls[code]
        board = bg._flip_board(state._board)
        return state.replace(current_player=(state.current_player + 1) % 2, _board=board,
                             _turn=(state._turn + 1) % 2, _dice=dice, _playable_dice=bg._set_playable_dice(dice),
                             _played_dice_num=jnp.int32(0), legal_action_mask=bg._legal_action_mask(board, dice))

    return _GameSplit(num_chance_outcomes=len(BACKGAMMON_ROLLS), move=move, chance_logits=chance_logits, chance=chance)


_SPLITS = {"pgx:2048": _split_2048, "pgx:backgammon": _split_backgammon}


def for_pgx(bridge) -> PgxChanceRules | None:
    """The exact split of a pgx bridge's game (`PgxEnv`), or None where none is written."""
    split = _SPLITS.get(bridge.spec.name)
    return None if split is None else PgxChanceRules(bridge, split())


def chance_rules_of(env) -> ChanceRules | None:
    """An env's exact split, or None: the bridges that have one give it as `chance_rules`."""
    return getattr(env, "chance_rules", None)
