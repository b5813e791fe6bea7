"""Planner tests on hand-made models with known answers (bandits, a dummy-action trap, a two-ply blunder)."""

from __future__ import annotations

import dataclasses
import functools
import types

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.core import planner as planner_lib
from moozi.core.planner import (
    PlannerConfig,
    SearchPolicy,
    make_learned_model,
    make_muzero_model,
    make_planner,
    run_search,
    tree_max_depth,
)
from moozi.errors import MooziError
from tests.helpers.table_network import BANDIT_REWARDS, TableNetwork, table_variables


# Every test shares these shapes and a handful of configs, so the suite compiles few searches.
NUM_STATES, NUM_ACTIONS, BATCH = 4, 5, 8
OBS = jnp.zeros((BATCH, 1, 1, 1))
# BANDIT_REWARDS (tests/helpers/table_network.py): action 0 is the dummy, the best arm is 3.

GREEDY = PlannerConfig(num_simulations=32, temperature=0.0, dirichlet_fraction=0.0)
EXPLORING = PlannerConfig(num_simulations=16, temperature=1.0)  # root noise and sampling
GUMBEL_GREEDY = PlannerConfig(
    search_policy=SearchPolicy.GUMBEL_MUZERO, num_simulations=16, max_num_considered_actions=4, gumbel_scale=0.0
)
GUMBEL_EXPLORING = dataclasses.replace(GUMBEL_GREEDY, gumbel_scale=1.0)


def bandit_variables(rewards):
    """State 0 (root) -> state 1 (a sink with zero reward and value) under every action."""
    reward = np.zeros((NUM_STATES, NUM_ACTIONS), np.float32)
    reward[0] = rewards
    return table_variables(next_state=np.ones((NUM_STATES, NUM_ACTIONS)), reward=reward, value=np.zeros(NUM_STATES))


def legal_without_dummy():
    legal = np.ones((BATCH, NUM_ACTIONS), bool)
    legal[:, 0] = False
    return jnp.asarray(legal)


@functools.lru_cache(maxsize=None)
def searcher(config: PlannerConfig, discount: float = 0.997, absorbing: bool = True):
    """A jitted `(variables, rng, legal) -> mctx.PolicyOutput`, built once per (config, model)."""
    make_model = make_muzero_model if absorbing else make_learned_model
    model = make_model(TableNetwork(), discount)
    return jax.jit(lambda variables, rng, legal: run_search(config, model, variables, rng, OBS, legal))


def plan_with(config, variables, seed, legal, **model_kwargs):
    out = searcher(config, **model_kwargs)(variables, jax.random.PRNGKey(seed), legal)
    return out, planner_lib.summarize(config, out)


class PlannerBanditTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    @pytest.mark.slow
    def test_muzero_picks_best_bandit_arm(self):
        planner = make_planner(GREEDY, make_muzero_model(TableNetwork(), 0.997))
        out = self.variant(planner)(bandit_variables(BANDIT_REWARDS), jax.random.PRNGKey(0), OBS, legal_without_dummy())
        np.testing.assert_array_equal(out.action, [3] * BATCH)
        np.testing.assert_array_equal(np.argmax(out.action_probs, -1), [3] * BATCH)
        np.testing.assert_allclose(out.action_probs.sum(-1), 1.0, rtol=1e-6)
        np.testing.assert_array_equal(out.action_probs[:, 0], 0.0)
        # Q(root, 3) = r + gamma * v(sink) = 1.0 exactly.
        np.testing.assert_allclose(out.stats.chosen_q, 1.0, rtol=1e-6)
        np.testing.assert_array_equal(out.stats.raw_root_value, 0.0)
        # Repeat visits to arm 3 expand its sink child, and the sink's children in turn.
        assert np.all(out.stats.max_depth >= 2)
        # Each simulation backs up its arm's reward (the sink adds 0), and the root's raw value is 0:
        # v* = sum_a N_a r_a / (N + 1).
        n = GREEDY.num_simulations
        expected = np.asarray(out.action_probs) @ np.asarray(BANDIT_REWARDS) * n / (n + 1)
        np.testing.assert_allclose(out.root_value, expected, rtol=1e-5)
        assert out.action.dtype == jnp.int32

    @pytest.mark.slow
    def test_gumbel_picks_best_bandit_arm(self):
        _, out = plan_with(GUMBEL_GREEDY, bandit_variables(BANDIT_REWARDS), 1, legal_without_dummy())
        np.testing.assert_array_equal(out.action, [3] * BATCH)
        np.testing.assert_array_equal(np.argmax(out.action_probs, -1), [3] * BATCH)
        np.testing.assert_array_equal(out.action_probs[:, 0], 0.0)

    @pytest.mark.slow
    def test_gumbel_with_noise_improved_policy_prefers_best_arm(self):
        _, out = plan_with(GUMBEL_EXPLORING, bandit_variables(BANDIT_REWARDS), 2, legal_without_dummy())
        # p* = softmax(logits + sigma(completed q)) does not depend on the Gumbel draw once all arms are visited.
        np.testing.assert_array_equal(np.argmax(out.action_probs, -1), [3] * BATCH)

    @pytest.mark.slow
    def test_muzero_temperature_one_samples_from_visits(self):
        actions = []
        for seed in range(8):
            _, out = plan_with(EXPLORING, bandit_variables(BANDIT_REWARDS), seed, legal_without_dummy())
            actions.append(np.asarray(out.action))
        counts = np.bincount(np.concatenate(actions), minlength=NUM_ACTIONS)
        assert counts[0] == 0
        assert counts[3] == counts.max() and counts[3] < counts.sum()  # mostly the best arm, but sampled


