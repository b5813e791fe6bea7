"""The loss (thesis 5.2.9): gradient scaling, stop-gradient, weights, masks, targets."""

import dataclasses
import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from moozi.core.loss import LossConfig, cosine_distance, loss_fn, scale_gradient, turn_term
from moozi.core.network import NetworkConfig, make_network
from moozi.core.scalar import scalar_to_two_hot
from moozi.errors import MooziError
from tests.helpers.batches import make_batch

OBS_SHAPE, L, A = (5, 5, 2), 2, 4
TINY_RESNET = NetworkConfig(
    kind="resnet", channels=4, representation_blocks=1, prediction_blocks=1, dynamics_blocks=1, head_hidden=16
)


@functools.cache
def _network(config, obs_shape=OBS_SHAPE):
    # One Network object per config, so the jitted loss below compiles once per shape.
    return make_network(config, obs_shape=obs_shape, history_length=L, num_actions=A)


def _setup(config=TINY_RESNET, batch_size=4, num_unroll=3, **batch_kwargs):
    network = _network(config)
    batch = make_batch(1, batch_size=batch_size, num_unroll=num_unroll, **batch_kwargs)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), batch.stacked_obs)
    return network, variables, batch


_jitted_loss_fn = jax.jit(loss_fn, static_argnames=("network", "config"))


def _loss(network, variables, batch, config, target_variables=None):
    return _jitted_loss_fn(
        variables["params"], variables["batch_stats"], target_variables, batch, network=network, config=config
    )


