"""Bradley–Terry ratings: exact maximum likelihood on hand-solvable cases, recovery of known strengths, bootstrap."""

import math

import numpy as np
import pytest

from moozi.evaluation.elo import ELO_PER_NAT, bootstrap_elo, fit_elo, percentile_intervals, score_matrix

LOG3_ELO = 400 * math.log10(3)  # the gap at which the stronger player scores 3 of 4


def _games(pairs):
    """(first, second, score) arrays from [(i, j, score of i), ...]."""
    first, second, score = zip(*pairs)
    return np.array(first), np.array(second), np.array(score, float)


def _simulate(true_elo, games_per_pair, seed):
    """Games between every pair, each won by i with the Bradley–Terry probability of the true ratings."""
    rng = np.random.default_rng(seed)
    first, second, score = [], [], []
    for i in range(len(true_elo)):
        for j in range(i + 1, len(true_elo)):
            p = 1.0 / (1.0 + 10 ** (-(true_elo[i] - true_elo[j]) / 400))
            wins = rng.random(games_per_pair) < p
            first += [i] * games_per_pair
            second += [j] * games_per_pair
            score += list(wins.astype(float))
    return np.array(first), np.array(second), np.array(score)


def test_elo_scale_constant():
    # 400·log10 on the odds: θ in nats times 400/ln 10.
    assert ELO_PER_NAT * math.log(10) == pytest.approx(400)


def test_two_players_three_wins_of_four_is_400_log10_3():
    scores = score_matrix(2, *_games([(0, 1, 1), (0, 1, 1), (1, 0, 0), (0, 1, 0)]))
    np.testing.assert_array_equal(scores, [[0, 3], [1, 0]])
    ratings = fit_elo(scores, anchor=1)
    assert ratings[1] == 0.0
    assert ratings[0] == pytest.approx(LOG3_ELO, rel=1e-10)  # 190.85
    assert fit_elo(scores, anchor=0)[1] == pytest.approx(-LOG3_ELO, rel=1e-10)


def test_a_draw_is_half_a_win():
    two_wins_two_draws = score_matrix(2, *_games([(0, 1, 1), (0, 1, 1), (0, 1, 0.5), (1, 0, 0.5)]))
    np.testing.assert_array_equal(two_wins_two_draws, [[0, 3], [1, 0]])
    assert fit_elo(two_wins_two_draws, anchor=1)[0] == pytest.approx(LOG3_ELO, rel=1e-10)
    even = score_matrix(2, *_games([(0, 1, 1), (0, 1, 0.5), (1, 0, 0.5), (0, 1, 0)]))
    assert fit_elo(even)[1] == pytest.approx(0.0, abs=1e-9)


def test_a_chain_of_pairs_adds_up_the_gaps():
    # A beats B 3:1, B beats C 3:1, A and C never meet: a tree, so each pair fixes its own gap.
    pairs = [(0, 1, 1)] * 3 + [(0, 1, 0)] + [(1, 2, 1)] * 3 + [(1, 2, 0)]
    ratings = fit_elo(score_matrix(3, *_games(pairs)), anchor=2)
    np.testing.assert_allclose(ratings, [2 * LOG3_ELO, LOG3_ELO, 0.0], rtol=1e-10, atol=1e-9)


def test_three_players_round_robin_is_a_stationary_point():
    # The MLE's defining equations: each player's expected score equals its actual score.
    pairs = [(0, 1, 1), (0, 1, 1), (0, 1, 0), (1, 2, 1), (1, 2, 0.5), (2, 0, 1), (2, 0, 0), (2, 0, 0), (0, 2, 1)]
    scores = score_matrix(3, *_games(pairs))
    theta = fit_elo(scores, anchor=0) / ELO_PER_NAT
    expected = (scores + scores.T) / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    np.testing.assert_allclose(expected.sum(axis=1), scores.sum(axis=1), atol=1e-9)


def test_a_perfect_record_needs_the_prior_and_gets_a_finite_rating_with_it():
    scores = score_matrix(2, *_games([(0, 1, 1)] * 4))
    with pytest.raises(ValueError, match="no finite maximum-likelihood"):
        fit_elo(scores)
    # One virtual draw: 4.5 points to 0.5, so the gap is 400·log10 9.
    assert fit_elo(scores, anchor=1, prior_draws=1.0)[0] == pytest.approx(400 * math.log10(9), rel=1e-10)