@pytest.mark.parametrize("min_value_range", [1e-8, 1.0])
def test_gumbel_policy_target_stretches_q_differences_only_up_to_the_floor(min_value_range):
    # Arms that differ by a few hundredths of a reward: mctx's min-max rescaling divides by the
    # spread (0.02) or by the floor, whichever is larger, then adds (50 + max N) * 0.1 * q to the
    # prior's logits. Q(root, a) = r_a exactly (the sink's value is 0), and the root's raw value 0
    # and every completed Q lie in [0, 0.02], so the expected p* follows by hand.
    rewards = [0.0, 0.0, 0.01, 0.02, 0.005]
    config = dataclasses.replace(GUMBEL_GREEDY, min_value_range=min_value_range)
    tree_out, out = plan_with(config, bandit_variables(rewards), 3, legal_without_dummy())
    visits = np.asarray(tree_out.search_tree.summary().visit_counts)
    assert np.all(visits[:, 1:] > 0)  # every legal arm visited: no completed Q needed
    q = np.asarray(rewards[1:])
    scale = (50 + visits.max(-1, keepdims=True)) * 0.1 / max(q.max() - q.min(), min_value_range)
    logits = scale * (q - q.min())
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out.action_probs)[:, 1:], expected, rtol=1e-4, atol=1e-6)
    if min_value_range == 1.0:
        # Noise-level differences leave the target near the (uniform) prior ...
        assert np.asarray(out.action_probs)[:, 1:].max() < 0.3
    else:
        # ... where the default floor turns them into a near-certain choice.
        assert np.asarray(out.action_probs)[:, 3].min() > 0.9


