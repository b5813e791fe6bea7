"""Final-state targets of territory games (moozi/core/territory.py) on hand-made boards, against
pgx's own Tromp-Taylor count, and through the replay buffer and the loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.core.territory import area_ownership, final_ownership_and_score, territory_targets
from moozi.envs.base import TerritorySpec


def _board(rows: list[str]):
    """'x' own stone, 'o' the other's, '.' empty -> (own, other) bool arrays."""
    grid = np.array([list(r) for r in rows])
    return jnp.asarray(grid == "x"), jnp.asarray(grid == "o")


def test_area_ownership_counts_stones_and_enclosed_regions():
    own, other = _board([
        ".x.o.",
        "xx.oo",
        "..xo.",
        "xxxoo",
        ".....",
    ])
    expected = np.array([
        [1, 1, 0, -1, -1],
        [1, 1, 0, -1, -1],
        [1, 1, 1, -1, -1],
        [1, 1, 1, -1, -1],
        [0, 0, 0, 0, 0],
    ], np.float32)
    # (0,2), (1,2) touch both colours: nobody's; the bottom row reaches both: nobody's.
    np.testing.assert_array_equal(np.asarray(area_ownership(own, other)), expected)


def test_empty_board_belongs_to_nobody_and_one_colour_owns_all():
    empty = jnp.zeros((3, 3), bool)
    np.testing.assert_array_equal(np.asarray(area_ownership(empty, empty)), np.zeros((3, 3)))
    one = empty.at[1, 1].set(True)
    np.testing.assert_array_equal(np.asarray(area_ownership(one, empty)), np.ones((3, 3)))
    np.testing.assert_array_equal(np.asarray(area_ownership(empty, one)), -np.ones((3, 3)))


def _pgx_obs(own, other, white_to_move: bool):
    obs = np.zeros((*own.shape, 17), np.float32)
    obs[..., 0], obs[..., 1] = np.asarray(own), np.asarray(other)
    obs[..., 16] = float(white_to_move)
    return obs


def test_score_margin_takes_komi_by_the_movers_colour():
    own, other = _board(["xx.", "xx.", "ooo"])  # own: 4 stones + (0,2),(1,2) touch both -> 4; other 3
    spec = TerritorySpec(first_plane=0, second_plane=1, relative=True, white_to_move_plane=16, komi=7.5)
    _, as_black = final_ownership_and_score(_pgx_obs(own, other, False), spec)
    _, as_white = final_ownership_and_score(_pgx_obs(own, other, True), spec)
    assert float(as_black) == pytest.approx(4 - 3 - 7.5)
    assert float(as_white) == pytest.approx(4 - 3 + 7.5)


def test_black_white_planes_are_read_from_the_movers_side():
    black, white = _board(["xx.", "xx.", "ooo"])
    obs = np.zeros((3, 3, 4), np.float32)
    obs[..., 0], obs[..., 1], obs[..., 3] = np.asarray(black), np.asarray(white), 1.0  # white to move
    spec = TerritorySpec(first_plane=0, second_plane=1, relative=False, white_to_move_plane=3, komi=0.5)
    ownership, score = final_ownership_and_score(obs, spec)
    np.testing.assert_array_equal(np.asarray(ownership), -np.asarray(area_ownership(black, white)))
    assert float(score) == pytest.approx(3 - 4 + 0.5)


def test_targets_flip_with_the_parity_of_plies_to_the_end():
    own, other = _board(["x.", ".o"])
    spec = TerritorySpec(0, 1, True, 16, 0.5)
    final = np.stack([_pgx_obs(own, other, False)] * 3)
    ownership, score = territory_targets(final, np.array([0, 1, 2]), spec)
    base = np.asarray(area_ownership(own, other))
    for b, sign in enumerate([1, -1, 1]):
        np.testing.assert_array_equal(np.asarray(ownership[b]), sign * base)
    np.testing.assert_allclose(np.asarray(score), np.array([-0.5, 0.5, -0.5]))


