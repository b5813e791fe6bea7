"""Board symmetries: real games agree with the transforms, and training targets move consistently."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.core.symmetry import (
    action_maps,
    board_symmetry,
    cell_gathers,
    game_family,
    make_symmetry_augment,
    make_symmetry_transform,
    transform_board,
)
from moozi.core.types import TrainingTarget
from moozi.envs.registry import is_jax_native, make_env, resolve_game_name
from moozi.core.history import stack_history

GAMES = [
    ("tic_tac_toe", "dihedral", 8),
    ("connect_four", "mirror", 2),
    ("go9", "dihedral", 8),
    ("pgx:tic_tac_toe", "dihedral", 8),
    ("pgx:connect_four", "mirror", 2),
]


class _Player:
    """Steps an env of either kind (host or JAX-native) from the start."""

    def __init__(self, game):
        self.env = make_env(game)
        self.jax = is_jax_native(resolve_game_name(game))
        if self.jax:
            self._step = jax.jit(self.env.step)

    def start(self):
        if self.jax:
            self.state, out = self.env.init(jax.random.PRNGKey(0))
            return jax.device_get(out)
        return self.env.reset(seed=0)

    def step(self, action):
        if self.jax:
            self.state, out = self._step(self.state, jnp.int32(action), jnp.bool_(False), jax.random.PRNGKey(1))
            return jax.device_get(out)
        return self.env.step(int(action), False)


def _random_game(game, rng, max_moves):
    player = _Player(game)
    steps, actions = [player.start()], []
    while not steps[-1].is_last and len(actions) < max_moves:
        legal = np.flatnonzero(steps[-1].legal_actions)
        actions.append(int(rng.choice(legal)))
        steps.append(player.step(actions[-1]))
    return steps, actions


@pytest.mark.slow
@pytest.mark.parametrize("game,kind,count", GAMES)
def test_symmetric_play_gives_symmetric_boards_and_legal_moves(game, kind, count):
    rng = np.random.default_rng(3)
    steps, actions = _random_game(game, rng, max_moves=40)
    spec = make_env(game).spec
    symmetry = board_symmetry(resolve_game_name(game), spec.obs_shape)
    assert symmetry.kind == kind
    gathers, maps = cell_gathers(symmetry), action_maps(symmetry, spec.num_actions)
    assert len(gathers) == len(maps) == count
    for g in range(count):
        player = _Player(game)
        mirrored = player.start()
        for t, original in enumerate(steps):
            np.testing.assert_array_equal(np.asarray(mirrored.obs), transform_board(np.asarray(original.obs), gathers[g]))
            # Legal moves go to legal moves, illegal to illegal: legal'[maps[a]] = legal[a].
            np.testing.assert_array_equal(np.asarray(mirrored.legal_actions)[maps[g]], np.asarray(original.legal_actions))
            assert float(mirrored.reward) == float(original.reward)
            if t < len(actions):
                mirrored = player.step(maps[g][actions[t]])


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_2048_slides_turn_and_mirror_with_the_board():
    """Against pgx's own 2048: a position under symmetry g, slid the way g maps the slide, pays the same
    reward and leaves the mapped board, apart from the new random tile on each side."""
    import pgx

    env, rng = pgx.make("2048"), np.random.default_rng(0)
    step = jax.jit(env.step)
    symmetry = board_symmetry("pgx:2048", (4, 4, 31))
    assert symmetry.kind == "slides" and game_family("pgx:2048") == "2048"
    gathers, maps = cell_gathers(symmetry), action_maps(symmetry, 5)  # augmented: 0 is the dummy
    # A turn a quarter anticlockwise (np.rot90) takes a left slide to a down slide; the mirror swaps left and right.
    assert maps[1].tolist() == [0, 4, 1, 2, 3] and maps[4].tolist() == [0, 3, 2, 1, 4]
    state, positions = env.init(jax.random.PRNGKey(0)), []
    while len(positions) < 8 and not bool(state.terminated):
        state = step(state, jnp.int32(rng.choice(np.flatnonzero(state.legal_action_mask))), jax.random.PRNGKey(len(positions)))
        positions.append(state)
    checked = set()
    for position in positions:
        board = np.asarray(position._board)
        for g in range(8):
            legal = np.zeros(4, bool)
            legal[maps[g][1:] - 1] = np.asarray(position.legal_action_mask)  # legal'[g(a)] = legal[a]
            moved = position.replace(_board=jnp.asarray(board[gathers[g]]), legal_action_mask=jnp.asarray(legal))
            np.testing.assert_array_equal(env.observe(moved, 0), transform_board(np.asarray(env.observe(position, 0)), gathers[g]))
            for action in np.flatnonzero(position.legal_action_mask):
                after = step(position, jnp.int32(action), jax.random.PRNGKey(7))
                after_moved = step(moved, jnp.int32(maps[g][action + 1] - 1), jax.random.PRNGKey(7))
                assert float(after_moved.rewards[0]) == float(after.rewards[0])
                expected, got = np.asarray(after._board)[gathers[g]], np.asarray(after_moved._board)
                differ = np.flatnonzero(expected != got)  # the new tile: a 2 or a 4 where the other has none
                assert len(differ) in (0, 2) and all(sorted((expected[i], got[i]))[0] == 0 and
                                                     sorted((expected[i], got[i]))[1] in (1, 2) for i in differ)
                checked.add((g, int(action)))
    assert len(checked) == 32  # every symmetry with every slide


@pytest.mark.parametrize("game,kind,count", [*GAMES, ("pgx:2048", "slides", 8)])
def test_symmetries_are_permutations_that_form_a_group(game, kind, count):
    spec = make_env(game).spec
    symmetry = board_symmetry(resolve_game_name(game), spec.obs_shape)
    gathers, maps = cell_gathers(symmetry), action_maps(symmetry, spec.num_actions)
    identity = np.arange(spec.num_actions)
    np.testing.assert_array_equal(maps[0], identity)
    assert maps[:, 0].tolist() == [0] * count  # the dummy action never moves
    for g in range(count):
        assert sorted(maps[g]) == identity.tolist()
        # Round trip: some element of the group undoes g, on cells and on actions alike.
        inverses = [h for h in range(count) if (maps[h][maps[g]] == identity).all()]
        assert len(inverses) == 1
        h = inverses[0]
        board = np.arange(gathers.shape[1])
        np.testing.assert_array_equal(board[gathers[g]][gathers[h]], board)
    assert len({tuple(m) for m in maps}) == count  # all distinct


def test_go_pass_is_fixed_and_games_without_symmetry_get_none():
    spec = make_env("go9").spec
    maps = action_maps(board_symmetry(resolve_game_name("go9"), spec.obs_shape), spec.num_actions)
    assert (maps[:, spec.num_actions - 1] == spec.num_actions - 1).all()  # pass
    assert game_family("pgx:go_9x9") == game_family("openspiel:go(board_size=9,komi=7.5)") == "go"
    assert board_symmetry("minatar:breakout", (10, 10, 4)) is None
    assert board_symmetry("gym:CartPole-v1", (1, 1, 4)) is None
    with pytest.raises(ValueError, match="square"):
        board_symmetry("openspiel:tic_tac_toe", (3, 4, 3))


def _targets(rng, B, K, L, H, W, C, A, with_bootstrap):
    frames = rng.integers(0, 2, size=(B, L, H, W, C)).astype(np.float32)
    history_actions = rng.integers(0, A, size=(B, L))
    probs = rng.random((B, K + 1, A)).astype(np.float32)
    targets = TrainingTarget(
        stacked_obs=stack_history(frames, history_actions, A),
        next_stacked_obs=stack_history(frames[:, ::-1], history_actions[:, ::-1], A),
        actions=jnp.asarray(rng.integers(0, A, size=(B, K)), jnp.int32),
        rewards=jnp.asarray(rng.random((B, K)), jnp.float32),
        action_probs=jnp.asarray(probs / probs.sum(-1, keepdims=True)),
        policy_mask=jnp.ones((B, K + 1)),
        root_values=jnp.asarray(rng.random((B, K + 1)), jnp.float32),
        partial_return=jnp.zeros((B, K + 1)),
        bootstrap_discount=jnp.zeros((B, K + 1)),
        bootstrap_value=jnp.zeros((B, K + 1)),
        consistency_mask=jnp.ones((B,)),
        importance_weight=jnp.ones((B,)),
        bootstrap_stacked_obs=(jnp.stack([stack_history(frames, history_actions, A)] * (K + 1), axis=1)
                               if with_bootstrap else None),
    )
    return targets, frames, history_actions


@pytest.mark.parametrize("with_bootstrap", [False, True])
@pytest.mark.slow
def test_transform_moves_history_actions_and_policy_consistently(with_bootstrap):
    rng = np.random.default_rng(0)
    B, K, L, H, W, C, A = 8, 3, 2, 3, 3, 3, 10
    symmetry = board_symmetry("openspiel:tic_tac_toe", (H, W, C))
    targets, frames, history_actions = _targets(rng, B, K, L, H, W, C, A, with_bootstrap)
    transform = make_symmetry_transform(symmetry, A, C, L)
    g = np.arange(B) % 8
    out = transform(targets, jnp.asarray(g))
    gathers, maps = cell_gathers(symmetry), action_maps(symmetry, A)
    for b in range(B):
        # The history input of the moved frames and moved actions, built from scratch.
        expected = stack_history(transform_board(frames[b], gathers[g[b]]), maps[g[b]][history_actions[b]], A)
        np.testing.assert_allclose(out.stacked_obs[b], expected)
        np.testing.assert_array_equal(out.actions[b], maps[g[b]][np.asarray(targets.actions[b])])
        # p'[g(a)] = p[a]
        np.testing.assert_allclose(np.asarray(out.action_probs[b])[:, maps[g[b]]], targets.action_probs[b])
        if with_bootstrap:
            np.testing.assert_allclose(out.bootstrap_stacked_obs[b, 1], expected)
    np.testing.assert_array_equal(out.root_values, targets.root_values)
    np.testing.assert_array_equal(out.rewards, targets.rewards)
    # The identity leaves everything as it was.
    same = transform(targets, jnp.zeros(B, jnp.int32))
    for a, b in zip(jax.tree_util.tree_leaves(same), jax.tree_util.tree_leaves(targets)):
        np.testing.assert_array_equal(a, b)


def test_a_stochastic_batch_moves_its_future_observations_with_its_element():
    from moozi.core.stochastic_loss import StochasticTrainingTarget

    rng = np.random.default_rng(2)
    B, K, L, H, W, C, A = 8, 2, 1, 4, 4, 3, 5
    symmetry = board_symmetry("pgx:2048", (H, W, C))
    targets, _, _ = _targets(rng, B, K, L, H, W, C, A, False)
    future = jnp.stack([targets.next_stacked_obs, targets.stacked_obs[:, ::-1]], axis=1)  # [B, K, H, W, C_h]
    batch = StochasticTrainingTarget(targets, future, jnp.ones((B, K)))
    transform, g = make_symmetry_transform(symmetry, A, C, L), jnp.arange(B) % 8
    out = transform(batch, g)
    np.testing.assert_array_equal(out.target.stacked_obs, transform(targets, g).stacked_obs)
    for k in range(K):  # each future input moved by its element's own symmetry, as a stacked_obs would be
        np.testing.assert_array_equal(out.future_stacked_obs[:, k],
                                      transform(targets._replace(stacked_obs=future[:, k]), g).stacked_obs)
    np.testing.assert_array_equal(out.next_value_discount, batch.next_value_discount)
    augmented = make_symmetry_augment(symmetry, A, C, L)(batch, jax.random.PRNGKey(0))
    assert isinstance(augmented, StochasticTrainingTarget) and augmented.future_stacked_obs.shape == future.shape


def test_augment_draws_every_symmetry():
    rng = np.random.default_rng(1)
    B, K, L, H, W, C, A = 256, 2, 1, 6, 7, 3, 8
    symmetry = board_symmetry("openspiel:connect_four", (H, W, C))
    targets, frames, _ = _targets(rng, B, K, L, H, W, C, A, False)
    out = make_symmetry_augment(symmetry, A, C, L)(targets, jax.random.PRNGKey(0))
    mirrored = [bool(np.array_equal(out.stacked_obs[b, :, :, :C], frames[b, 0, :, ::-1])) and
                not np.array_equal(frames[b, 0], frames[b, 0, :, ::-1]) for b in range(B)]
    unchanged = [bool(np.array_equal(out.stacked_obs[b, :, :, :C], frames[b, 0])) for b in range(B)]
    assert all(m or u for m, u in zip(mirrored, unchanged))
    assert 0.35 < np.mean(mirrored) < 0.65


def test_replay_role_augments_board_games_only():
    from moozi.config import build_config
    from moozi.builders import env_spec, symmetry_augment

    ttt = build_config("tic_tac_toe")
    assert symmetry_augment(ttt, env_spec(ttt)) is not None
    off = build_config("tic_tac_toe", overrides={"replay.symmetry_augmentation": False})
    assert symmetry_augment(off, env_spec(off)) is None
    cartpole = build_config("cartpole")
    assert symmetry_augment(cartpole, env_spec(cartpole)) is None
