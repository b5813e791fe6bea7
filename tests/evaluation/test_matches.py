"""Evaluation against opponents: Wilson intervals, opponents, seat scheduling, results as JSON."""

import math

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import mcts

from moozi.errors import MooziError
from moozi.evaluation.matches import (
    EvalResult,
    ReturnResult,
    evaluate,
    make_opponent,
    random_opening,
    result_from_json,
    wilson_interval,
)

TTT = pyspiel.load_game("tic_tac_toe")


class OpponentAgent:
    """A stand-in agent whose bot is one of evaluation's own opponents."""

    def __init__(self, spec: str, game: pyspiel.Game = TTT, seed: int = 7):
        self.spec, self.game, self.seed = spec, game, seed

    def as_openspiel_bot(self, player_id):
        return make_opponent(self.spec, self.game, player_id, self.seed + player_id)


class _SeatRecordingBot(pyspiel.Bot):
    def __init__(self, player_id, log):
        pyspiel.Bot.__init__(self)
        self._inner = pyspiel.make_uniform_random_bot(player_id, 3 + player_id)
        self._player_id, self._log = player_id, log

    def restart_at(self, state):
        # OpenSpiel's evaluate_bots restarts every bot once per game, at the game's start.
        self._log.append((self._player_id, tuple(state.history())))

    def step(self, state):
        assert state.current_player() == self._player_id
        return self._inner.step(state)


class SeatRecordingAgent:
    def __init__(self):
        self.log = []

    @property
    def seats(self):
        return [seat for seat, _ in self.log]

    @property
    def starts(self):
        """The action history each game started from."""
        return [start for _, start in self.log]

    def as_openspiel_bot(self, player_id):
        return _SeatRecordingBot(player_id, self.log)


# ------------------------------------------------------------------ statistics
@pytest.mark.parametrize(
    "successes, n, expected",
    [
        (8, 10, (0.4902, 0.9433)),  # centre 0.71674, half-width 0.22658 by hand
        (0, 10, (0.0, 0.2775)),
        (10, 10, (0.7225, 1.0)),
        (50, 100, (0.4038, 0.5962)),
    ],
)
def test_wilson_interval_matches_hand_computed_numbers(successes, n, expected):
    lo, hi = wilson_interval(successes, n)
    assert lo == pytest.approx(expected[0], abs=1e-4)
    assert hi == pytest.approx(expected[1], abs=1e-4)


def test_wilson_interval_contains_the_rate_and_narrows_with_more_games():
    for wins, n in [(1, 3), (30, 90), (300, 900)]:
        lo, hi = wilson_interval(wins, n)
        assert 0.0 <= lo < wins / n < hi <= 1.0
    assert np.diff(wilson_interval(300, 900)) < np.diff(wilson_interval(30, 90))


# ------------------------------------------------------------------ opponents
def test_minimax_never_loses_to_random_and_plays_both_seats_equally():
    result = evaluate(OpponentAgent("minimax"), "tic_tac_toe", "random", num_games=100, seed=0)
    assert isinstance(result, EvalResult)
    assert result.games == 100 and result.losses == 0
    assert result.wins + result.draws == 100 and result.wins > 50
    assert [(s.player, s.games) for s in result.per_seat] == [(0, 50), (1, 50)]
    assert result.loss_rate_ci == wilson_interval(0, 100)


def test_minimax_draws_against_itself():
    result = evaluate(OpponentAgent("minimax"), "tic_tac_toe", "minimax", num_games=20, seed=1)
    assert result.draws == 20 and result.draw_rate == 1.0


def test_random_never_beats_minimax():
    result = evaluate(OpponentAgent("random"), "tic_tac_toe", "minimax", num_games=40, seed=2)
    assert result.wins == 0 and result.losses > 0


def test_minimax_varies_its_play_among_optimal_moves():
    first_moves = {make_opponent("minimax", TTT, 0, seed).step(TTT.new_initial_state()) for seed in range(20)}
    assert len(first_moves) > 1  # every first move draws in tic-tac-toe, so seeds pick different ones
    same_seed = {make_opponent("minimax", TTT, 0, 3).step(TTT.new_initial_state()) for _ in range(5)}
    assert len(same_seed) == 1