@pytest.mark.slow
def test_area_count_matches_pgx_on_random_finished_games():
    """pgx's own score (its `rewards` winner) agrees with the margin read from its last observation."""
    pytest.importorskip("pgx")
    from moozi.envs.pgx import make

    env = make("pgx:go_9x9", komi=0.5, max_terminal_steps=60)
    step = jax.jit(jax.vmap(env.step))
    states, out = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 16))
    rng = np.random.default_rng(0)
    for _ in range(60):
        legal = np.asarray(out.legal_actions).copy()
        legal[:, -1] &= ~legal[:, 1:-1].any(axis=1)  # stones while there are any: a full board
        noise = np.where(legal, rng.random(legal.shape), -1.0)
        action = np.argmax(noise, axis=1).astype(np.int32)
        prev_to_play = np.asarray(out.to_play)
        states, out = step(states, jnp.asarray(action), jnp.zeros(16, bool), jax.random.split(jax.random.PRNGKey(1), 16))
    assert bool(np.all(np.asarray(out.is_last)))
    spec = env.spec.territory
    _, margins = jax.vmap(lambda o: final_ownership_and_score(o, spec))(out.obs)
    # out.reward is the reward of the player who just moved; the margin is the next mover's.
    np.testing.assert_array_equal(np.sign(np.asarray(margins)), -np.asarray(out.reward))
    assert prev_to_play.shape == (16,)


def _go_episode(final_own, final_other, length: int, white_moves_last: bool):
    """A 3x3 'go' episode of `length` steps whose last observation shows the given board."""
    from moozi.core.types import Trajectory

    A = 11
    obs = np.zeros((length, 3, 3, 17), np.float32)
    obs[-1] = _pgx_obs(final_own, final_other, white_moves_last)
    action = np.ones(length, np.int32)
    action[-1] = 0
    return Trajectory(
        obs=obs, action=action, reward=np.zeros(length, np.float32), is_first=np.arange(length) == 0,
        is_last=np.arange(length) == length - 1, legal_actions=np.ones((length, A), bool),
        to_play=(np.arange(length) % 2).astype(np.int32), root_value=np.zeros(length, np.float32),
        action_probs=np.full((length, A), 1.0 / A, np.float32))


def test_replay_samples_each_positions_final_ownership_from_its_movers_view():
    from moozi.core.replay import ReplayBuffer, ReplayConfig
    from moozi.core.targets import TargetConfig
    from moozi.envs.base import EnvSpec

    territory = TerritorySpec(0, 1, True, 16, 0.5)
    spec = EnvSpec("test:go3", (3, 3, 17), 11, 2, binary_obs=True, territory=territory)
    buffer = ReplayBuffer(ReplayConfig(capacity=64, min_fill=1, sampling="uniform"),
                          TargetConfig(history_length=1, num_unroll_steps=0, td_steps=10, discount=1.0), spec, seed=0,
                          territory_targets=True)
    own, other = _board(["xx.", "x..", "..o"])
    buffer.add(_go_episode(own, other, length=5, white_moves_last=False))
    targets, positions = buffer.sample(32)
    final = np.asarray(area_ownership(own, other))
    for b, position in enumerate(positions):
        t = int(position) % 5
        sign = 1 if (4 - t) % 2 == 0 else -1
        np.testing.assert_array_equal(np.asarray(targets.ownership[b]), sign * final)
        assert float(targets.score_margin[b]) == pytest.approx(sign * (float(final.sum()) - 0.5))


def test_replay_refuses_territory_targets_for_other_games():
    from moozi.core.replay import ReplayBuffer, ReplayConfig
    from moozi.core.targets import TargetConfig
    from moozi.envs.base import EnvSpec
    from moozi.errors import MooziError

    with pytest.raises(MooziError, match="not a territory game"):
        ReplayBuffer(ReplayConfig(capacity=8, min_fill=1), TargetConfig(), EnvSpec("test:grid", (2, 2, 1), 3, 1),
                     seed=0, territory_targets=True)


def test_symmetry_moves_ownership_with_the_board():
    from moozi.core.symmetry import BoardSymmetry, cell_gathers, make_symmetry_transform
    from moozi.core.types import TrainingTarget

    symmetry = BoardSymmetry("dihedral", 3, 3)
    A, C = 11, 1
    transform = make_symmetry_transform(symmetry, A, C, 1)
    board = np.zeros((1, 3, 3, C + A), np.float32)
    board[0, 0, 2, 0] = 1.0  # a stone in one corner
    ownership = np.zeros((1, 3, 3), np.float32)
    ownership[0, 0, 2] = 1.0
    target = TrainingTarget(
        stacked_obs=board, next_stacked_obs=board, actions=np.zeros((1, 0), np.int32), rewards=np.zeros((1, 0)),
        action_probs=np.full((1, 1, A), 1.0 / A, np.float32), policy_mask=np.ones((1, 1)), root_values=np.zeros((1, 1)),
        partial_return=np.zeros((1, 1)), bootstrap_discount=np.zeros((1, 1)), bootstrap_value=np.zeros((1, 1)),
        consistency_mask=np.zeros(1), importance_weight=np.ones(1), ownership=ownership, score_margin=np.zeros(1))
    for g in range(len(cell_gathers(symmetry))):
        moved = transform(target, jnp.array([g]))
        # Ownership stays where the stone went.
        np.testing.assert_array_equal(np.asarray(moved.ownership[0]), np.asarray(moved.stacked_obs[0, :, :, 0]))


