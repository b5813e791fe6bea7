"""The scalar transform and two-hot categories (thesis 3.8.6, 5.2.7)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from moozi.core.scalar import Support, logits_to_scalar, phi, phi_inverse, scalar_to_two_hot, two_hot_to_scalar

SUPPORT = Support()


def _edge_scalar(y):
    """The x with phi(x) = y, in float64 (so the test does not trust phi_inverse)."""
    eps = 1e-3
    a = abs(y)
    x = ((np.sqrt(1 + 4 * eps * (a + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1
    return np.sign(y) * x


def _test_values():
    return np.concatenate(
        [
            np.linspace(-40.0, 40.0, 161),
            [0.0, 1e-4, -1e-4, 0.5, -0.5, _edge_scalar(5.0), _edge_scalar(-5.0), _edge_scalar(4.999)],
        ]
    ).astype(np.float32)


class ScalarTest(parameterized.TestCase):
    def test_support_size_and_values(self):
        assert SUPPORT.size == 11
        np.testing.assert_array_equal(SUPPORT.values(), np.arange(-5, 6, dtype=np.float32))
        assert Support(-300, 300).size == 601
        with pytest.raises(ValueError):
            Support(2, 2)

    @chex.variants(with_jit=True, without_jit=True)
    def test_phi_inverse_inverts_phi(self):
        x = _test_values()
        roundtrip = self.variant(lambda v: phi_inverse(phi(v)))(x)
        np.testing.assert_allclose(roundtrip, x, rtol=1e-5, atol=1e-5)

    @chex.variants(with_jit=True, without_jit=True)
    def test_phi_matches_formula(self):
        x = np.array([-10.0, -1.0, 0.0, 3.0, 100.0])
        expected = np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + 1e-3 * x
        np.testing.assert_allclose(self.variant(phi)(x), expected, rtol=1e-6)

    def test_phi_of_edge_scalar_is_support_end(self):
        np.testing.assert_allclose(phi(np.float32(_edge_scalar(5.0))), 5.0, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_two_hot_roundtrip_inside_support(self):
        x = _test_values()
        inside = x[np.abs(np.asarray(phi(x))) <= 5.0]
        assert len(inside) > 20 and np.max(np.abs(inside)) > 34.0  # reaches the support's ends
        decoded = self.variant(lambda v: two_hot_to_scalar(scalar_to_two_hot(v, SUPPORT), SUPPORT))(inside)
        np.testing.assert_allclose(decoded, inside, rtol=1e-5, atol=1e-5)

    @chex.variants(with_jit=True, without_jit=True)
    def test_two_hot_clips_to_support(self):
        x = np.array([-1000.0, 1000.0], np.float32)
        probs = self.variant(lambda v: scalar_to_two_hot(v, SUPPORT))(x)
        np.testing.assert_array_equal(probs[0], np.eye(11)[0])
        np.testing.assert_array_equal(probs[1], np.eye(11)[10])
        ends = [_edge_scalar(-5.0), _edge_scalar(5.0)]
        np.testing.assert_allclose(two_hot_to_scalar(probs, SUPPORT), ends, rtol=1e-5)

    def test_support_ends_are_one_hot(self):
        probs = scalar_to_two_hot(np.float32(_edge_scalar(5.0)), SUPPORT)
        np.testing.assert_allclose(probs, np.eye(11)[10], atol=1e-5)
        probs = scalar_to_two_hot(np.float32(_edge_scalar(-5.0)), SUPPORT)
        np.testing.assert_allclose(probs, np.eye(11)[0], atol=1e-5)

    @chex.variants(with_jit=True, without_jit=True)
    def test_thesis_example(self):
        # phi(x) = 1.3 -> 0.7 on category 1 and 0.3 on category 2.
        probs = self.variant(lambda v: scalar_to_two_hot(v, SUPPORT))(np.float32(_edge_scalar(1.3)))
        expected = np.zeros(11)
        expected[1 - SUPPORT.min_value] = 0.7
        expected[2 - SUPPORT.min_value] = 0.3
        np.testing.assert_allclose(probs, expected, atol=1e-5)

    def test_integer_phi_is_one_hot_and_sums_to_one(self):
        x = np.array([_edge_scalar(y) for y in range(-5, 6)], np.float32)
        probs = scalar_to_two_hot(x, SUPPORT)
        np.testing.assert_allclose(probs, np.eye(11), atol=1e-5)
        batch = scalar_to_two_hot(jnp.asarray(_test_values()).reshape(-1, 1), SUPPORT)
        chex.assert_shape(batch, (_test_values().size, 1, 11))
        np.testing.assert_allclose(jnp.sum(batch, -1), 1.0, rtol=1e-6)
        assert float(jnp.min(batch)) >= 0.0

    @chex.variants(with_jit=True, without_jit=True)
    def test_logits_to_scalar_is_softmax_then_decode(self):
        logits = jax.random.normal(jax.random.PRNGKey(0), (3, 11))
        got = self.variant(lambda v: logits_to_scalar(v, SUPPORT))(logits)
        probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        expected_phi = probs @ np.arange(-5, 6)
        np.testing.assert_allclose(phi(got), expected_phi, rtol=1e-5, atol=1e-5)
        # Confident logits decode to their category's scalar.
        sharp = 100.0 * jnp.eye(11)[jnp.array([2, 8])]
        np.testing.assert_allclose(logits_to_scalar(sharp, SUPPORT), [_edge_scalar(-3.0), _edge_scalar(3.0)], rtol=1e-5)


OUTCOMES = Support(min_value=-1, max_value=1, transform="identity")


def test_identity_support_puts_outcomes_on_their_own_categories():
    # Board-game outcomes: a loss, a draw and a win are one-hot; a 0.5 target splits halfway.
    probs = scalar_to_two_hot(jnp.array([-1.0, 0.0, 1.0, 0.5, 3.0]), OUTCOMES)
    np.testing.assert_allclose(probs, [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0.5, 0.5], [0, 0, 1]], atol=1e-6)
    # phi, the default, keeps only 41.5% of a win's mass on the win category.
    np.testing.assert_allclose(scalar_to_two_hot(jnp.float32(1.0), Support(-1, 1))[2], 0.4147, atol=1e-3)


def test_identity_support_decodes_inside_the_outcome_range():
    sharp = 100.0 * jnp.eye(3)
    np.testing.assert_allclose(logits_to_scalar(sharp, OUTCOMES), [-1.0, 0.0, 1.0], atol=1e-6)
    logits = jax.random.normal(jax.random.PRNGKey(1), (64, 3)) * 10
    decoded = logits_to_scalar(logits, OUTCOMES)
    assert float(jnp.max(jnp.abs(decoded))) <= 1.0
    # Under phi the same confident head decodes a win to 2.99, outside every outcome.
    assert float(logits_to_scalar(sharp[2], Support(-1, 1))) > 2.9


def test_unknown_transform_is_refused():
    with pytest.raises(ValueError, match="phi, identity"):
        Support(-1, 1, transform="log")