def test_minimax_takes_an_immediate_win():
    state = TTT.new_initial_state()
    for action in (0, 3, 1, 4):  # x x . / o o . / . . .: x wins at 2
        state.apply_action(action)
    assert all(make_opponent("minimax", TTT, 0, seed).step(state) == 2 for seed in range(5))


def test_seats_alternate_and_are_fixed_before_play():
    agent = SeatRecordingAgent()
    result = evaluate(agent, "tic_tac_toe", "random", num_games=5, seed=0)
    assert agent.seats == [0, 1, 0, 1, 0]
    assert [s.games for s in result.per_seat] == [3, 2]
    assert sum(s.wins + s.draws + s.losses for s in result.per_seat) == 5


def test_opening_moves_start_each_pair_of_games_from_one_random_position():
    agent = SeatRecordingAgent()
    result = evaluate(agent, "tic_tac_toe", "random", num_games=6, seed=4, opening_moves=3)
    starts = agent.starts
    assert len(starts) == 6 and all(len(start) == 3 for start in starts)
    assert starts[0] == starts[1] and starts[2] == starts[3] and starts[4] == starts[5]
    assert len({starts[0], starts[2], starts[4]}) == 3
    assert [s.games for s in result.per_seat] == [3, 3] and result.opening_moves == 3
    assert "3 random opening plies per pair of games" in result.format_table()
    assert EvalResult.from_json(result.to_json()) == result
    again = SeatRecordingAgent()
    evaluate(again, "tic_tac_toe", "random", num_games=6, seed=4, opening_moves=3)
    assert again.starts == starts
    plain = SeatRecordingAgent()
    evaluate(plain, "tic_tac_toe", "random", num_games=2, seed=4)
    assert plain.starts == [(), ()]


@pytest.mark.parametrize("game_name, plies", [("tic_tac_toe", 9), ("connect_four", 60)])
def test_random_openings_never_end_the_game(game_name, plies):
    game = pyspiel.load_game(game_name)
    rng = np.random.RandomState(0)
    for _ in range(20):
        state = random_opening(game, plies, rng)
        assert not state.is_terminal() and state.legal_actions()


@pytest.mark.parametrize("opening_moves", [-1, 1.5, True])
def test_opening_moves_must_be_a_non_negative_integer(opening_moves):
    with pytest.raises(MooziError, match="opening moves"):
        evaluate(SeatRecordingAgent(), "tic_tac_toe", "random", num_games=2, seed=0, opening_moves=opening_moves)


def test_evaluation_is_reproducible_from_the_seed():
    runs = [evaluate(OpponentAgent("random"), "tic_tac_toe", "random", num_games=30, seed=5) for _ in range(2)]
    assert runs[0] == runs[1]


def test_chance_games_are_played_with_seeded_chance():
    game = "openspiel:pig(winscore=10)"
    agent = OpponentAgent("random", pyspiel.load_game("pig(winscore=10)"))
    first, second = (evaluate(agent, game, "random", num_games=6, seed=3) for _ in range(2))
    assert first == second and first.games == 6


def test_mcts_opponent_constructs_and_plays_connect_four():
    game = pyspiel.load_game("connect_four")
    bot = make_opponent("mcts:8", game, 1, seed=0)
    assert isinstance(bot, mcts.MCTSBot) and bot.max_simulations == 8 and bot.uct_c == 2 and bot.solve
    result = evaluate(OpponentAgent("random", game), "connect_four", "mcts:8", num_games=2, seed=0)
    assert result.games == 2 and result.game == "openspiel:connect_four"


def test_minimax_refuses_games_too_large_to_solve():
    with pytest.raises(MooziError, match=r"connect_four.*mcts:N"):
        make_opponent("minimax", pyspiel.load_game("connect_four"), 0, 0)


