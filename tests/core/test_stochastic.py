"""Stochastic MuZero: the search on hand-made chance models, the straight-through code, each loss term
on hand-computed inputs, the K = 2 unroll through the network, and the encoder's extra input."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.core.loss import LossConfig
from moozi.core.network import NetworkConfig
from moozi.core.planner import PlannerConfig, SearchPolicy, make_muzero_model, make_planner
from moozi.core.scalar import Support
from moozi.core.stochastic_loss import (
    StochasticLossConfig,
    StochasticTrainingTarget,
    afterstate_value_term,
    chance_term,
    code_perplexity,
    commitment_term,
    gather_future_stacked_obs,
    make_stochastic_targets,
    next_value_discounts,
    next_value_targets,
    stochastic_loss_fn,
    stochastic_unroll,
)
from moozi.core.stochastic_network import AfterstateOutput, make_stochastic_network, straight_through_one_hot
from moozi.core.stochastic_planner import make_stochastic_planner
from moozi.core.targets import StepStorage, TargetConfig, make_targets
from moozi.errors import MooziError
from tests.helpers.batches import make_batch
from tests.helpers.table_network import TableNetwork, table_variables

# --------------------------------------------------------------------------- a hand-made chance model

# One-step gamble: action 1 ("A") pays +1 with probability 0.62 and -2 with 0.38 (mean -0.14), action 2
# ("B") pays +0.4 surely. The best single outcome is A's, the best mean is B's. 0.62 / 0.38 keeps mctx's
# chance rule argmax σ(c) / (n(c) + 1) free of exact ties (the first falls at counts 30 and 18).
P_WIN, WIN, LOSS, SURE = 0.62, 1.0, -2.0, 0.4
S, A, C, BATCH = 4, 3, 2, 4  # states (0 root, 1 a zero sink, 2 and 3 for the sign test), actions, codes
GREEDY = PlannerConfig(num_simulations=48, temperature=0.0, dirichlet_fraction=0.0)


@dataclasses.dataclass(frozen=True)
class TableChanceNetwork:
    """A known stochastic model with stochastic_network.py's interface; hidden states are integer ids.

    Afterstate of (s, a) is s * A + a. `variables` holds: logits [S, A] and value [S] of states;
    q [S*A], chance_logits [S*A, C], next_state [S*A, C] and reward [S*A, C] of afterstates.
    """

    num_chance_outcomes: int = C

    def initial_inference(self, v, stacked_obs):
        state = jnp.zeros((stacked_obs.shape[0],), jnp.int32)
        return self._state(v, state, jnp.zeros(state.shape))

    def afterstate_inference(self, v, state, action):
        after = state * A + action
        return AfterstateOutput(afterstate=after, value=v["q"][after], value_logits=None,
                                chance_logits=v["chance_logits"][after])

    def recurrent_inference(self, v, afterstate, code):
        c = jnp.argmax(code, axis=-1)
        return self._state(v, v["next_state"][afterstate, c], v["reward"][afterstate, c])

    @staticmethod
    def _state(v, state, reward):
        return _State(hidden_state=state, value=v["value"][state], reward=reward, policy_logits=v["logits"][state])


@dataclasses.dataclass(frozen=True)
class TurnTableNetwork(TableChanceNetwork):
    """TableChanceNetwork whose every chance step also predicts the turn passing with one logit
    (None: no turn head, as in games whose turns alternate)."""

    turn_logit: float | None = None

    def recurrent_inference(self, v, afterstate, code):
        out = super().recurrent_inference(v, afterstate, code)
        if self.turn_logit is None:
            return out
        return _TurnState(*out, turn_logit=jnp.full(out.value.shape, self.turn_logit))


class _TurnState(NamedTuple):
    hidden_state: Any
    value: Any
    reward: Any
    policy_logits: Any
    turn_logit: Any


class _State(NamedTuple):
    hidden_state: Any
    value: Any
    reward: Any
    policy_logits: Any


def chance_tables():
    """Every afterstate: outcome 0 surely, to the zero sink, no reward; every state: value 0, uniform prior."""
    chance_logits = np.zeros((S * A, C), np.float32)
    chance_logits[:, 1] = -1e9
    return dict(
        logits=np.zeros((S, A), np.float32), value=np.zeros(S, np.float32), q=np.zeros(S * A, np.float32),
        chance_logits=chance_logits, next_state=np.ones((S * A, C), np.int32), reward=np.zeros((S * A, C), np.float32),
    )


def gamble_variables():
    t = chance_tables()
    t["chance_logits"][1] = np.log([P_WIN, 1.0 - P_WIN])
    t["reward"][1] = [WIN, LOSS]
    t["reward"][2] = [SURE, SURE]
    # The dummy claims a fortune; below it everything must be 0 (absorbing).
    t["q"][0] = 5.0
    t["reward"][0] = [5.0, 5.0]
    return jax.tree.map(jnp.asarray, t)


def sign_variables():
    """Two players: A leads to state 2, worth +0.5 to the opponent; B to state 3, worth -0.3 to the opponent."""
    t = chance_tables()
    t["chance_logits"][1:3] = 0.0
    t["next_state"][1] = 2
    t["next_state"][2] = 3
    t["value"][2:4] = [0.5, -0.3]
    return jax.tree.map(jnp.asarray, t)


def legal(dummy: bool = False):
    mask = np.ones((BATCH, A), bool)
    mask[:, 0] = dummy
    return jnp.asarray(mask)


@functools.lru_cache(maxsize=None)
def stochastic_planner(discount: float, config: PlannerConfig = GREEDY):
    return jax.jit(make_stochastic_planner(config, TableChanceNetwork(), A, C, discount))


OBS = jnp.zeros((BATCH, 1, 1, 1))


def chance_visit_split(visits: int, probs) -> np.ndarray:
    """mctx's chance-node rule replayed: each visit goes to argmax p(c) / (n(c) + 1)."""
    counts = np.zeros(len(probs), np.int64)
    for _ in range(visits):
        counts[np.argmax(np.asarray(probs) / (counts + 1))] += 1
    return counts


