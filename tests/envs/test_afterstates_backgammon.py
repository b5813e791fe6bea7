"""The exact split of pgx's backgammon step into afterstate and chance outcome (moozi/envs/afterstates.py).

The afterstate is the position after the checker move (with the win check and its reward); where the
move ends the turn the outcome is the next player's roll, one of 21 (`BACKGAMMON_ROLLS`), else one
certain outcome. The split reuses pgx internals (`_update_by_action`, `_winning_step`, `_flip_board`,
`_set_playable_dice`, `_legal_action_mask`, `Env._step_with_illegal_action`); these tests pin them
against the bridge's `step` under many keys, for states from many random games (doubles, checkers on
the bar, bearing off, turns with no legal move, finished games), legal and illegal moves.

pgx rolls an ordered pair of dice, so a roll of two different dice reaches one of two states that differ
only in the order of the dice (`_dice` and the first two `_playable_dice`); the split gives each roll
once, the smaller die first. So a state the step draws is, leaf by leaf over pgx's state and the step
output, either an outcome of the split or that outcome with its two dice swapped (`_swapped`), and
`test_the_order_of_the_dice_changes_nothing_in_the_game` checks that the two orders play alike.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.envs import pgx as pgx_bridge
from moozi.envs.afterstates import BACKGAMMON_ROLLS, EXACT_CHANCE_GAMES, chance_rules_of

NUM_KEYS = 1024  # per (state, action): the rarest roll (a double, 1/36) is drawn ~28 times
NUM_ROLLS = 21
PROBABILITY = np.asarray([(1.0 if a == b else 2.0) / 36.0 for a, b in BACKGAMMON_ROLLS])


@pytest.fixture(scope="module")
def env():
    return pgx_bridge.make("pgx:backgammon")


def _leaves_equal(a, b):
    """Whether two pytrees of the same structure are equal in every leaf (unbatched)."""
    flags = [jnp.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))]
    return jnp.all(jnp.stack(flags))


def _swapped(state):
    """The state with its two dice in the other order, as pgx's ordered roll may give them."""
    return state.replace(_dice=state._dice[::-1], _playable_dice=state._playable_dice[jnp.array([1, 0, 2, 3])])


def _random_states(env, games: int, steps: int, seed: int):
    """Every state of `games` random games of `steps` moves ([games, steps]); a finished game's state
    repeats (pgx's terminal mask is all True, and a move there changes nothing)."""

    def play(key):
        state, _ = env.init(key)

        def one(state, key):
            move_key, step_key = jax.random.split(key)
            legal = state.legal_action_mask
            lib_action = jax.random.choice(move_key, legal.shape[0], p=legal / legal.sum())
            state, _ = env.step(state, lib_action + 1, jnp.bool_(False), step_key)
            return state, state

        _, states = jax.lax.scan(one, state, jax.random.split(key, steps))
        return states

    return jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(seed), games))


def _features(states):
    """What kind of position each state is (numpy, [N] each)."""
    from pgx import backgammon as bg

    board = np.asarray(states._board)
    mask = np.asarray(states.legal_action_mask)
    dice = np.asarray(states._dice)
    terminated = np.asarray(states.terminated)
    live = ~terminated
    return dict(
        terminated=terminated,
        doubles=live & (dice[:, 0] == dice[:, 1]) & (np.asarray(states._played_dice_num) == 0),
        on_bar=live & (board[:, 24] > 0),
        bearing_off=live & np.asarray(jax.vmap(bg._is_all_on_home_board)(states._board)) & (board[:, 26] < 15),
        forced_no_op=live & mask[:, :6].all(-1) & ~mask[:, 6:].any(-1),
        live=live,
    )


def _pick(states, seed, uniform: int, per_kind: int):
    """`uniform` states at random and up to `per_kind` of each kind (`_features`)."""
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), states)
    kinds = _features(flat)
    rng = np.random.default_rng(seed)
    n = kinds["live"].shape[0]
    picks = [rng.choice(n, uniform, replace=False)]
    for name in ("terminated", "doubles", "on_bar", "bearing_off", "forced_no_op"):
        where = np.flatnonzero(kinds[name])
        assert where.size, f"no {name} state among the random games"
        picks.append(rng.choice(where, min(per_kind, where.size), replace=False))
    return jax.tree.map(lambda x: x[np.concatenate(picks)], flat)