def test_minimax_says_when_counting_ran_out_of_time_rather_than_positions(monkeypatch):
    import moozi.evaluation.matches as matches

    tic_tac_toe = pyspiel.load_game("tic_tac_toe")
    assert matches._too_large(tic_tac_toe) is None
    monkeypatch.setattr(matches, "_MAX_COUNT_SECONDS", 0.0)  # a loaded machine: the wait runs out first
    assert matches._too_large(tic_tac_toe).startswith("counting its positions took over 0 s")
    assert matches._too_large(pyspiel.load_game("connect_four")).startswith("counting")  # not "too large"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("mcts:abc", "mcts:N needs a positive integer N"),
        ("mcts:0", "mcts:N needs a positive integer N"),
        ("mcts:-5", "mcts:N needs a positive integer N"),
        ("mcts", "mcts:N needs a positive integer N"),
        ("run:", "run:DIR needs the directory"),
        ("alphabeta", "unknown opponent 'alphabeta'; use random, minimax, mcts:N"),
        ("minimax:3", "unknown opponent"),
        ("", "an opponent must be one of random, minimax, mcts:N"),
    ],
)
def test_bad_opponent_specs_say_what_is_allowed(spec, message):
    with pytest.raises(MooziError, match=message.replace("(", r"\(")):
        make_opponent(spec, TTT, 0, 0)


def test_unknown_opponent_error_names_every_opponent():
    with pytest.raises(MooziError) as caught:
        make_opponent("alphabeta", TTT, 0, 0)
    for form in ("random", "minimax", "mcts:N", "solver", "run:DIR", "pipcount", "gnugo[:LEVEL]"):
        assert form in str(caught.value), form


def test_bad_spec_fails_before_any_game_is_played():
    agent = SeatRecordingAgent()
    with pytest.raises(MooziError):
        evaluate(agent, "tic_tac_toe", "mcts:abc", num_games=4, seed=0)
    assert agent.seats == []


def test_run_opponent_loads_another_run(tmp_path, monkeypatch):
    loaded = []

    def fake_load_agent(run_dir):
        loaded.append(run_dir)
        return OpponentAgent("minimax")

    # setitem, not setattr: reading the old attribute would import the real agent stack (JAX).
    monkeypatch.setattr("moozi.play.load_agent", fake_load_agent)
    result = evaluate(OpponentAgent("random"), "tic_tac_toe", f"run:{tmp_path}", num_games=10, seed=0)
    assert loaded == [str(tmp_path)] * 2  # one bot per seat
    assert result.wins == 0 and result.opponent == f"run:{tmp_path}"


def test_run_opponent_needs_an_existing_directory(tmp_path):
    with pytest.raises(MooziError, match="no run directory"):
        make_opponent(f"run:{tmp_path / 'missing'}", TTT, 0, 0)


@pytest.mark.parametrize("num_games", [0, -1, 2.5])
def test_num_games_must_be_positive(num_games):
    with pytest.raises(MooziError, match="positive integer"):
        evaluate(OpponentAgent("random"), "tic_tac_toe", "random", num_games=num_games, seed=0)


# --------------------------------------------------------------------- results
def test_eval_result_json_round_trip_and_table():
    result = evaluate(OpponentAgent("minimax"), "tic_tac_toe", "random", num_games=10, seed=4)
    text = result.to_json()
    assert EvalResult.from_json(text) == result
    assert result_from_json(text) == result
    assert '"kind": "two_player"' in text
    table = result.format_table()
    assert "as player 0" in table and "as player 1" in table and "total" in table
    assert f"{result.win_rate:.3f} [{result.win_rate_ci[0]:.3f}, {result.win_rate_ci[1]:.3f}]" in table


class EpisodeAgent:
    """A one-player stand-in: plays random legal actions, seeded by the episode seed."""

    def __init__(self):
        self.seeds = []

    def play_episode(self, env, seed):
        self.seeds.append(seed)
        rng = np.random.default_rng(seed)
        step, total = env.reset(seed=seed), 0.0
        while not step.is_last:
            step = env.step(int(rng.choice(np.flatnonzero(step.legal_actions))), False)
            total += float(step.reward)
        return total