class ScaleGradientTest(parameterized.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_identity_forward_and_halved_gradient(self):
        x = jnp.array([0.3, -1.7, 2.5, 1e-3])
        np.testing.assert_array_equal(self.variant(scale_gradient, static_argnums=1)(x, 0.5), x)

        def toy(v, scale):  # a toy "dynamics" after the gradient scale
            return jnp.sum(jnp.sin(scale_gradient(v, scale)) * jnp.arange(1.0, 5.0))

        plain = jax.grad(toy)(x, 1.0)
        halved = self.variant(jax.grad(toy), static_argnums=1)(x, 0.5)
        np.testing.assert_array_equal(halved, 0.5 * plain)

    @pytest.mark.slow
    def test_dynamics_entrance_gradient_is_halved(self):
        network, variables, batch = _setup()
        hidden = jax.jit(network.initial_inference)(variables, batch.stacked_obs).hidden_state
        action = batch.actions[:, 0]

        def value_after_dynamics(h, scale):
            return jnp.sum(network.recurrent_inference(variables, scale_gradient(h, scale), action).value)

        grad_fn = jax.jit(jax.grad(value_after_dynamics), static_argnums=1)
        plain = grad_fn(hidden, 1.0)
        halved = grad_fn(hidden, 0.5)
        assert float(jnp.max(jnp.abs(plain))) > 0
        np.testing.assert_array_equal(halved, 0.5 * plain)


class LossTest(parameterized.TestCase):
    def test_cosine_distance(self):
        a = jnp.array([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
        b = jnp.array([[0.0, 3.0], [2.0, 2.0], [-1.0, 0.0]])
        np.testing.assert_allclose(cosine_distance(a, b), [1.0, 0.0, 2.0], atol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    @pytest.mark.slow
    def test_metrics_and_shapes(self):
        network, variables, batch = _setup()
        config = LossConfig()
        # The raw loss_fn, so the without_jit variant really runs eagerly.
        loss, aux = self.variant(
            lambda v, b: loss_fn(v["params"], v["batch_stats"], None, b, network=network, config=config)
        )(variables, batch)
        chex.assert_shape(loss, ())
        chex.assert_shape([aux.priorities, aux.per_example_loss], (4,))
        for name in ("policy_loss", "value_loss", "reward_loss", "consistency_loss", "l2_loss", "total_loss"):
            chex.assert_shape(aux.metrics[name], ())
            assert np.isfinite(aux.metrics[name])
        terms = sum(aux.metrics[n] for n in ("policy_loss", "value_loss", "reward_loss", "consistency_loss"))
        np.testing.assert_allclose(aux.metrics["total_loss"], terms + aux.metrics["l2_loss"], rtol=1e-5)
        np.testing.assert_allclose(loss, aux.metrics["total_loss"], rtol=1e-6)
        assert jax.tree.structure(aux.batch_stats) == jax.tree.structure(variables["batch_stats"])

    @pytest.mark.slow
    def test_terms_match_their_formulas(self):
        network, variables, batch = _setup(num_unroll=2)
        config = LossConfig(value_coef=0.25, consistency_coef=0.0, l2_coef=1e-4)
        _, aux = _loss(network, variables, batch, config)
        # Recompute the root value term and the priority from an independent forward pass.
        root, _ = jax.jit(network.initial_inference_train)(variables, batch.stacked_obs)
        target = batch.partial_return[:, 0] + batch.bootstrap_discount[:, 0] * batch.bootstrap_value[:, 0]
        np.testing.assert_allclose(aux.priorities, jnp.abs(root.value - target), rtol=1e-5, atol=1e-6)
        log_p = jax.nn.log_softmax(root.policy_logits)
        root_policy_ce = -jnp.sum(batch.action_probs[:, 0] * log_p, -1)
        # Removing steps 1..K from the policy target changes only the mean over K.
        masked = batch._replace(policy_mask=batch.policy_mask.at[:, 1:].set(0.0))
        _, aux_masked = _loss(network, variables, masked, config)
        np.testing.assert_allclose(aux_masked.terms["policy_loss"], root_policy_ce, rtol=1e-5)
        l2 = 1e-4 * sum(float(jnp.sum(p**2)) for p in jax.tree.leaves(variables["params"]))
        np.testing.assert_allclose(aux.metrics["l2_loss"], l2, rtol=1e-5)
        # The reward term is the sum over K of CE(Φ(r), r̂): at least K * entropy of the two-hot targets.
        two_hot = scalar_to_two_hot(batch.rewards, network.config.support)
        entropy = -jnp.sum(jnp.where(two_hot > 0, two_hot * jnp.log(two_hot), 0.0), axis=(1, 2))
        assert bool(jnp.all(aux.terms["reward_loss"] >= entropy - 1e-5))

    @pytest.mark.slow
    def test_importance_weight_scales_per_example_loss(self):
        network, variables, batch = _setup()
        config = LossConfig()
        _, aux = _loss(network, variables, batch, config)
        weighted = batch._replace(importance_weight=batch.importance_weight.at[1].set(2.0))
        _, aux2 = _loss(network, variables, weighted, config)
        expected = aux.per_example_loss.at[1].multiply(2.0)
        np.testing.assert_allclose(aux2.per_example_loss, expected, rtol=1e-6)
        np.testing.assert_allclose(
            aux2.metrics["total_loss"] - aux.metrics["total_loss"], aux.per_example_loss[1] / 4, rtol=1e-4
        )

    @pytest.mark.slow
    def test_policy_mask_removes_policy_term(self):
        network, variables, batch = _setup(num_unroll=3)
        config = LossConfig()
        _, aux = _loss(network, variables, batch, config)
        mask = batch.policy_mask.at[0, 2].set(0.0)
        masked = batch._replace(policy_mask=mask)
        _, aux_m = _loss(network, variables, masked, config)
        # Any target under a zero mask is ignored.
        scrambled = masked._replace(action_probs=masked.action_probs.at[0, 2].set(jnp.array([1.0, 0, 0, 0])))
        _, aux_s = _loss(network, variables, scrambled, config)
        np.testing.assert_array_equal(aux_s.terms["policy_loss"], aux_m.terms["policy_loss"])
        # Only example 0 changed, by exactly that step's CE / K.
        np.testing.assert_array_equal(aux_m.terms["policy_loss"][1:], aux.terms["policy_loss"][1:])
        assert float(aux_m.terms["policy_loss"][0]) < float(aux.terms["policy_loss"][0])
        mask_all = batch._replace(policy_mask=jnp.zeros_like(batch.policy_mask))
        _, aux_0 = _loss(network, variables, mask_all, config)
        np.testing.assert_array_equal(aux_0.terms["policy_loss"], np.zeros(4))

    @pytest.mark.slow
    def test_consistency_mask_removes_consistency_term(self):
        network, variables, batch = _setup()
        masked = batch._replace(consistency_mask=jnp.array([1.0, 0.0, 1.0, 0.0]))
        _, aux = _loss(network, variables, masked, LossConfig())
        assert float(aux.terms["consistency_loss"][0]) > 0
        np.testing.assert_array_equal(aux.terms["consistency_loss"][jnp.array([1, 3])], [0.0, 0.0])

    @pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
    def test_consistency_gradient_stops_at_next_hidden_state(self):
        network, variables, batch = _setup()
        config = LossConfig()

        def consistency(stacked_obs, next_stacked_obs):
            b = batch._replace(stacked_obs=stacked_obs, next_stacked_obs=next_stacked_obs)
            return _loss(network, variables, b, config)[1].metrics["consistency_loss"]

        g_obs, g_next = jax.jit(jax.grad(consistency, argnums=(0, 1)))(batch.stacked_obs, batch.next_stacked_obs)
        np.testing.assert_array_equal(g_next, np.zeros_like(g_next))
        assert float(jnp.max(jnp.abs(g_obs))) > 0

        def total(next_stacked_obs):
            return _loss(network, variables, batch._replace(next_stacked_obs=next_stacked_obs), config)[0]

        np.testing.assert_array_equal(jax.jit(jax.grad(total))(batch.next_stacked_obs), 0.0)

    @pytest.mark.slow
    def test_target_network_bootstrap(self):
        network, variables, batch = _setup(with_bootstrap_obs=True)
        config = LossConfig(bootstrap_from="target_network")
        target_variables = jax.jit(network.init)(jax.random.PRNGKey(7), batch.stacked_obs)
        _, aux = _loss(network, variables, batch, config, target_variables)
        obs = batch.bootstrap_stacked_obs[:, 0]
        v_target = jax.jit(network.initial_inference)(target_variables, obs).value
        expected_g = batch.partial_return[:, 0] + batch.bootstrap_discount[:, 0] * v_target
        root, _ = jax.jit(network.initial_inference_train)(variables, batch.stacked_obs)
        np.testing.assert_allclose(aux.priorities, jnp.abs(root.value - expected_g), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(aux.metrics["value_target_mean"], jnp.mean(expected_g), rtol=1e-5)
        # The stored v* is not what was used.
        _, aux_search = _loss(network, variables, batch, LossConfig())
        assert not np.allclose(aux_search.priorities, aux.priorities)

    @pytest.mark.slow
    def test_max_step_priority(self):
        network, variables, batch = _setup(num_unroll=2)
        config = LossConfig(priority="max_step")
        # The unrolled values from an independent forward pass (training mode: batch moments).
        root, _ = jax.jit(network.initial_inference_train)(variables, batch.stacked_obs)
        values, hidden = [root.value], root.hidden_state
        for k in range(2):
            out, _ = jax.jit(network.recurrent_inference_train)(variables, hidden, batch.actions[:, k])
            values.append(out.value)
            hidden = out.hidden_state
        values = jnp.stack(values, axis=1)  # [B, K+1]
        targets = batch.partial_return + batch.bootstrap_discount * batch.bootstrap_value  # [B, K+1]
        _, aux = _loss(network, variables, batch, config)
        np.testing.assert_allclose(aux.priorities, jnp.max(jnp.abs(values - targets), axis=1), rtol=1e-5, atol=1e-5)
        # A target the model misses by 100 at the second unrolled step is what the priority reads;
        # the root priority does not see it.
        shifted = batch._replace(partial_return=batch.partial_return.at[:, 2].add(100.0))
        _, aux_shifted = _loss(network, variables, shifted, config)
        np.testing.assert_allclose(aux_shifted.priorities, jnp.abs(values[:, 2] - targets[:, 2] - 100.0), rtol=1e-5)
        _, aux_root = _loss(network, variables, shifted, LossConfig())
        np.testing.assert_allclose(aux_root.priorities, jnp.abs(values[:, 0] - targets[:, 0]), rtol=1e-5, atol=1e-5)
        with pytest.raises(MooziError, match="loss.priority"):
            LossConfig(priority="unrolled")

    @pytest.mark.slow
    def test_target_network_bootstrap_needs_observations(self):
        network, variables, batch = _setup()
        with pytest.raises(MooziError):
            _loss(network, variables, batch, LossConfig(bootstrap_from="target_network"), variables)
        with pytest.raises(MooziError):
            LossConfig(bootstrap_from="oracle")

    @pytest.mark.slow
    def test_no_unroll(self):
        network, variables, batch = _setup(num_unroll=0)
        _, aux = _loss(network, variables, batch, LossConfig())
        assert float(aux.metrics["reward_loss"]) == 0.0 and float(aux.metrics["consistency_loss"]) == 0.0
        assert float(aux.metrics["policy_loss"]) > 0.0 and float(aux.metrics["value_loss"]) > 0.0

    @pytest.mark.slow
    def test_mlp_network(self):
        config = NetworkConfig(kind="mlp", mlp_hidden_sizes=(16,), mlp_hidden_state_size=8, head_hidden=8)
        network = _network(config, (1, 1, 3))
        batch = make_batch(2, batch_size=4, num_unroll=2, obs_shape=(1, 1, 3))
        variables = jax.jit(network.init)(jax.random.PRNGKey(0), batch.stacked_obs)
        grad_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True), static_argnames=("network", "config"))
        (loss, aux), grads = grad_fn(
            variables["params"], variables["batch_stats"], None, batch, network=network, config=LossConfig()
        )
        assert np.isfinite(loss) and float(aux.metrics["consistency_loss"]) > 0
        # Every parameter, projection included, receives a gradient.
        norms = jax.tree.map(lambda g: float(jnp.max(jnp.abs(g))), grads)
        assert all(n > 0 for n in jax.tree.leaves(norms)), norms


def test_loss_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LossConfig().value_coef = 1.0  # type: ignore[misc]


def test_cosine_distance_gradient_is_finite_for_zero_vectors():
    """An all-zero hidden state (min-max scaling of a constant one) must not make NaN gradients."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from moozi.core.loss import cosine_distance

    a = jnp.asarray([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])
    b = jnp.asarray([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    grads = jax.grad(lambda x, y: jnp.sum(cosine_distance(x, y)), argnums=(0, 1))(a, b)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    np.testing.assert_allclose(cosine_distance(a, b), [1.0, 1.0])
    np.testing.assert_allclose(cosine_distance(jnp.asarray([[1.0, 2.0]]), jnp.asarray([[2.0, 4.0]])), [0.0], atol=1e-6)


@pytest.mark.parametrize("update,alpha", [(0, 0.8), (50, 0.5), (100, 0.2), (400, 0.2)])
@pytest.mark.slow
def test_value_target_mixes_search_value_by_schedule(update, alpha):
    from moozi.core.loss import search_value_weight

    network, variables, batch = _setup(num_unroll=1)
    config = LossConfig(search_value_weight_start=0.8, search_value_weight_end=0.2, search_value_weight_updates=100)
    assert float(search_value_weight(config, update)) == pytest.approx(alpha)
    _, aux = jax.jit(loss_fn, static_argnames=("network", "config"))(
        variables["params"], variables["batch_stats"], None, batch, network=network, config=config, update=update
    )
    root, _ = jax.jit(network.initial_inference_train)(variables, batch.stacked_obs)
    z = batch.partial_return[:, 0] + batch.bootstrap_discount[:, 0] * batch.bootstrap_value[:, 0]
    target = alpha * batch.root_values[:, 0] + (1 - alpha) * z  # alpha·Q + (1 - alpha)·z
    np.testing.assert_allclose(aux.priorities, jnp.abs(root.value - target), rtol=1e-5, atol=1e-5)
    assert float(aux.metrics["search_value_weight"]) == pytest.approx(alpha)


def test_search_value_weight_is_validated():
    with pytest.raises(MooziError, match="search_value_weight_end"):
        LossConfig(search_value_weight_end=1.5)


def test_supported_entropy_by_hand():
    """Entropy over the actions p* supports: the others neither count nor take probability."""
    from moozi.core.loss import supported_entropy

    logits = jnp.asarray([[0.0, 0.0, 50.0, 0.0], [0.0, jnp.log(3.0), 7.0, 0.0], [1.0, 2.0, 3.0, 4.0]])
    target = jnp.asarray([[0.5, 0.5, 0.0, 0.0], [0.2, 0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    # Row 0: uniform over two -> ln 2. Row 1: (1/4, 3/4) -> -(1/4 ln 1/4 + 3/4 ln 3/4). Row 2: nothing supported -> 0.
    expected = [np.log(2.0), -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), 0.0]
    np.testing.assert_allclose(supported_entropy(logits, target), expected, rtol=1e-6, atol=1e-7)
    grad = jax.grad(lambda x: jnp.sum(supported_entropy(x, target)))(logits)
    assert np.isfinite(np.asarray(grad)).all()
    np.testing.assert_array_equal(grad[:, 2:][:2], 0.0)  # unsupported actions get no gradient


@pytest.mark.slow
def test_entropy_bonus_term_and_gradient():
    network, variables, batch = _setup(num_unroll=2)
    plain = LossConfig()
    bonus = dataclasses.replace(plain, entropy_coef=0.5)
    _, aux = _loss(network, variables, batch, plain)
    _, aux_b = _loss(network, variables, batch, bonus)
    assert "entropy_loss" not in aux.terms  # c_H = 0 leaves the thesis's loss as it was
    root, _ = jax.jit(network.initial_inference_train)(variables, batch.stacked_obs)
    # make_batch's p* is positive everywhere, so the supported entropy is the prior's full entropy.
    log_p = jax.nn.log_softmax(root.policy_logits)
    entropy = -jnp.sum(jnp.exp(log_p) * log_p, -1)
    np.testing.assert_allclose(aux_b.terms["entropy_loss"], -0.5 * entropy, rtol=1e-5)
    np.testing.assert_allclose(aux_b.per_example_loss - aux.per_example_loss, -0.5 * entropy, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(aux.metrics["policy_entropy_supported"], jnp.mean(entropy), rtol=1e-5)
    # A step past the episode's end (policy_mask 0) has no bonus.
    ended = batch._replace(policy_mask=batch.policy_mask.at[1, 0].set(0.0))
    _, aux_e = _loss(network, variables, ended, bonus)
    assert float(aux_e.terms["entropy_loss"][1]) == 0.0
    # The bonus's gradient raises the prior's entropy: one small step along it increases H.
    def bonus_only(params):
        loss, aux_ = _jitted_loss_fn(params, variables["batch_stats"], None, batch, network=network, config=bonus)
        return jnp.mean(aux_.terms["entropy_loss"])
    grads = jax.grad(bonus_only)(variables["params"])
    stepped = jax.tree.map(lambda p, g: p - 1e-2 * g, variables["params"], grads)
    after, _ = jax.jit(network.initial_inference_train)({**variables, "params": stepped}, batch.stacked_obs)
    log_q = jax.nn.log_softmax(after.policy_logits)
    assert float(jnp.mean(-jnp.sum(jnp.exp(log_q) * log_q, -1))) > float(jnp.mean(entropy))


@pytest.mark.slow
def test_fast_moves_without_a_policy_target_do_not_dilute_the_policy_diagnostics():
    # Playout cap randomisation stores an all-zero p* for its fast moves: their cross-entropy is 0 and
    # the policy loss weighs them 0, and the logged cross-entropies and entropy average over the other
    # steps, so that a share of fast moves reads the same as a batch without them.
    network, variables, batch = _setup(num_unroll=2)
    _, aux = _loss(network, variables, batch, LossConfig())
    fast = batch._replace(action_probs=batch.action_probs.at[2:].set(0.0))  # rows 2, 3: fast moves
    # The same rows masked out as past the episode's end: the same network outputs (its batch
    # statistics see all four rows either way), the same policy diagnostics.
    masked = batch._replace(policy_mask=batch.policy_mask.at[2:].set(0.0))
    _, aux_fast = _loss(network, variables, fast, LossConfig())
    _, aux_masked = _loss(network, variables, masked, LossConfig())
    for name in ("policy_ce_root", "policy_ce_unrolled", "policy_entropy_supported"):
        np.testing.assert_allclose(aux_fast.metrics[name], aux_masked.metrics[name], rtol=1e-5, err_msg=name)
        assert float(aux_fast.metrics[name]) > 0.0, name
    np.testing.assert_array_equal(aux_fast.terms["policy_loss"][2:], 0.0)
    np.testing.assert_allclose(aux_fast.terms["policy_loss"][:2], aux.terms["policy_loss"][:2], rtol=1e-5)


def test_the_normalized_entropy_and_the_floor_by_hand():
    """Each example's entropy over its most, ln(supported actions), averaged over the counted examples;
    the floor's penalty is its coefficient times the shortfall below the floor, 0 above it."""
    from moozi.core.loss import counted_mean, entropy_floor_term, entropy_fractions

    entropy = jnp.asarray([np.log(2.0), 0.5, 0.3, 0.9, 0.0])
    target = jnp.asarray([[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.3, 0.3, 0.4, 0.0],
                          [0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mask = jnp.asarray([1.0, 1.0, 1.0, 0.0, 1.0])
    # Row 3 is masked; row 4 has one supported action (no choice, nothing to hold up): both left out.
    expected = (1.0 + 0.5 / np.log(4.0) + 0.3 / np.log(3.0)) / 3
    fractions, counted = entropy_fractions(entropy, target, mask)
    np.testing.assert_allclose(counted_mean(fractions, counted), expected, rtol=1e-6)
    np.testing.assert_allclose(counted, [1.0, 1.0, 1.0, 0.0, 0.0])
    floor = LossConfig(entropy_floor=0.9, entropy_floor_coef=2.0)
    np.testing.assert_allclose(entropy_floor_term(floor, fractions, counted), 2.0 * (0.9 - expected), rtol=1e-5)
    assert float(entropy_floor_term(dataclasses.replace(floor, entropy_floor=0.5), fractions, counted)) == 0.0
    # Per state: the counted examples' fractions are 1.0, 0.361 and 0.273; at 0.5 the batch's mean (0.545)
    # is above the floor, but two examples are below it, and the penalty is their mean shortfall over 3.
    per_state = dataclasses.replace(floor, entropy_floor=0.5, entropy_floor_scope="state")
    by_hand = 2.0 * ((0.5 - 0.5 / np.log(4.0)) + (0.5 - 0.3 / np.log(3.0))) / 3
    np.testing.assert_allclose(entropy_floor_term(per_state, fractions, counted), by_hand, rtol=1e-5)
    with pytest.raises(MooziError, match="entropy_floor_scope.*allowed: batch, state"):
        LossConfig(entropy_floor_scope="each")
    assert float(counted_mean(*entropy_fractions(entropy, target, jnp.zeros(5)))) == 0.0  # nothing counted: 0, not NaN


@pytest.mark.slow
def test_the_entropy_floor_adds_its_shortfall_to_the_loss_and_raises_the_entropy():
    network, variables, batch = _setup(num_unroll=2)
    plain = LossConfig()
    loss, aux = _loss(network, variables, batch, plain)
    fraction = float(aux.metrics["policy_entropy_fraction"])
    assert "entropy_floor_loss" not in aux.metrics and 0.0 < fraction <= 1.0
    # Above the prior's entropy: the loss rises by exactly the shortfall; the examples' terms do not change.
    held = dataclasses.replace(plain, entropy_floor=min(fraction + 0.05, 0.999), entropy_floor_coef=3.0)
    loss_h, aux_h = _loss(network, variables, batch, held)
    np.testing.assert_allclose(float(loss_h) - float(loss), 3.0 * (held.entropy_floor - fraction), rtol=1e-3)
    np.testing.assert_allclose(aux_h.per_example_loss, aux.per_example_loss, rtol=1e-6)
    # Below it: nothing changes.
    loss_l, _ = _loss(network, variables, batch, dataclasses.replace(held, entropy_floor=fraction / 2))
    np.testing.assert_allclose(float(loss_l), float(loss), rtol=1e-6)
    # The penalty's gradient raises the prior's entropy: one small step along it increases the fraction.
    def floor_only(params):
        _, aux_ = _jitted_loss_fn(params, variables["batch_stats"], None, batch, network=network, config=held)
        return aux_.metrics["entropy_floor_loss"]
    grads = jax.grad(floor_only)(variables["params"])
    stepped = {**variables, "params": jax.tree.map(lambda p, g: p - 1e-2 * g, variables["params"], grads)}
    _, aux_s = _loss(network, stepped, batch, plain)
    assert float(aux_s.metrics["policy_entropy_fraction"]) > fraction


def test_the_entropy_floor_is_validated():
    with pytest.raises(MooziError, match="entropy_floor must lie in"):
        LossConfig(entropy_floor=1.0)
    with pytest.raises(MooziError, match="entropy_floor_coef"):
        LossConfig(entropy_floor=0.2, entropy_floor_coef=-1.0)


def test_entropy_coef_is_validated():
    with pytest.raises(MooziError, match="entropy_coef"):
        LossConfig(entropy_coef=-0.1)


class _TurnOutput(NamedTuple):
    turn_logit: Any


def test_turn_term_by_hand():
    # Two steps: the first passes the turn (logit 0: p = 1/2), the second keeps it (logit log 3: p = 3/4,
    # the wrong side), masked out in the second example.
    outputs = [None, _TurnOutput(jnp.array([0.0, 0.0])), _TurnOutput(jnp.array([np.log(3.0), np.log(3.0)]))]
    loss, accuracy = turn_term(jnp.array([[1.0, 0.0], [1.0, 0.0]]), outputs, jnp.array([[1.0, 1.0], [1.0, 0.0]]))
    # BCE: -log p where the turn passed, -log(1 - p) where it did not; summed over the steps.
    np.testing.assert_allclose(loss, [np.log(2.0) + np.log(4.0), np.log(2.0)], rtol=1e-6)
    assert float(accuracy) == 0.0  # logit 0 is not > 0, and log 3 says "passes" where it does not


@pytest.mark.slow
def test_muzero_loss_trains_a_turn_head_where_turns_repeat():
    config = dataclasses.replace(TINY_RESNET, kind="mlp", mlp_hidden_sizes=(8,), mlp_hidden_state_size=8)
    network = make_network(config, obs_shape=OBS_SHAPE, history_length=L, num_actions=A, predicts_turns=True)
    batch = make_batch(1, batch_size=4, num_unroll=3)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), batch.stacked_obs)
    assert "turn_head" in variables["params"]
    plain, aux = _loss(network, variables, batch, LossConfig())
    assert "turn_loss" not in aux.metrics  # no turn targets: an alternating game's batch
    passes = jnp.array([[1.0, 0.0, 1.0]] * 4)
    with_turns, aux = _loss(network, variables, batch._replace(turn_passes=passes), LossConfig())
    assert float(aux.metrics["turn_loss"]) > 0.0 and 0.0 <= float(aux.metrics["turn_accuracy"]) <= 1.0
    # The term adds its importance-weighted mean to the total.
    np.testing.assert_allclose(float(with_turns) - float(plain), float(aux.metrics["turn_loss"]), rtol=1e-4)
