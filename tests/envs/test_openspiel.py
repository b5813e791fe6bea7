"""The OpenSpiel bridge against real OpenSpiel games."""

from __future__ import annotations

import functools

import numpy as np
import pyspiel
import pytest

import moozi.envs.testing as conformance
from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, StepOutput
from moozi.envs.openspiel import OpenSpielEnv, known_games, make
from moozi.errors import IllegalActionError, MooziError, UnknownGameError, UnsupportedGameError

GO9 = "go(board_size=9,komi=7.5)"


@pytest.mark.parametrize(
    "game, num_steps",
    [("tic_tac_toe", 300), ("connect_four", 300), (GO9, 40), ("pig", 300), ("catch", 60), ("2048", 40)],
)
def test_conformance(game, num_steps):
    conformance.check_host_env(functools.partial(make, game), seed=3, num_steps=num_steps)


@pytest.mark.parametrize("game", ["hex(board_size=5)", "othello", "breakthrough(rows=6,columns=6)", "clobber"])
def test_games_declared_binary_have_binary_observations(game):
    env = make(game)
    assert env.spec.binary_obs
    conformance.check_host_env(functools.partial(make, game), num_steps=60)  # checks every value is 0 or 1


# Channels of player 0's and player 1's pieces in the library's tensor, read off OpenSpiel's own
# rendering: tic-tac-toe's planes are (empty, o, x) and x moves first; connect_four's are (x, o, empty).
PIECE_CHANNELS = {"tic_tac_toe": (2, 1), "connect_four": (0, 1)}


def _library_obs(env: OpenSpielEnv, player: int) -> np.ndarray:
    """What the bridge should show `player`: the library's tensor, made player-relative for two players."""
    shape = env.game.observation_tensor_shape()
    tensor = np.asarray(env.state.observation_tensor(player), np.float32).reshape(shape)
    if len(shape) == 3:
        tensor = tensor.transpose(1, 2, 0)
    elif len(shape) == 2:
        tensor = tensor[..., None]
    else:
        tensor = tensor.reshape(1, 1, -1)
    if env.spec.num_players == 1:
        return tensor
    name = env.game.get_type().short_name
    if name in PIECE_CHANNELS:
        own, other = PIECE_CHANNELS[name][player], PIECE_CHANNELS[name][1 - player]
        rest = [c for c in range(tensor.shape[-1]) if c not in (own, other)]
        tensor = tensor[..., [own, other, *rest]]
    to_play = np.full((*tensor.shape[:2], 1), player, np.float32)
    return np.concatenate([tensor, to_play], axis=-1)


@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four", GO9, "pig"])
def test_mask_and_obs_match_the_library_from_the_player_to_move(game):
    env = make(game, seed=1)
    rng = np.random.default_rng(1)
    out = env.reset()
    for _ in range(60):
        state = env.state
        assert not state.is_chance_node()  # chance is resolved inside the bridge
        if out.is_last:
            np.testing.assert_array_equal(np.flatnonzero(out.legal_actions), [DUMMY_ACTION])
        else:
            assert out.to_play == state.current_player()
            np.testing.assert_array_equal(np.flatnonzero(out.legal_actions), np.asarray(state.legal_actions()) + 1)
        np.testing.assert_array_equal(out.obs, _library_obs(env, int(out.to_play)))
        assert out.obs.flags.c_contiguous
        out = env.step(int(rng.choice(np.flatnonzero(out.legal_actions))), out.is_last)


def test_list_path_equals_observer_path():
    fast, slow = make(GO9, seed=0), make(GO9, seed=0)
    slow._observer = slow._set_from = None  # the fallback for games without a default observer
    a, b = fast.reset(), slow.reset()
    for action in [41, 42, 31, 1, 82]:
        np.testing.assert_array_equal(a.obs, b.obs)
        a, b = fast.step(action, a.is_last), slow.step(action, b.is_last)
    np.testing.assert_array_equal(a.obs, b.obs)