class TestStochasticSearch:
    @pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
    def test_chance_nodes_pick_the_best_mean_where_the_likeliest_outcome_misleads(self):
        out = stochastic_planner(0.997)(gamble_variables(), jax.random.PRNGKey(0), OBS, legal())
        np.testing.assert_array_equal(out.action, [2] * BATCH)
        np.testing.assert_allclose(out.action_probs.sum(-1), 1.0, rtol=1e-6)
        visits = np.rint(np.asarray(out.root.visit_share) * GREEDY.num_simulations).astype(int)  # [B, A]
        # Exact backups: an afterstate starts at its raw value q = 0, then every later visit adds one
        # chance edge's reward (all values below are 0). B: 0.4 (n - 1) / n. A: split by σ, as mctx does.
        n_a, n_b = visits[0, 1], visits[0, 2]
        wins, losses = chance_visit_split(n_a - 1, [P_WIN, 1.0 - P_WIN])
        np.testing.assert_allclose(out.root.q[:, 2], SURE * (n_b - 1) / n_b, rtol=1e-5)
        np.testing.assert_allclose(out.root.q[:, 1], (wins * WIN + losses * LOSS) / n_a, rtol=1e-5)
        assert n_b > n_a and out.root.q[0, 1] < 0.0
        np.testing.assert_allclose(out.stats.chosen_q, out.root.q[:, 2])
        # Depth in env steps: a move and its chance outcome is one step.
        assert np.all(np.asarray(out.stats.max_depth) >= 2)

        # A deterministic model that sees A's likeliest outcome (+1) only: the plain planner picks A.
        reward = np.zeros((2, A), np.float32)
        reward[0] = [0.0, WIN, SURE]
        table = table_variables(next_state=np.ones((2, A)), reward=reward, value=np.zeros(2))
        muzero = jax.jit(make_planner(GREEDY, make_muzero_model(TableNetwork(), 0.997)))
        wrong = muzero(table, jax.random.PRNGKey(0), OBS, legal())
        np.testing.assert_array_equal(wrong.action, [1] * BATCH)
        np.testing.assert_allclose(wrong.stats.chosen_q, WIN, rtol=1e-6)

    @pytest.mark.slow
    def test_dummy_action_is_absorbing(self):
        out = stochastic_planner(0.997)(gamble_variables(), jax.random.PRNGKey(1), OBS, legal(dummy=True))
        np.testing.assert_array_equal(out.root.q[:, 0], 0.0)  # not the model's 5
        np.testing.assert_array_equal(out.action, [2] * BATCH)

    @pytest.mark.parametrize("discount, best", [(-1.0, 2), (1.0, 1)])
    @pytest.mark.slow
    def test_two_player_sign_is_carried_by_the_step_not_by_chance(self, discount, best):
        # Values are from the player to move: after A the opponent holds +0.5, after B -0.3. With the
        # two-player discount -1 the mover prefers B; a search that forgot the sign would prefer A.
        out = stochastic_planner(discount)(sign_variables(), jax.random.PRNGKey(0), OBS, legal())
        np.testing.assert_array_equal(out.action, [best] * BATCH)
        worse = 3 - best
        assert np.all(out.root.q[:, best] > 0.0) and np.all(out.root.q[:, worse] < 0.0)

    @pytest.mark.parametrize("turn_logit, best", [(-30.0, 1), (30.0, 2), (None, 2)])
    @pytest.mark.slow
    def test_a_learned_turn_sets_each_steps_sign(self, turn_logit, best):
        # sign_variables' values are from the player to move at states 2 and 3. If the model says the
        # turn stays with the mover (logit -30), +0.5 at state 2 is the mover's own: it prefers A; if the
        # turn passes (+30) the search is the two-player one above and prefers B.
        planner = jax.jit(make_stochastic_planner(GREEDY, TurnTableNetwork(turn_logit=turn_logit), A, C, -1.0))
        out = planner(sign_variables(), jax.random.PRNGKey(0), OBS, legal())
        np.testing.assert_array_equal(out.action, [best] * BATCH)

    def test_gumbel_is_refused(self):
        with pytest.raises(MooziError, match="PUCT only"):
            make_stochastic_planner(PlannerConfig(search_policy=SearchPolicy.GUMBEL_MUZERO), TableChanceNetwork(),
                                    A, C, 1.0)

    def test_codebook_size_is_checked_when_traced(self):
        planner = make_stochastic_planner(GREEDY, TableChanceNetwork(), A, C + 1, 1.0)
        with pytest.raises(MooziError, match="chance prior"):
            jax.eval_shape(planner, gamble_variables(), jax.random.PRNGKey(0), OBS, legal())