def _actions(state, key):
    """Bridge actions to try at `state` [7]: three random legal moves (repeats where fewer), the no-op,
    the dummy, a random masked move and an index out of range."""
    legal = state.legal_action_mask
    legal_key, illegal_key = jax.random.split(key)
    moves = jax.random.choice(legal_key, legal.shape[0], (3,), p=legal / legal.sum())
    masked = ~legal
    p_illegal = jnp.where(masked.any(), masked / masked.sum(), 1.0 / legal.shape[0])
    illegal = jax.random.choice(illegal_key, legal.shape[0], p=p_illegal)
    return jnp.concatenate([moves + 1, jnp.int32([1, 0]), illegal[None] + 1, jnp.int32([legal.shape[0] + 5])])


def _check(env, states, keys_seed=11):
    """For each state and each of its `_actions`: the split against `step` under NUM_KEYS keys."""
    rules = env.chance_rules
    codes = jnp.arange(NUM_ROLLS)
    keys = jax.random.split(jax.random.PRNGKey(keys_seed), NUM_KEYS)

    def per_action(state, action):
        after = rules.afterstate(state, action)
        logits = rules.chance_logits(after)
        outcomes = jax.vmap(rules.outcome, in_axes=(None, 0))(after, codes)  # [C]
        swapped = (jax.vmap(_swapped)(outcomes[0]), outcomes[1])
        drawn = jax.vmap(env.step, in_axes=(None, None, None, 0))(state, action, jnp.bool_(False), keys)  # [K]
        exact = jax.vmap(lambda d: jax.vmap(lambda o: _leaves_equal(d, o))(outcomes))(drawn)  # [K, C]
        other_order = jax.vmap(lambda d: jax.vmap(lambda o: _leaves_equal(d, o))(swapped))(drawn)
        # The other order of the dice only where a roll was drawn (within a turn, only the state itself).
        match = exact | (other_order & after.draws)
        possible = logits > -jnp.inf
        return dict(
            every_draw_is_one_possible_outcome=jnp.all(jnp.sum(match & possible, axis=-1) == 1),
            every_possible_outcome_is_drawn=jnp.all(jnp.any(match, axis=0) | ~possible),
            frequency=jnp.sum(match & possible, axis=0) / NUM_KEYS,
            probability=jax.nn.softmax(logits),
            total=jnp.exp(jax.scipy.special.logsumexp(logits)),
            reward_of_afterstate_is_the_step_reward=jnp.all(outcomes[1].reward == after.reward),
            finite=jnp.all(jnp.isfinite(jax.nn.softmax(logits))),
            draws=after.draws,
            illegal=after.illegal,
            ended=after.ended,
            won=~after.ended & after.state.terminated & ~after.illegal,
            turn_passes=outcomes[1].to_play[0] != after.mover,
            next_forced_no_op=after.draws & jnp.any(jnp.all(outcomes[0].legal_action_mask[:, 6:] == 0, axis=-1)
                                                   & ~outcomes[0].terminated),
            doubles_rolled=~after.draws | jnp.all(jnp.where(jnp.asarray([a == b for a, b in BACKGAMMON_ROLLS]),
                                                            jnp.all(outcomes[0]._playable_dice >= 0, axis=-1), True)),
        )

    def per_state(state, key):
        return jax.vmap(per_action, in_axes=(None, 0))(state, _actions(state, key))

    state_keys = jax.random.split(jax.random.PRNGKey(keys_seed + 1), states.current_player.shape[0])
    out = jax.jit(lambda s, k: jax.lax.map(lambda one: per_state(*one), (s, k)))(states, state_keys)
    return jax.tree.map(np.asarray, out)


def _assert_exact(out, keys=NUM_KEYS):
    for name in ("every_draw_is_one_possible_outcome", "every_possible_outcome_is_drawn",
                 "reward_of_afterstate_is_the_step_reward", "finite", "doubles_rolled"):
        assert out[name].all(), name
    np.testing.assert_allclose(out["total"], 1.0, atol=1e-5)
    np.testing.assert_allclose(out["probability"].sum(-1), 1.0, atol=1e-5)
    # A roll: the 21 rolls at 1/36 and 2/36; otherwise one certain outcome.
    draws = out["draws"]
    np.testing.assert_allclose(out["probability"][draws], np.broadcast_to(PROBABILITY, out["probability"][draws].shape),
                               atol=1e-6)
    assert (out["probability"][~draws][:, 0] == 1.0).all()
    # Each code's share of the draws: within 6 binomial standard deviations of its probability.
    p = out["probability"]
    sd = np.sqrt(p * (1 - p) / keys)
    assert np.all(np.abs(out["frequency"] - p) <= 6 * sd + 1e-6)
    # A roll exactly where the turn passes (after an illegal move too: pgx rolls, then ends the game).
    assert (out["turn_passes"][~out["ended"]] == draws[~out["ended"]]).all()