def test_a_group_that_never_scored_against_the_rest_has_no_mle():
    # 0 and 1 trade wins, 2 and 3 trade wins, but 0 and 1 beat 2 and 3 every time.
    pairs = [(0, 1, 1), (0, 1, 0), (2, 3, 1), (2, 3, 0), (0, 2, 1), (1, 3, 1)]
    with pytest.raises(ValueError, match="no finite"):
        fit_elo(score_matrix(4, *_games(pairs)))
    assert np.all(np.isfinite(fit_elo(score_matrix(4, *_games(pairs)), prior_draws=0.5)))


def test_players_without_a_link_are_refused():
    pairs = [(0, 1, 1), (0, 1, 0), (2, 3, 1), (2, 3, 0)]
    with pytest.raises(ValueError, match="not linked"):
        fit_elo(score_matrix(4, *_games(pairs)), prior_draws=1.0)


def test_bad_game_lists_are_refused():
    with pytest.raises(ValueError, match="play itself"):
        score_matrix(2, [0], [0], [1.0])
    with pytest.raises(ValueError, match="indices"):
        score_matrix(2, [0], [2], [1.0])
    with pytest.raises(ValueError, match="scores"):
        score_matrix(2, [0], [1], [2.0])


def test_the_fit_recovers_known_ratings_from_simulated_games():
    true_elo = np.array([0.0, 200.0, -150.0, 400.0, 50.0])
    ratings = fit_elo(score_matrix(5, *_simulate(true_elo, 400, seed=0)), anchor=0)
    # 400 games per pair, 4 opponents each: the standard error of a rating here is about 15-20 Elo.
    np.testing.assert_allclose(ratings, true_elo, atol=50)
    assert list(np.argsort(ratings)) == list(np.argsort(true_elo))


def test_the_order_in_which_results_arrive_does_not_matter():
    first, second, score = _simulate(np.array([0.0, 100.0, -100.0]), 30, seed=1)
    reference = fit_elo(score_matrix(3, first, second, score), prior_draws=1.0)
    order = np.random.default_rng(2).permutation(len(score))
    shuffled = fit_elo(score_matrix(3, first[order], second[order], score[order]), prior_draws=1.0)
    np.testing.assert_array_equal(shuffled, reference)
    # Listing a game from the other side (second player first, score 1 − s) is the same game.
    swapped = fit_elo(score_matrix(3, second, first, 1.0 - score), prior_draws=1.0)
    np.testing.assert_array_equal(swapped, reference)


def test_bootstrap_intervals_contain_the_estimate_and_shrink_with_more_games():
    true_elo = np.array([0.0, 150.0, -100.0])
    widths = []
    for games_per_pair in (20, 320):
        games = _simulate(true_elo, games_per_pair, seed=3)
        estimate = fit_elo(score_matrix(3, *games), prior_draws=1.0)
        samples = bootstrap_elo(3, *games, samples=200, seed=4, prior_draws=1.0)
        assert samples.shape == (200, 3)
        intervals = percentile_intervals(samples)
        np.testing.assert_array_equal(intervals[0], [0.0, 0.0])  # the anchor is the zero of the scale
        for player in (1, 2):
            lo, hi = intervals[player]
            assert lo < estimate[player] < hi
            assert lo < true_elo[player] < hi
        widths.append(intervals[1:, 1] - intervals[1:, 0])
    # 16 times the games: about 4 times narrower.
    assert np.all(widths[1] < widths[0] / 2.5)


def test_bootstrap_is_reproducible_from_its_seed():
    games = _simulate(np.array([0.0, 50.0, 300.0]), 10, seed=5)
    a = bootstrap_elo(3, *games, samples=30, seed=6, prior_draws=1.0)
    b = bootstrap_elo(3, *games, samples=30, seed=6, prior_draws=1.0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, bootstrap_elo(3, *games, samples=30, seed=7, prior_draws=1.0))


def test_percentile_intervals_by_hand():
    samples = np.arange(1, 202, dtype=float)[:, None]  # 1..201: the 2.5% and 97.5% points are 6 and 196
    np.testing.assert_allclose(percentile_intervals(samples), [[6.0, 196.0]])