def _play(env: OpenSpielEnv, library_actions: list[int]) -> list[StepOutput]:
    outs = [env.reset()]
    for action in library_actions:
        outs.append(env.step(action + 1, outs[-1].is_last))
    return outs


def test_scripted_win_rewards_the_player_who_just_acted():
    # x: cells 0, 1, 2 (top row); o: cells 3, 4. x wins with its third move.
    outs = _play(make("tic_tac_toe"), [0, 3, 1, 4, 2])
    assert [float(o.reward) for o in outs] == [0, 0, 0, 0, 0, 1]
    assert [bool(o.is_last) for o in outs] == [False] * 5 + [True]
    assert [int(o.to_play) for o in outs] == [0, 1, 0, 1, 0, 1]
    final = outs[-1]
    # At the terminal step to_play is the loser (the player who would move next); its view is -reward.
    assert final.to_play == 1 and -final.reward == -1
    np.testing.assert_array_equal(np.flatnonzero(final.legal_actions), [DUMMY_ACTION])


def test_scripted_win_by_second_player():
    outs = _play(make("tic_tac_toe"), [0, 3, 1, 4, 8, 5])  # o completes the middle row
    assert [float(o.reward) for o in outs] == [0, 0, 0, 0, 0, 0, 1]
    assert outs[-1].is_last and outs[-1].to_play == 0