def test_backgammon_has_the_split(env):
    assert "pgx:backgammon" in EXACT_CHANCE_GAMES
    assert chance_rules_of(env) is env.chance_rules and env.chance_rules.num_chance_outcomes == NUM_ROLLS
    assert len(set(BACKGAMMON_ROLLS)) == NUM_ROLLS and PROBABILITY.sum() == pytest.approx(1.0)
    assert PROBABILITY.min() == pytest.approx(1 / 36) and (PROBABILITY == PROBABILITY.min()).sum() == 6


@pytest.mark.slow  # ~2M pgx steps compared leaf by leaf
def test_backgammon_split_reproduces_step_exactly(env):
    games = _random_states(env, games=48, steps=700, seed=0)  # random games end after 120 to 650 moves
    states = _pick(games, seed=1, uniform=160, per_kind=24)
    out = _check(env, states)
    _assert_exact(out)
    # What was covered: rolls and moves within a turn, wins, finished games, illegal moves, rolls after
    # which the next player has no legal move.
    for name in ("draws", "illegal", "ended", "won", "next_forced_no_op"):
        assert out[name].any(), name
    assert (~out["draws"] & ~out["ended"]).any()  # moves that leave dice to play
    assert (out["draws"] & ~out["illegal"]).any()  # legal moves that end the turn


@pytest.mark.slow
def test_backgammon_split_from_the_opening_under_more_keys(env):
    # The frequencies of the 21 rolls under 8,192 keys, after the no-op (illegal at the opening: the
    # game ends with pgx's penalty of -3, but pgx still rolls) and after each legal first move.
    state, _ = env.init(jax.random.PRNGKey(3))
    keys = jax.random.split(jax.random.PRNGKey(4), 8192)
    rules = env.chance_rules
    outcomes_of = jax.vmap(rules.outcome, in_axes=(None, 0))

    @jax.jit
    def counts(action):
        after = rules.afterstate(state, action)
        outcomes = outcomes_of(after, jnp.arange(NUM_ROLLS))
        drawn = jax.vmap(env.step, in_axes=(None, None, None, 0))(state, action, jnp.bool_(False), keys)
        either = lambda d, o: _leaves_equal(d, o) | _leaves_equal(d, (_swapped(o[0]), o[1]))  # noqa: E731
        same = jax.vmap(lambda d: jax.vmap(lambda o: either(d, o))(outcomes))(drawn)
        return jnp.sum(same, axis=0), after

    count, after = counts(jnp.int32(1))
    assert bool(after.illegal) and bool(after.draws)
    assert count.sum() == 8192
    sd = np.sqrt(PROBABILITY * (1 - PROBABILITY) / 8192)
    assert np.all(np.abs(np.asarray(count) / 8192 - PROBABILITY) <= 5 * sd)
    _, step = rules.outcome(after, jnp.int32(0))
    assert bool(step.is_last) and float(step.reward) == -3.0