def test_in_training_test_reports_the_agents_area_from_its_side():
    from moozi.evaluation.vector_matches import BatchOutcome
    from moozi.training.roles.testing_worker import area_metrics

    own, other = _board(["xx.", "x..", "..o"])  # the mover owns 8 points... see area_ownership
    mover_area = float(np.sum(np.asarray(area_ownership(own, other)) > 0))
    margin = float(np.sum(np.asarray(area_ownership(own, other)))) - 0.5  # black to move: komi against it
    final = np.stack([_pgx_obs(own, other, False)] * 3)
    played = BatchOutcome(
        returns=np.zeros(3), outcome=np.zeros(3), points=np.zeros(3), finished=np.array([True, True, False]),
        agent_seat=np.array([0, 1, 0]), final_obs=final, final_to_play=np.array([0, 0, 0]))
    metrics = area_metrics(played, TerritorySpec(0, 1, True, 16, 0.5))
    # Game 0: the agent is the mover; game 1: its opponent is; game 2 is unfinished and left out.
    assert metrics["test_area_margin"] == pytest.approx((margin - margin) / 2)
    other_area = float(np.sum(np.asarray(area_ownership(own, other)) < 0))
    assert metrics["test_own_area"] == pytest.approx((mover_area + other_area) / 2)


def test_openspiel_go_margin_agrees_with_its_returns():
    """OpenSpiel's go bridge reads black's and white's planes; the margin read from its last observation
    has the sign of the game's own result, from the view of the player to move there."""
    from moozi.envs.openspiel import OpenSpielEnv

    env = OpenSpielEnv("go(board_size=5,komi=0.5,max_game_length=40)")
    assert env.spec.territory is not None and env.spec.territory.komi == 0.5
    rng = np.random.default_rng(0)
    for seed in range(4):
        step = env.reset(seed=seed)
        while not step.is_last:
            legal = np.flatnonzero(step.legal_actions)
            stones = legal[legal < env.spec.num_actions - 1]
            step = env.step(int(rng.choice(stones if len(stones) else legal)), False)
        _, margin = final_ownership_and_score(step.obs, env.spec.territory)
        # step.reward is the reward of the player who just moved, the opponent of the one to move.
        assert np.sign(float(margin)) == -np.sign(float(step.reward))


def test_loss_terms_by_hand():
    """Ownership: the mean over points of the binary cross-entropy of sigmoid(logit) against (1 + z) / 2;
    score: the squared error of the margin over the board's points."""
    from types import SimpleNamespace

    from moozi.core.loss import LossConfig, territory_terms

    logits = jnp.array([[[0.0, 2.0], [-1.0, 0.5]]])  # [1, 2, 2]
    ownership = jnp.array([[[1.0, -1.0], [0.0, 1.0]]])
    batch = SimpleNamespace(ownership=ownership, score_margin=jnp.array([2.0]))
    root = SimpleNamespace(ownership_logits=logits, score=jnp.array([0.25]))
    own_term, score_term, metrics = territory_terms(LossConfig(ownership_coef=1.5, score_coef=0.5), batch, root)

    def bce(x, y):
        p = 1 / (1 + np.exp(-x))
        return -(y * np.log(p) + (1 - y) * np.log(1 - p))

    expected = np.mean([bce(0.0, 1.0), bce(2.0, 0.0), bce(-1.0, 0.5), bce(0.5, 1.0)])
    assert float(own_term[0]) == pytest.approx(expected, rel=1e-5)
    assert float(score_term[0]) == pytest.approx((0.25 - 2.0 / 4) ** 2)
    # Owned points: (0,0) logit 0 has sign 0 (wrong), (0,1) wrong sign, (1,1) right: 1 of 3.
    assert float(metrics["ownership_accuracy"]) == pytest.approx(1 / 3)
    assert float(metrics["score_error_points"]) == pytest.approx(0.25 * 4)