def test_draw_gives_zero_reward():
    outs = _play(make("tic_tac_toe"), [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert all(float(o.reward) == 0 for o in outs)
    assert outs[-1].is_last and not any(o.is_last for o in outs[:-1])
    assert outs[-1].to_play == 1  # x made the last move


def test_rewards_per_step_sum_to_the_library_return():
    # 2048 pays a reward on every merge (reward model REWARDS), interleaved with chance tiles.
    env = make("2048", seed=5)
    assert env.game.get_type().reward_model == pyspiel.GameType.RewardModel.REWARDS
    rng = np.random.default_rng(5)
    out, total = env.reset(), 0.0
    for _ in range(200):
        out = env.step(int(rng.choice(np.flatnonzero(out.legal_actions))), False)
        total += float(out.reward)
        assert out.to_play == SINGLE_AGENT
        if out.is_last:
            break
    assert total > 0
    assert total == pytest.approx(env.state.returns()[0])


def test_chance_game_is_reproducible_from_the_seed_and_varies_across_seeds():
    game = pyspiel.load_game("pig")
    assert game.get_type().chance_mode == pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC

    def rollout(seed):
        env = make("pig", seed=seed)
        out, obs = env.reset(), []
        for _ in range(100):
            out = env.step(1 if not out.is_last else 0, out.is_last)  # always "roll"
            obs.append(out.obs)
        return np.stack(obs)

    np.testing.assert_array_equal(rollout(7), rollout(7))
    assert not np.array_equal(rollout(7), rollout(8))


def test_illegal_actions_name_the_action_and_the_legal_set():
    env = make("tic_tac_toe")
    out = env.reset()
    out = env.step(5, out.is_last)  # x takes the centre (library action 4)
    with pytest.raises(IllegalActionError) as info:
        env.step(5, False)
    assert str(info.value) == "action 5 is illegal in openspiel:tic_tac_toe; legal: [1, 2, 3, 4, 6, 7, 8, 9]"
    with pytest.raises(IllegalActionError, match=r"^action 0 is illegal"):
        env.step(DUMMY_ACTION, False)
    with pytest.raises(IllegalActionError, match=r"^action 10 is illegal"):
        env.step(10, False)
    # The refused actions left the game untouched: o is still to move.
    assert env.step(1, False).to_play == 0


def test_stepping_past_the_end_without_is_last_is_refused():
    env = make("tic_tac_toe")
    outs = _play(env, [0, 3, 1, 4, 2])
    with pytest.raises(IllegalActionError, match="pass is_last=True"):
        env.step(DUMMY_ACTION, False)
    out = env.step(7, outs[-1].is_last)  # any action with is_last=True resets
    assert out.is_first and out.reward == 0 and out.to_play == 0


@pytest.mark.parametrize(
    "game, reason",
    [
        ("matrix_rps", "simultaneous-move"),
        ("goofspiel", "simultaneous-move"),
        ("kuhn_poker(players=3)", "3 players"),
        ("bargaining", "general-sum"),
        ("phantom_ttt_ir", "no observation tensor"),
    ],
)
def test_unsupported_games_say_why(game, reason):
    with pytest.raises(UnsupportedGameError, match=reason) as info:
        make(game)
    assert "\n" not in str(info.value)


def test_unknown_games_and_bad_parameters_are_user_errors():
    with pytest.raises(UnknownGameError, match="openspiel:tic_tac_toe"):
        make("tic_tac_tow")
    with pytest.raises(MooziError, match="board_sze"):
        make("go(board_sze=9)")


def test_spec_and_helpers():
    env = make(GO9)
    assert env.spec.name == "openspiel:go(board_size=9,komi=7.5)"
    assert env.spec.obs_shape == (9, 9, 5) and env.spec.num_actions == 83 and env.spec.num_players == 2
    assert env.spec.max_episode_steps == env.game.max_game_length()
    assert make("leduc_poker").spec.obs_shape == (1, 1, 17)  # 1-D tensors are vectors (+ the to-play feature)
    assert make("catch").spec.obs_shape == (10, 5, 1)  # 2-D tensors are one-channel grids
    ttt = make("tic_tac_toe")
    ttt.reset()
    assert ttt.render() == str(ttt.state)
    assert ttt.action_to_string(1) == ttt.state.action_to_string(0, 0)
    assert ttt.action_to_string(DUMMY_ACTION) == "<dummy>"


def test_known_games_lists_playable_games_only():
    games = known_games()
    assert {"tic_tac_toe", "connect_four", "go", "pig", "chess"} <= set(games)
    assert not {"matrix_rps", "goofspiel", "morpion_solitaire"} & set(games)


class _Float64Rewards:
    """A broken bridge: rewards as Python floats. The conformance suite must notice."""

    def __init__(self):
        self._env = make("tic_tac_toe")
        self.spec = self._env.spec

    def reset(self, seed=None):
        return self._env.reset(seed)._replace(reward=0.0)

    def step(self, action, is_last):
        return self._env.step(action, is_last)._replace(reward=0.0)

    def close(self):
        pass


class _NoIllegalCheck(_Float64Rewards):
    """A broken bridge: takes the dummy action silently."""

    def reset(self, seed=None):
        return self._env.reset(seed)

    def step(self, action, is_last):
        if action == DUMMY_ACTION and not is_last:
            return self._env._last
        return self._env.step(action, is_last)


@pytest.mark.parametrize("broken", [_Float64Rewards, _NoIllegalCheck])
def test_conformance_suite_catches_broken_bridges(broken):
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        conformance.check_host_env(broken, num_steps=20)


# ----------------------------------------------- the fast path used by VectorEnv
class _Batch:
    """Batch arrays laid out as VectorEnv keeps them, filled with junk so unwritten fields show."""

    def __init__(self, spec, num_envs: int = 3):
        self.obs = np.full((num_envs, *spec.obs_shape), -7.5, np.float32)
        self.is_first = np.ones(num_envs, bool)
        self.is_last = np.ones(num_envs, bool)
        self.reward = np.full(num_envs, 99.0, np.float32)
        self.legal_actions = np.ones((num_envs, spec.num_actions), bool)
        self.to_play = np.full(num_envs, 7, np.int32)

    def row(self, i: int) -> StepOutput:
        return StepOutput(*(np.array(getattr(self, name)[i]) for name in StepOutput._fields))


def _assert_bitwise(a: StepOutput, b: StepOutput, where="") -> None:
    for field in StepOutput._fields:
        x, y = np.asarray(getattr(a, field)), np.asarray(getattr(b, field))
        assert (x.dtype, x.shape) == (y.dtype, y.shape), (where, field, x.dtype, y.dtype, x.shape, y.shape)
        assert x.tobytes() == y.tobytes(), (where, field, x, y)


def _assert_same_snapshot(a: dict, b: dict, where="") -> None:
    assert sorted(a) == sorted(b), where
    for key in a:
        assert (a[key].dtype, a[key].shape) == (b[key].dtype, b[key].shape), (where, key)
        assert a[key].tobytes() == b[key].tobytes(), (where, key)


def _no_observer(env: OpenSpielEnv) -> OpenSpielEnv:
    env._observer = env._set_from = None  # the observation_tensor fallback
    return env


@pytest.mark.parametrize(
    "game, observer",
    [
        ("tic_tac_toe", True),
        ("tic_tac_toe", False),
        ("connect_four", True),
        ("pig", True),
        ("2048", True),
        ("catch", True),
    ],
)
def test_fast_path_is_bit_identical_to_step(game, observer):
    """step_into/reset_into write exactly what step/reset return, across episode ends and forced resets."""
    plain, fast = make(game, seed=4), make(game, seed=4)
    if not observer:
        plain, fast = _no_observer(plain), _no_observer(fast)
    batch, index = _Batch(fast.spec), 1
    rng = np.random.default_rng(0)
    out = plain.reset()
    assert fast.reset_into(None, batch, index) is None
    _assert_bitwise(batch.row(index), out, "reset")
    episode_ends = 0
    for t in range(400):
        is_last = bool(out.is_last) or rng.random() < 0.01  # now and then a reset mid-episode
        action = int(rng.choice(np.flatnonzero(out.legal_actions)))
        out = plain.step(action, is_last)
        fast.step_into(action, is_last, batch, index)
        _assert_bitwise(batch.row(index), out, f"step {t}")
        episode_ends += bool(out.is_last)
        if t % 37 == 0:
            _assert_same_snapshot(fast.get_state(), plain.get_state(), f"snapshot at step {t}")
    assert episode_ends >= 2
    # The other rows were never touched.
    assert (batch.obs[[0, 2]] == -7.5).all() and (batch.to_play[[0, 2]] == 7).all()
    # reset_into with a seed equals reset with that seed.
    out = plain.reset(seed=11)
    fast.reset_into(11, batch, index)
    _assert_bitwise(batch.row(index), out, "reseeded")


def test_fast_path_errors_are_the_same_and_change_nothing():
    plain, fast = make("tic_tac_toe"), make("tic_tac_toe")
    batch = _Batch(fast.spec)
    plain.reset()
    fast.reset_into(None, batch, 0)
    plain.step(5, False)
    fast.step_into(5, False, batch, 0)
    before = batch.row(0)
    for action in [5, DUMMY_ACTION, 10, -1]:
        with pytest.raises(IllegalActionError) as expected:
            plain.step(action, False)
        with pytest.raises(IllegalActionError) as got:
            fast.step_into(action, False, batch, 0)
        assert str(got.value) == str(expected.value)
        _assert_bitwise(batch.row(0), before, f"after illegal {action}")
    # Play on to the end; stepping past it without is_last is refused the same way.
    for action in [1, 3, 2, 7]:  # o takes cell 0, x 2, o 1, x 6: x wins on the diagonal 2-4-6
        out = plain.step(action, False)
        fast.step_into(action, False, batch, 0)
        _assert_bitwise(batch.row(0), out)
    assert out.is_last
    with pytest.raises(IllegalActionError, match="pass is_last=True") as expected:
        plain.step(DUMMY_ACTION, False)
    with pytest.raises(IllegalActionError) as got:
        fast.step_into(DUMMY_ACTION, False, batch, 0)
    assert str(got.value) == str(expected.value)


def test_fast_path_mixes_with_step_and_snapshots():
    """Switching between step, step_into, other rows and snapshots plays one consistent game."""
    reference, env = make("pig", seed=2), make("pig", seed=2)
    batch = _Batch(env.spec)
    rng = np.random.default_rng(3)
    out = reference.reset()
    env.reset_into(None, batch, 2)
    for t in range(160):
        action = int(rng.choice(np.flatnonzero(out.legal_actions)))
        is_last = bool(out.is_last)
        before = reference.get_state()
        out = reference.step(action, is_last)
        kind = t % 4
        if kind == 0:  # the plain path after the fast one
            _assert_bitwise(env.step(action, is_last), out, f"step {t}")
        elif kind == 1:  # the fast path after the plain one
            env.step_into(action, is_last, batch, 2)
            _assert_bitwise(batch.row(2), out, f"step_into {t}")
        elif kind == 2:  # a row of another batch; a refused action there loses nothing
            batch = _Batch(env.spec)
            if not is_last:
                with pytest.raises(IllegalActionError):
                    env.step_into(DUMMY_ACTION, False, batch, 0)
                _assert_same_snapshot(env.get_state(), before, f"refused {t}")
            env.step_into(action, is_last, batch, 0)
            _assert_bitwise(batch.row(0), out, f"moved {t}")
        else:  # a snapshot of the rows restores into a fresh env that goes on with step_into
            snapshot = env.get_state()
            _assert_same_snapshot(snapshot, before, f"snapshot {t}")
            env = make("pig")
            env.set_state(snapshot)
            env.step_into(action, is_last, batch, 1)
            _assert_bitwise(batch.row(1), out, f"restored {t}")


def test_connect_four_shows_the_mover_its_own_pieces_first():
    # x (player 0) drops in column 3, o (player 1) in column 4, x again in column 3.
    outs = _play(make("connect_four"), [3, 4, 3])
    bottom = 0  # row 0 of OpenSpiel's tensor is the bottom of the board
    first, second, third = outs[1].obs, outs[2].obs, outs[3].obs
    # After x's first move o moves: o has no pieces, x's piece is the opponent's.
    assert first[..., 0].sum() == 0 and first[bottom, 3, 1] == 1 and first[..., 1].sum() == 1
    assert (first[..., 3] == 1).all()  # to_play plane: player 1
    # After o's move x moves: x's piece first, o's second.
    assert second[bottom, 3, 0] == 1 and second[..., 0].sum() == 1
    assert second[bottom, 4, 1] == 1 and second[..., 1].sum() == 1
    assert (second[..., 3] == 0).all()
    # Empty cells stay where the library puts them.
    assert second[..., 2].sum() == 42 - 2 and third[..., 2].sum() == 42 - 3


def _two_player_games() -> list[str]:
    names = []
    for name in known_games():
        try:
            game = pyspiel.load_game(name)
        except pyspiel.SpielError:
            continue
        if game.num_players() == 2:
            names.append(name)
    return names


@pytest.mark.parametrize("game", _two_player_games())
def test_every_two_player_game_tells_the_network_who_moves(game):
    """Values are from the player to move, so the obs must say who that is: the same board shown to
    the other player differs, and the last channel is `to_play`."""
    try:
        env = make(game, seed=0)
    except UnsupportedGameError:
        pytest.skip(f"{game} is not playable by moozi")
    rng = np.random.default_rng(0)
    out = env.reset()
    for _ in range(12):
        if out.is_last:
            break
        mover = int(out.to_play)
        assert (out.obs[..., -1] == mover).all()
        other = env._observe(env.state, 1 - mover)
        assert not np.array_equal(out.obs, other)
        out = env.step(int(rng.choice(np.flatnonzero(out.legal_actions))), False)


def test_step_output_at_refuses_chance_and_terminal_states():
    env = OpenSpielEnv("pig")
    state = env.game.new_initial_state()
    state.apply_action(0)  # "roll": the die is next
    assert state.is_chance_node()
    with pytest.raises(MooziError, match="chance node"):
        env.step_output_at(state)
    ttt = OpenSpielEnv("tic_tac_toe")
    won = ttt.game.new_initial_state()
    for action in (0, 3, 1, 4, 2):  # x takes the top row
        won.apply_action(action)
    with pytest.raises(MooziError, match="terminal"):
        ttt.step_output_at(won)
    # A decision state still gets its output, from the mover's view.
    assert OpenSpielEnv("pig").step_output_at(env.game.new_initial_state()).to_play == 0