@pytest.mark.slow
def test_puct_completed_q_target_is_the_improved_policy_of_the_prior_before_its_noise():
    # PUCT with root Dirichlet noise and policy_target="completed_q": p* = softmax(prior logits +
    # σ(completed Q)), σ(completed Q) as mctx's Gumbel MuZero computes it, the prior taken before
    # the noise (uniform here, while the tree's root prior is noisy). The visits stay mctx's.
    import mctx

    config = dataclasses.replace(EXPLORING, policy_target="completed_q")
    tree_out, out = plan_with(config, bandit_variables(BANDIT_REWARDS), 5, legal_without_dummy())
    tree = tree_out.search_tree
    noisy_prior = jax.nn.softmax(tree.children_prior_logits[:, tree.ROOT_INDEX, 1:], axis=-1)
    assert np.abs(np.asarray(noisy_prior) - 0.25).max() > 0.01  # the search saw the noise
    completed = jax.vmap(mctx.qtransform_completed_by_mix_value, in_axes=[0, None])(tree, tree.ROOT_INDEX)
    expected = jax.nn.softmax(np.asarray(completed)[:, 1:], axis=-1)  # + uniform logits
    np.testing.assert_array_equal(np.asarray(out.action_probs)[:, 0], 0.0)
    np.testing.assert_allclose(np.asarray(out.action_probs)[:, 1:], expected, rtol=1e-4, atol=1e-6)
    # Where the best arm (3, r = 1) was visited at all, it is the target's first choice (the noise
    # kept PUCT from ever trying it in some rows).
    seen = np.asarray(tree.summary().visit_counts)[:, 3] > 0
    assert seen.sum() >= 4
    np.testing.assert_array_equal(np.argmax(np.asarray(out.action_probs), -1)[seen], 3)
    # The default target is the visit distribution of the same search.
    visits_out, by_visits = plan_with(EXPLORING, bandit_variables(BANDIT_REWARDS), 5, legal_without_dummy())
    np.testing.assert_allclose(by_visits.action_probs, visits_out.search_tree.summary().visit_probs, rtol=1e-6)


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_greedy_agent_with_the_completed_q_target_plays_its_best_move_not_the_most_visited():
    # The prior favours arm 1 (reward 0.1; logit 1 against 0 for the others) over arm 3 (reward 1).
    # With 32 simulations PUCT spends most visits on arm 1 and tries arm 3 only a few times, so the
    # most visited move is arm 1, while the completed-Q policy (Q(3) = 1 > Q(1) = 0.1) picks arm 3.
    rewards = [0.0, 0.1, 0.0, 1.0, 0.0]
    logits = np.zeros((NUM_STATES, NUM_ACTIONS), np.float32)
    logits[0] = [0.0, 1.0, 0.0, 0.0, 0.0]
    reward = np.zeros((NUM_STATES, NUM_ACTIONS), np.float32)
    reward[0] = rewards
    variables = table_variables(next_state=np.ones((NUM_STATES, NUM_ACTIONS)), reward=reward, value=np.zeros(NUM_STATES),
                                logits=logits)
    tree_out, by_visits = plan_with(GREEDY, variables, 6, legal_without_dummy())
    visits = np.asarray(tree_out.search_tree.summary().visit_counts)
    assert np.all(visits[:, 3] > 0) and np.all(visits[:, 1] > visits[:, 3])
    np.testing.assert_array_equal(by_visits.action, [1] * BATCH)
    _, by_target = plan_with(dataclasses.replace(GREEDY, policy_target="completed_q"), variables, 6, legal_without_dummy())
    np.testing.assert_array_equal(by_target.action, [3] * BATCH)
    np.testing.assert_array_equal(np.argmax(np.asarray(by_target.action_probs), -1), [3] * BATCH)