@pytest.mark.slow
def test_backgammon_rolls_set_dice_as_pgx_does(env):
    from pgx import backgammon as bg

    state, step = env.init(jax.random.PRNGKey(0))
    rules = env.chance_rules
    # Play the opening's two dice: the first move leaves a die (one certain outcome), the second ends the turn.
    action = jnp.argmax(step.legal_actions)
    after = rules.afterstate(state, action)
    assert not bool(after.draws)
    probs = np.asarray(jax.nn.softmax(rules.chance_logits(after)))
    assert probs[0] == 1.0 and probs[1:].sum() == 0.0
    state, step = rules.outcome(after, jnp.int32(7))  # any code: the certain outcome
    assert int(step.to_play) == int(after.mover) and int(state._played_dice_num) == 1
    after = rules.afterstate(state, jnp.argmax(step.legal_actions))
    assert bool(after.draws)
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(rules.chance_logits(after))), PROBABILITY, rtol=1e-5)
    double = BACKGAMMON_ROLLS.index((4, 4))  # two fives
    rolled, out = rules.outcome(after, jnp.int32(double))
    assert int(out.to_play) == 1 - int(after.mover) and not bool(out.is_last) and float(out.reward) == 0.0
    assert np.asarray(rolled._dice).tolist() == [4, 4] and np.asarray(rolled._playable_dice).tolist() == [4, 4, 4, 4]
    np.testing.assert_array_equal(rolled._board, bg._flip_board(after.state._board))
    # The observation's dice counts are the player to move's: four fives.
    assert np.asarray(rolled.observation)[28:].tolist() == [0, 0, 0, 0, 4, 0]
    rolled, _ = rules.outcome(after, jnp.int32(BACKGAMMON_ROLLS.index((0, 5))))  # a one and a six
    assert np.asarray(rolled._playable_dice).tolist() == [0, 5, -1, -1]


@pytest.mark.slow
def test_backgammon_win_ends_the_game_with_its_score(env):
    from pgx import backgammon as bg

    # The mover has one checker left, on its last point, and the opponent none off and all in the mover's
    # home board: bearing it off wins a backgammon (3 points).
    state, _ = env.init(jax.random.PRNGKey(0))
    board = jnp.zeros(28, jnp.int32).at[23].set(1).at[26].set(14).at[20].set(-15)
    dice = jnp.int32([0, 2])
    state = state.replace(_board=board, _dice=dice, _playable_dice=bg._set_playable_dice(dice),
                          legal_action_mask=bg._legal_action_mask(board, dice))
    action = (23 + 2) * 6 + 0 + 1  # bridge action: from point 23 with the one
    assert bool(state.legal_action_mask[action - 1])
    after = env.chance_rules.afterstate(state, jnp.int32(action))
    assert not bool(after.draws) and not bool(after.illegal) and float(after.reward) == 3.0  # a backgammon
    next_state, out = env.chance_rules.outcome(after, jnp.int32(5))
    stepped, stepped_out = env.step(state, jnp.int32(action), jnp.bool_(False), jax.random.PRNGKey(9))
    assert bool(_leaves_equal((next_state, out), (stepped, stepped_out)))
    assert bool(out.is_last) and float(out.reward) == 3.0


@pytest.mark.slow
def test_the_order_of_the_dice_changes_nothing_in_the_game(env):
    # From freshly rolled positions with two different dice, the game played on with the same moves and
    # keys from the state and from its swapped twin: the same observations, masks, rewards, players and
    # ends at every step, and the same dice up to their order.
    games = _random_states(env, games=16, steps=400, seed=5)
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), games)
    dice = np.asarray(flat._dice)
    fresh = (np.asarray(flat._played_dice_num) == 0) & (dice[:, 0] != dice[:, 1]) & ~np.asarray(flat.terminated)
    picks = np.random.default_rng(0).choice(np.flatnonzero(fresh), 512, replace=False)
    starts = jax.tree.map(lambda x: x[picks], flat)

    def play_on(state, key):
        twin = _swapped(state)

        def one(carry, key):
            state, twin = carry
            move_key, step_key = jax.random.split(key)
            legal = state.legal_action_mask
            action = jax.random.choice(move_key, legal.shape[0], p=legal / legal.sum()) + 1
            state, out = env.step(state, action, jnp.bool_(False), step_key)
            twin, twin_out = env.step(twin, action, jnp.bool_(False), step_key)
            same = _leaves_equal((state.observation, state.legal_action_mask, state.rewards, state.current_player,
                                  state.terminated, state._board, out),
                                 (twin.observation, twin.legal_action_mask, twin.rewards, twin.current_player,
                                  twin.terminated, twin._board, twin_out))
            same &= jnp.array_equal(jnp.sort(state._dice), jnp.sort(twin._dice))
            same &= jnp.array_equal(jnp.sort(state._playable_dice), jnp.sort(twin._playable_dice))
            return (state, twin), same

        _, same = jax.lax.scan(one, (state, twin), jax.random.split(key, 12))
        return jnp.all(same)

    same = jax.jit(jax.vmap(play_on))(starts, jax.random.split(jax.random.PRNGKey(6), 512))
    assert np.asarray(same).all()