def test_single_player_games_report_mean_return_with_interval():
    agent = EpisodeAgent()
    result = evaluate(agent, "openspiel:catch", "random", num_games=12, seed=10)
    assert isinstance(result, ReturnResult) and result.kind == "single_player"
    assert agent.seeds == list(range(10, 22))
    returns = np.array(result.returns)
    assert result.games == 12 and set(returns) <= {-1.0, 1.0}
    assert result.mean_return == pytest.approx(returns.mean())
    half_width = 1.959964 * returns.std(ddof=1) / math.sqrt(12)
    assert result.mean_return_ci == pytest.approx((returns.mean() - half_width, returns.mean() + half_width))
    assert ReturnResult.from_json(result.to_json()) == result
    assert result_from_json(result.to_json()) == result
    assert "mean return" in result.format_table()


def test_one_player_games_refuse_opening_moves():
    # Random openings pair the seats of a two-player game; silently ignoring them would mislead.
    with pytest.raises(MooziError, match="one-player game: --opening-moves"):
        evaluate(EpisodeAgent(), "openspiel:catch", "random", num_games=2, seed=0, opening_moves=3)


def test_single_episode_has_no_interval():
    result = evaluate(EpisodeAgent(), "openspiel:catch", "random", num_games=1, seed=0)
    assert result.mean_return_ci is None and result.std_return == 0.0
    assert ReturnResult.from_json(result.to_json()) == result
    assert "no interval" in result.format_table()


class CappedAgent(EpisodeAgent):
    """Plays like EpisodeAgent, one reward of 1 per step, and obeys a step cap."""

    def run_episode(self, env, seed, max_steps=None):
        from moozi.play.trained_agent import EpisodeOutcome

        self.seeds.append(seed)
        rng = np.random.default_rng(seed)
        step, steps = env.reset(seed=seed), 0
        while not step.is_last:
            if max_steps is not None and steps >= max_steps:
                return EpisodeOutcome(float(steps), steps, cut=True)
            step = env.step(int(rng.choice(np.flatnonzero(step.legal_actions))), False)
            steps += 1
        return EpisodeOutcome(float(steps), steps, cut=False)


def test_one_player_episodes_are_capped_progress_lined_and_get_a_bootstrap_interval():
    seen = []
    result = evaluate(CappedAgent(), "openspiel:catch", "random", num_games=8, seed=3, max_steps=4,
                      progress=lambda done, total, returns, cut: seen.append((done, total, len(returns), cut)))
    # catch takes 9 moves: every episode is cut at 4, with its return so far.
    assert result.returns == (4.0,) * 8 and result.cut_episodes == 8 and result.max_steps == 4
    assert seen == [(i, 8, i, i) for i in range(1, 9)]
    assert result.mean_return_bootstrap_ci == (4.0, 4.0)
    assert "8 of 8 episodes cut" in result.format_table()
    assert ReturnResult.from_json(result.to_json()) == result
    uncapped = evaluate(CappedAgent(), "openspiel:catch", "random", num_games=3, seed=3)
    assert uncapped.returns == (9.0,) * 3 and uncapped.cut_episodes == 0 and uncapped.max_steps is None  # 9 moves


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    from moozi.evaluation.intervals import bootstrap_mean_interval

    values = np.random.default_rng(0).exponential(5.0, 100)
    low, high = bootstrap_mean_interval(values)
    assert low < values.mean() < high and bootstrap_mean_interval(values) == (low, high)
    assert bootstrap_mean_interval([1.0]) is None


def test_the_protocol_is_named_for_minatar_and_atari():
    from moozi.evaluation.matches import evaluation_protocol

    assert "sticky actions 0.1" in evaluation_protocol("minatar:breakout")
    assert "sticky actions 0.25" in evaluation_protocol("atari:pong")
    assert evaluation_protocol("openspiel:catch") == ""


def test_result_from_json_rejects_other_documents():
    with pytest.raises(MooziError, match="not an evaluation result"):
        result_from_json('{"kind": "loss_curve"}')