# --------------------------------------------------------------------------- straight-through code


class TestStraightThrough:
    LOGITS = jnp.array([[0.3, -1.2, 2.0, 0.5], [1.0, 1.7, -0.4, 1.69]], jnp.float32)

    def test_forward_is_exactly_one_hot(self):
        code = jax.jit(straight_through_one_hot)(self.LOGITS)
        np.testing.assert_array_equal(code, [[0, 0, 1, 0], [0, 1, 0, 0]])

    def test_gradient_is_the_softmax_gradient(self):
        weights = jnp.array([[0.5, -2.0, 1.0, 3.0], [-1.0, 0.25, 2.0, 0.0]], jnp.float32)
        grad = jax.grad(lambda x: jnp.sum(weights * straight_through_one_hot(x)))(self.LOGITS)
        # d/dx_j sum_i w_i softmax(x)_i = p_j (w_j - sum_i p_i w_i), by hand.
        x, w = np.asarray(self.LOGITS, np.float64), np.asarray(weights, np.float64)
        p = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
        expected = p * (w - np.sum(p * w, axis=-1, keepdims=True))
        np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)
        softmax_grad = jax.grad(lambda x: jnp.sum(weights * jax.nn.softmax(x)))(self.LOGITS)
        np.testing.assert_allclose(grad, softmax_grad, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- loss terms by hand


def _logits(probs):
    return jnp.log(jnp.asarray(probs, jnp.float32))


class TestLossTerms:
    def test_afterstate_value_term(self):
        support = Support(-2, 2, transform="identity")
        targets = jnp.array([[0.5, -1.0, 7.0]])  # z_t, z_{t+1}, z_{t+2}: Q^0, Q^1 use the first two
        q = [[0.1, 0.2, 0.3, 0.2, 0.2], [0.05, 0.6, 0.15, 0.1, 0.1]]
        term, per_step = afterstate_value_term(targets, _logits([q]), support)
        # z = 0.5 is half on category 0 (index 2), half on 1 (index 3); z = -1 is all on index 1.
        step0, step1 = -(0.5 * np.log(0.3) + 0.5 * np.log(0.2)), -np.log(0.6)
        np.testing.assert_allclose(per_step, [[step0, step1]], rtol=1e-6)
        np.testing.assert_allclose(term, [(step0 + step1) / 2], rtol=1e-6)

    def test_chance_term_masks_and_stops_the_code_gradient(self):
        sigma = _logits([[[0.7, 0.2, 0.1], [0.25, 0.25, 0.5]]])
        codes = jnp.array([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
        term, per_step = chance_term(sigma, codes, jnp.array([[1.0, 0.0]]))
        np.testing.assert_allclose(per_step, [[-np.log(0.2), 0.0]], rtol=1e-6)
        np.testing.assert_allclose(term, [-np.log(0.2) / 2], rtol=1e-6)
        code_grad = jax.grad(lambda c: jnp.sum(chance_term(sigma, c, jnp.ones((1, 2)))[0]))(codes)
        np.testing.assert_array_equal(code_grad, 0.0)

    def test_commitment_term_and_its_gradient(self):
        probs = np.array([[[0.7, 0.2, 0.1], [0.3, 0.3, 0.4]]])
        logits = _logits(probs)
        term, per_step = commitment_term(logits, jnp.array([[1.0, 1.0]]))
        step0 = 0.3**2 + 0.2**2 + 0.1**2  # one-hot on 0
        step1 = 0.3**2 + 0.3**2 + 0.6**2  # one-hot on 2
        np.testing.assert_allclose(per_step, [[step0, step1]], rtol=1e-5)
        np.testing.assert_allclose(term, [(step0 + step1) / 2], rtol=1e-5)
        # Only the softmax moves: d/dx ||e - p||² = J_softmax^T (-2 (e - p)), with the one-hot e fixed.
        grad = jax.grad(lambda x: jnp.sum(commitment_term(x, jnp.ones((1, 2)))[0]))(logits)
        e = np.eye(3)[np.argmax(probs, -1)]
        w = -2.0 * (e - probs) / 2  # the 1/K of the mean
        np.testing.assert_allclose(grad, probs * (w - np.sum(probs * w, -1, keepdims=True)), rtol=1e-4, atol=1e-7)

    def test_code_perplexity(self):
        one_code = jnp.tile(jnp.array([1.0, 0.0, 0.0]), (4, 2, 1))
        np.testing.assert_allclose(code_perplexity(one_code, jnp.ones((4, 2))), 1.0, rtol=1e-6)
        two_codes = one_code.at[:, 1].set(jnp.array([0.0, 1.0, 0.0]))
        np.testing.assert_allclose(code_perplexity(two_codes, jnp.ones((4, 2))), 2.0, rtol=1e-6)


# --------------------------------------------------------------------------- the network and the whole loss

OBS_SHAPE, L, NA, NC, K = (3, 3, 2), 2, 4, 5, 2
TINY_RESNET = NetworkConfig(kind="resnet", channels=4, representation_blocks=1, prediction_blocks=1,
                            dynamics_blocks=1, head_hidden=8)
TINY_MLP = NetworkConfig(kind="mlp", mlp_hidden_sizes=(16,), mlp_hidden_state_size=8, head_hidden=8)


@functools.cache
def _network(config):
    return make_stochastic_network(config, obs_shape=OBS_SHAPE, history_length=L, num_actions=NA,
                                   num_chance_outcomes=NC)


def _batch(seed=1, batch_size=3):
    target = make_batch(seed, batch_size=batch_size, num_unroll=K, obs_shape=OBS_SHAPE, history_length=L,
                        num_actions=NA)
    future = np.random.default_rng(seed + 100).uniform(size=(batch_size, K, *target.stacked_obs.shape[1:]))
    return StochasticTrainingTarget(target, jnp.asarray(future, jnp.float32))


def _variables(network, batch):
    return jax.jit(network.init)(jax.random.PRNGKey(0), batch.target.stacked_obs)


_loss = jax.jit(stochastic_loss_fn, static_argnames=("network", "config"))


@pytest.mark.parametrize("config, hidden", [(TINY_RESNET, (3, 3, 4)), (TINY_MLP, (8,))], ids=["resnet", "mlp"])
@pytest.mark.slow
def test_k2_unroll_shapes(config, hidden):
    network, batch = _network(config), _batch()
    variables = _variables(network, batch)
    unroll = jax.jit(stochastic_unroll, static_argnums=(0, 4))
    out, stats = unroll(network, variables["params"], variables["batch_stats"], batch, 0.5)
    B, Z = 3, network.config.support.size
    assert len(out.states) == K + 1
    for state in out.states:
        assert state.hidden_state.shape == (B, *hidden)
        assert state.policy_logits.shape == (B, NA) and state.value_logits.shape == (B, Z)
        assert state.value.shape == state.reward.shape == (B,) and state.reward_logits.shape == (B, Z)
    assert out.afterstates.afterstate.shape == (B, K, *hidden)
    assert out.afterstates.value.shape == (B, K) and out.afterstates.value_logits.shape == (B, K, Z)
    assert out.afterstates.chance_logits.shape == (B, K, NC)
    assert out.chance.logits.shape == out.chance.code.shape == (B, K, NC)
    np.testing.assert_array_equal(out.chance.code.sum(-1), 1.0)
    assert jax.tree.structure(stats) == jax.tree.structure(variables["batch_stats"])


def _zero_heads(params):
    """Zeroes the last layer of every categorical head, so every value, reward, policy, Q, σ and encoder
    logit is 0: each cross-entropy is then log(number of categories), whatever its target."""
    def zero(path, leaf):
        keys = [getattr(p, "key", "") for p in path]
        in_head = any(k.endswith("head") or k.startswith("_CategoricalHead") for k in keys)
        return jnp.zeros_like(leaf) if in_head and "Dense_0" in keys else leaf
    return jax.tree_util.tree_map_with_path(zero, params)


@pytest.mark.slow
def test_whole_loss_by_hand_with_uniform_heads():
    network, batch = _network(TINY_MLP), _batch()
    variables = _variables(network, batch)
    policy_mask = np.ones((3, K + 1), np.float32)
    policy_mask[0, 2] = 0.0  # example 0's episode ends at t+1: no o_{t+2}, no policy target there
    batch = batch._replace(target=batch.target._replace(policy_mask=jnp.asarray(policy_mask)))
    config = StochasticLossConfig(l2_coef=0.0, consistency_coef=0.0, value_coef=0.25, afterstate_value_coef=0.5,
                                  chance_coef=1.0, commitment_coef=0.3)
    _, aux = _loss(_zero_heads(variables["params"]), variables["batch_stats"], None, batch, network=network,
                   config=config)
    log_a, log_z, log_c = np.log(NA), np.log(network.config.support.size), np.log(NC)
    # Uniform encoder logits: argmax is code 0, ||e_0 - 1/C||² = (C - 1) / C per step.
    commit = (NC - 1) / NC
    kept = np.array([0.5, 1.0, 1.0])  # share of example 0's K = 2 chance steps with an o_{t+k+1}
    expected = {
        "policy_loss": log_a + log_a * np.array([1.0, 2.0, 2.0]) / K,
        "value_loss": 0.25 * 2 * log_z * np.ones(3),
        "reward_loss": K * log_z * np.ones(3),
        "afterstate_value_loss": 0.5 * log_z * np.ones(3),
        "chance_loss": log_c * kept,
        "commitment_loss": 0.3 * commit * kept,
    }
    for name, value in expected.items():
        np.testing.assert_allclose(aux.terms[name], value, rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(aux.per_example_loss, sum(expected.values()), rtol=1e-5)
    np.testing.assert_allclose(aux.metrics["code_perplexity"], 1.0, rtol=1e-6)  # every transition got code 0


@functools.partial(jax.jit, static_argnames=("network",))
def _term_grads(params, batch_stats, batch, selection, *, network):
    """The gradient of a weighted sum of loss terms; the weights are traced, so one program serves every choice."""
    def selected(p):
        _, aux = stochastic_loss_fn(p, batch_stats, None, batch, network=network, config=StochasticLossConfig())
        return sum(weight * jnp.mean(aux.terms[name]) for name, weight in selection.items())
    return jax.grad(selected)(params)


def _grad_norms(term, last_step_mask: float = 1.0):
    """Summed |gradient| per top-level module, of `term` alone; last_step_mask masks step K's policy and chance."""
    network, batch = _network(TINY_MLP), _batch()
    mask = batch.target.policy_mask.at[:, K].set(last_step_mask)
    batch = batch._replace(target=batch.target._replace(policy_mask=mask))
    variables = _variables(network, batch)
    selection = {name: float(name == term) for name in ("chance_loss", "reward_loss")}
    grad = _term_grads(variables["params"], variables["batch_stats"], batch, selection, network=network)
    return {name: float(sum(jnp.sum(jnp.abs(g)) for g in jax.tree.leaves(sub))) for name, sub in grad.items()}


@pytest.mark.slow
def test_encoder_learns_through_the_straight_through_code_not_through_sigma():
    # σ⁰'s cross-entropy alone (σ¹ masked): its target is sg(c_{t+1}) and σ⁰ = ψ(φ(h(o_t), a_t)) reads no
    # code, so no gradient reaches the encoder. σ¹ does reach it, legitimately: s¹ = g(as⁰, c_{t+1}).
    norms = _grad_norms("chance_loss", last_step_mask=0.0)
    assert norms["encoder"] == 0.0 and norms["afterstate_prediction"] > 0.0
    assert _grad_norms("chance_loss")["encoder"] > 0.0
    # The reward term reaches the encoder through g's straight-through code input.
    assert _grad_norms("reward_loss")["encoder"] > 0.0


def test_loss_config_checks():
    assert isinstance(StochasticLossConfig(), LossConfig)
    with pytest.raises(MooziError, match="commitment_coef"):
        StochasticLossConfig(commitment_coef=-1.0)
    with pytest.raises(MooziError, match="afterstate_value_target must be one of .*'next_value'"):
        StochasticLossConfig(afterstate_value_target="td")


# --------------------------------------------------------------------------- the one-step afterstate target


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_next_value_discounts_by_hand(xp):
    # t = 0 in an episode of T = 5 steps (t = 4 terminal): o_1, o_2, o_3 are all positions to value.
    # t = 2: o_3 is, o_4 is terminal (value 0) and o_5 lies past the end.
    args = dict(num_unroll=3, discount=0.9, xp=xp)
    step_index, episode_length = np.array([0, 2]), np.array([5, 5])
    np.testing.assert_allclose(next_value_discounts(step_index, episode_length, None, discount_sign=-1.0, **args),
                               [[-0.9, -0.9, -0.9], [-0.9, 0.0, 0.0]], rtol=1e-6)
    # Turns that may repeat: only where the player to move changes is the next position's value negated.
    passes = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]], np.float32)
    np.testing.assert_allclose(next_value_discounts(step_index, episode_length, passes, discount_sign=-1.0, **args),
                               [[0.9, -0.9, 0.9], [-0.9, 0.0, 0.0]], rtol=1e-6)


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_next_value_target_is_one_step_through_the_real_next_position():
    network, batch = _network(TINY_MLP), _batch()
    variables = _variables(network, batch)
    target_variables = jax.jit(network.init)(jax.random.PRNGKey(7), batch.target.stacked_obs)  # not the online net
    discounts = jnp.asarray([[1.0, -1.0], [0.5, 0.0], [0.0, 0.0]], jnp.float32)
    batch = batch._replace(next_value_discount=discounts)
    out = network.initial_inference(target_variables, batch.future_stacked_obs.reshape(3 * K, *OBS_SHAPE[:2], -1))
    values = np.asarray(out.value).reshape(3, K)
    expected = np.asarray(batch.target.rewards) + np.asarray(discounts) * values
    np.testing.assert_allclose(next_value_targets(network, target_variables, batch), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(expected[2], batch.target.rewards[2])  # a terminal next position: the reward alone

    # Through the whole loss: Q's term is its cross-entropy against these targets and nothing else changes.
    config = StochasticLossConfig(afterstate_value_target="next_value", afterstate_value_coef=0.5)
    _, aux = _loss(variables["params"], variables["batch_stats"], target_variables, batch, network=network,
                   config=config)
    _, base = _loss(variables["params"], variables["batch_stats"], target_variables, batch, network=network,
                    config=dataclasses.replace(config, afterstate_value_target="return"))
    unrolled, _ = stochastic_unroll(network, variables["params"], variables["batch_stats"], batch,
                                    config.dynamics_gradient_scale)
    q_term, _ = afterstate_value_term(jnp.asarray(expected), unrolled.afterstates.value_logits,
                                      network.config.support)
    np.testing.assert_allclose(aux.terms["afterstate_value_loss"], 0.5 * np.asarray(q_term), rtol=1e-5)
    assert not np.allclose(aux.terms["afterstate_value_loss"], base.terms["afterstate_value_loss"])
    for name in ("policy_loss", "value_loss", "reward_loss", "chance_loss"):
        np.testing.assert_allclose(aux.terms[name], base.terms[name], rtol=1e-6, err_msg=name)
    with pytest.raises(MooziError, match="next_value_discount"):
        next_value_targets(network, target_variables, batch._replace(next_value_discount=None))


# --------------------------------------------------------------------------- consistency over the unroll


def _cosine_distance_np(a, b):
    a, b = np.asarray(a, np.float64).reshape(len(a), -1), np.asarray(b, np.float64).reshape(len(b), -1)
    return 1.0 - np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


@pytest.mark.slow  # ~36 s here: two whole losses compiled
def test_consistency_over_the_unroll_by_hand():
    # Layer norm: no batch moments, so each state can be projected on its own and compared by hand.
    network, batch = _network(dataclasses.replace(TINY_MLP, normalization="layer")), _batch()
    variables = _variables(network, batch)
    policy_mask = np.ones((3, K + 1), np.float32)
    policy_mask[1, 2] = 0.0  # example 1's episode ends at t+1: there is no o_{t+2} to compare s² with
    # As the buffer gathers them, the first future history is the next one that "first" compares with.
    future = batch.future_stacked_obs.at[:, 0].set(batch.target.next_stacked_obs)
    batch = batch._replace(target=batch.target._replace(policy_mask=jnp.asarray(policy_mask)),
                           future_stacked_obs=future)
    config = StochasticLossConfig(consistency_coef=2.0, consistency_steps="all")
    _, aux = _loss(variables["params"], variables["batch_stats"], None, batch, network=network, config=config)

    unrolled, _ = stochastic_unroll(network, variables["params"], variables["batch_stats"], batch,
                                    config.dynamics_gradient_scale)
    distances = np.stack([
        _cosine_distance_np(network.project(variables, unrolled.states[k].hidden_state),
                            network.initial_inference(variables, batch.future_stacked_obs[:, k - 1]).hidden_state)
        for k in range(1, K + 1)], axis=1)  # [B, K]
    expected = 2.0 * np.sum(distances * policy_mask[:, 1:], axis=1) / K
    np.testing.assert_allclose(aux.terms["consistency_loss"], expected, rtol=1e-4, atol=1e-6)

    # "first" is loss.py's term on s¹ alone; the other terms do not change with the choice.
    _, first = _loss(variables["params"], variables["batch_stats"], None, batch, network=network,
                     config=dataclasses.replace(config, consistency_steps="first"))
    np.testing.assert_allclose(first.terms["consistency_loss"], 2.0 * distances[:, 0], rtol=1e-4, atol=1e-6)
    for name in ("policy_loss", "value_loss", "reward_loss", "afterstate_value_loss", "chance_loss"):
        np.testing.assert_allclose(aux.terms[name], first.terms[name], rtol=1e-6, err_msg=name)
    with pytest.raises(MooziError, match="consistency_steps must be one of .*'all'"):
        StochasticLossConfig(consistency_steps="every")


# --------------------------------------------------------------------------- the encoder's extra input


@pytest.mark.slow
def test_future_stacked_obs_are_the_next_targets_histories():
    T, config = 6, TargetConfig(history_length=2, num_unroll_steps=3, td_steps=2, discount=1.0)
    gen = np.random.default_rng(0)
    storage = StepStorage(
        obs=gen.uniform(size=(T, *OBS_SHAPE)).astype(np.float32),
        action=np.r_[gen.integers(1, NA, T - 1), 0].astype(np.int32),
        reward=gen.uniform(size=T).astype(np.float32),
        root_value=gen.uniform(size=T).astype(np.float32),
        action_probs=np.full((T, NA), 1.0 / NA, np.float32),
        step_index=np.arange(T, dtype=np.int32),
        episode_length=np.full(T, T, np.int32),
    )
    kwargs = dict(config=config, num_actions=NA, discount_sign=1.0)
    indices = jnp.arange(T)
    out = jax.jit(make_stochastic_targets, static_argnames=tuple(kwargs))(storage, indices, **kwargs)
    future = np.asarray(out.future_stacked_obs)  # [T, K, H, W, C_h]
    assert future.shape == (T, 3, *out.target.stacked_obs.shape[1:])
    np.testing.assert_array_equal(future[:, 0], out.target.next_stacked_obs)
    expected_discounts = [[float(t + k < T - 1) for k in range(1, 4)] for t in range(T)]  # o_{t+k} not terminal
    np.testing.assert_array_equal(out.next_value_discount, expected_discounts)
    host = gather_future_stacked_obs(storage, np.arange(T), config=config, num_actions=NA)  # numpy row reads
    np.testing.assert_array_equal(host, future)
    histories = np.asarray(make_targets(storage, indices, **kwargs).stacked_obs)  # the history at each t
    frames = L * OBS_SHAPE[-1]
    for t in range(T):
        for k in range(1, 4):
            if t + k < T:
                np.testing.assert_array_equal(future[t, k - 1], histories[t + k], err_msg=f"t={t} k={k}")
            else:  # past the end: its newest frame is zero and the action leading to it the dummy
                np.testing.assert_array_equal(future[t, k - 1][..., frames - OBS_SHAPE[-1]:frames], 0.0)


@pytest.mark.slow
def test_planner_searches_the_learned_network():
    network, batch = _network(TINY_MLP), _batch()
    variables = _variables(network, batch)
    config = PlannerConfig(num_simulations=8, temperature=1.0)
    planner = jax.jit(make_stochastic_planner(config, network, NA, NC, -0.997))
    legal_mask = jnp.asarray(np.array([[0, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0]], bool))  # the last row: is_last
    out = planner(variables, jax.random.PRNGKey(3), batch.target.stacked_obs, legal_mask)
    assert out.action.shape == out.root_value.shape == out.stats.max_depth.shape == (3,)
    assert out.action_probs.shape == out.root.prior.shape == out.root.q.shape == (3, NA)
    assert bool(jnp.all(jnp.take_along_axis(legal_mask, out.action[:, None], 1)))
    np.testing.assert_allclose(out.action_probs.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out.action_probs[~np.asarray(legal_mask)], 0.0)
    assert np.all(np.isfinite(np.asarray(out.root_value)))