@pytest.mark.slow
def test_a_floor_below_the_spread_changes_nothing():
    # BANDIT_REWARDS spread 1.8 > 1.0: the rescaling divides by the spread either way.
    default = plan_with(GUMBEL_GREEDY, bandit_variables(BANDIT_REWARDS), 4, legal_without_dummy())[1]
    floored = plan_with(dataclasses.replace(GUMBEL_GREEDY, min_value_range=1.0), bandit_variables(BANDIT_REWARDS), 4,
                        legal_without_dummy())[1]
    np.testing.assert_allclose(floored.action_probs, default.action_probs, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(floored.action, default.action)


class MaskingTest(chex.TestCase):
    @pytest.mark.slow
    def test_never_picks_masked_action(self):
        for config in (EXPLORING, GUMBEL_EXPLORING):
            for seed in range(6):
                rng = np.random.default_rng(seed)
                # Rewards favour actions that are often masked, so masking has to do the work.
                rewards = rng.normal(size=NUM_ACTIONS).astype(np.float32) * 3
                legal = rng.random((BATCH, NUM_ACTIONS)) < 0.4
                legal[:, 0] = False
                legal[np.arange(BATCH), rng.integers(1, NUM_ACTIONS, BATCH)] = True  # at least one legal
                _, out = plan_with(config, bandit_variables(rewards), seed, jnp.asarray(legal))
                action = np.asarray(out.action)
                assert legal[np.arange(BATCH), action].all(), (config.search_policy, seed)
                np.testing.assert_array_equal(np.asarray(out.action_probs)[~legal], 0.0)
                np.testing.assert_allclose(np.asarray(out.action_probs).sum(-1), 1.0, rtol=1e-5)

    @pytest.mark.slow
    def test_only_dummy_legal_acts_dummy(self):
        legal = np.zeros((BATCH, NUM_ACTIONS), bool)
        legal[:, 0] = True
        for config in (EXPLORING, GUMBEL_EXPLORING):
            tree_out, out = plan_with(config, bandit_variables(BANDIT_REWARDS), 0, jnp.asarray(legal))
            np.testing.assert_array_equal(out.action, 0)
            np.testing.assert_array_equal(out.action_probs, np.eye(NUM_ACTIONS)[[0] * BATCH])
            # Everything under the dummy is absorbing: Q(dummy) = 0 and the search value is raw / (N + 1).
            np.testing.assert_array_equal(out.stats.chosen_q, 0.0)
            np.testing.assert_array_equal(tree_out.search_tree.children_visits[:, 0, 0], config.num_simulations)

    def test_no_legal_action_falls_back_to_dummy(self):
        invalid = planner_lib.legal_to_invalid(jnp.array([[False, False, False], [False, True, False]]))
        np.testing.assert_array_equal(invalid, [[False, True, True], [True, False, True]])


def _dummy_subtree_mask(tree, b):
    """[N] bool: node lies on or under the root's dummy-action edge."""
    parents = np.asarray(tree.parents[b])
    action = np.asarray(tree.action_from_parent[b])
    visited = np.asarray(tree.node_visits[b]) > 0
    under = np.zeros(parents.shape, bool)
    for i in range(1, len(parents)):  # parents precede children in mctx's node order
        if visited[i] and parents[i] >= 0:
            under[i] = (parents[i] == 0 and action[i] == 0) or under[parents[i]]
    return under


class DummyActionTest(chex.TestCase):
    @staticmethod
    def _trap_variables():
        """Action 0 would pay 10 and lead to state 2 (valued 5, every move from it pays 10 again);
        real actions cost 1 and lead to state 1 (valued -2)."""
        next_state = np.ones((NUM_STATES, NUM_ACTIONS))
        next_state[:, 0] = 2
        next_state[2, :] = 2
        reward = np.full((NUM_STATES, NUM_ACTIONS), -1.0, np.float32)
        reward[:, 0] = 10.0
        reward[2, :] = 10.0
        return table_variables(next_state=next_state, reward=reward, value=[0.0, -2.0, 5.0, 0.0])

    @pytest.mark.slow
    def test_dummy_subtree_is_absorbing(self):
        legal = jnp.ones((BATCH, NUM_ACTIONS), bool)  # the dummy is searchable at the root for this test
        out, _ = plan_with(GREEDY, self._trap_variables(), 0, legal)
        tree = out.search_tree
        q = np.asarray(tree.summary().qvalues)
        np.testing.assert_array_equal(q[:, 0], 0.0)
        # Real moves are worse than the absorbing 0 here, which is what sends the search under the dummy.
        assert np.all(q[:, 1:] < 0.0)
        for b in range(BATCH):
            under = _dummy_subtree_mask(tree, b)
            assert under.sum() >= 5, "the search should go deep under the dummy (it is the best edge)"
            np.testing.assert_array_equal(np.asarray(tree.raw_values[b])[under], 0.0)
            np.testing.assert_array_equal(np.asarray(tree.node_values[b])[under], 0.0)
            np.testing.assert_array_equal(np.asarray(tree.children_rewards[b])[under], 0.0)
            np.testing.assert_array_equal(np.asarray(tree.embeddings.absorbing[b]), under)

    @pytest.mark.slow
    def test_without_absorbing_dummy_would_look_best(self):
        legal = jnp.ones((BATCH, NUM_ACTIONS), bool)
        out, _ = plan_with(GREEDY, self._trap_variables(), 0, legal, absorbing=False)
        assert np.all(np.asarray(out.search_tree.summary().qvalues[:, 0]) > 10.0)


class TwoPlayerTest(chex.TestCase):
    """Root player chooses between a safe move (1) and a blunder (2) after which the opponent wins with move 1.

    States: 0 root; 1 after the safe move; 2 after the blunder; 3 game over (sink). Actions 3, 4 are
    illegal at the root. Rewards belong to the player who just acted; all values are 0, so only the
    search can see the loss.
    """

    @staticmethod
    def _variables():
        next_state = np.full((NUM_STATES, NUM_ACTIONS), 3)
        next_state[0, 1], next_state[0, 2] = 1, 2
        reward = np.zeros((NUM_STATES, NUM_ACTIONS), np.float32)
        reward[2, 1] = 1.0  # the opponent's winning reply
        return table_variables(next_state=next_state, reward=reward, value=np.zeros(NUM_STATES))

    LEGAL = jnp.asarray(np.tile([False, True, True, False, False], (BATCH, 1)))

    @pytest.mark.slow
    def test_blunder_looks_bad_with_negative_discount(self):
        for config in (GREEDY, GUMBEL_GREEDY):
            out, summary = plan_with(config, self._variables(), 0, self.LEGAL, discount=-1.0)
            np.testing.assert_array_equal(summary.action, [1] * BATCH)
            q = np.asarray(out.search_tree.summary().qvalues)
            # Q(2) = 0 + (-1) * V(after blunder), and the opponent's win makes that V positive.
            assert np.all(q[:, 2] < -0.1), (config.search_policy, q)
            np.testing.assert_allclose(q[:, 1], 0.0, atol=1e-6)

    @pytest.mark.slow
    def test_positive_discount_would_misread_the_blunder(self):
        out, _ = plan_with(GREEDY, self._variables(), 0, self.LEGAL, discount=1.0)
        assert np.all(np.asarray(out.search_tree.summary().qvalues)[:, 2] > 0.5)


class UtilitiesTest(chex.TestCase):
    def test_tree_max_depth_golden(self):
        # Batch 0: chain 0<-1<-2<-3 plus 4 under root: depth 3. Batch 1: star, one unused node: depth 1.
        parents = jnp.array([[-1, 0, 1, 2, 0], [-1, 0, 0, 0, -1]])
        depth = tree_max_depth(types.SimpleNamespace(parents=parents))
        np.testing.assert_array_equal(depth, [3, 1])

    def test_tree_max_depth_long_chain(self):
        parents = jnp.arange(-1, 50)[None, :]  # node i's parent is i - 1
        np.testing.assert_array_equal(tree_max_depth(types.SimpleNamespace(parents=parents)), [50])

    def test_search_discount_sign(self):
        from moozi.envs.base import EnvSpec

        config = PlannerConfig(discount=0.9)
        one = EnvSpec(name="x", obs_shape=(1, 1, 1), num_actions=2, num_players=1)
        two = dataclasses.replace(one, num_players=2)
        assert planner_lib.search_discount(config, one) == pytest.approx(0.9)
        assert planner_lib.search_discount(config, two) == pytest.approx(-0.9)


@pytest.mark.parametrize(
    "field, value",
    [
        ("search_policy", "alphazero"),
        ("num_simulations", 0),
        ("dirichlet_fraction", 1.5),
        ("dirichlet_alpha", 0.0),
        ("temperature", -1.0),
        ("max_num_considered_actions", 0),
        ("gumbel_scale", -1.0),
        ("discount", 1.5),
        ("min_value_range", 0.0),
        ("policy_target", "values"),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(MooziError, match=field):
        PlannerConfig(**{field: value})


def test_config_accepts_policy_by_value():
    assert PlannerConfig(search_policy="gumbel_muzero").search_policy is SearchPolicy.GUMBEL_MUZERO


class InteriorDummyTest(chex.TestCase):
    """Every real move leads to state 1, lost for its mover: each of its moves leads to state 3, won
    for the opponent (Q = -1 with discount -1). The dummy would lead to an absorbing 0 instead."""

    @staticmethod
    def _variables(state_1_logits):
        next_state = np.full((NUM_STATES, NUM_ACTIONS), 3)
        next_state[0, :] = 1
        value = np.array([0.0, -1.0, 0.0, 1.0], np.float32)
        logits = np.zeros((NUM_STATES, NUM_ACTIONS), np.float32)
        logits[1] = state_1_logits
        return table_variables(next_state=next_state, reward=np.zeros((NUM_STATES, NUM_ACTIONS)), value=value,
                               logits=logits)

    @staticmethod
    def _interior_dummy_visits(tree) -> int:
        parents = np.asarray(tree.parents)
        action = np.asarray(tree.action_from_parent)
        visits = np.asarray(tree.node_visits)
        return int(np.sum(visits[(parents > 0) & (action == 0)]))

    @pytest.mark.slow
    def test_a_losing_side_cannot_escape_to_the_dummy_inside_the_tree(self):
        for config in (GREEDY, GUMBEL_GREEDY):
            out, _ = plan_with(config, self._variables(np.zeros(NUM_ACTIONS)), 0, legal_without_dummy(), discount=-1.0)
            assert self._interior_dummy_visits(out.search_tree) == 0, config.search_policy
            # State 1 is lost for its mover, so every root move looks good to the root player.
            assert np.all(np.asarray(out.search_tree.summary().qvalues)[:, 1:] > 0.0)

    def test_the_dummy_stays_open_where_the_model_predicts_the_end(self):
        ended = np.zeros(NUM_ACTIONS, np.float32)
        ended[0] = 5.0  # most of the prior on the dummy: the model says the game is over at state 1
        out, _ = plan_with(GUMBEL_GREEDY, self._variables(ended), 0, legal_without_dummy(), discount=-1.0)
        assert self._interior_dummy_visits(out.search_tree) > 0
