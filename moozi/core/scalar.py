"""Scalars as categories (thesis 3.8.6, 5.2.7).

Values and rewards are learned as distributions over an integer support: a
scalar x is squashed by the invertible transform phi (Pohlen et al.), clipped
to the support and split between its two nearest integers ("two-hot"). The
network's logits are read back as the expectation over the support, then
phi^-1, so the planner only ever sees scalars in environment scale.

Board games are different: every value and reward is an outcome in [-1, 1].
There phi squashes +-1 to +-0.415, so on the support -1..1 only 41.5% of a
target's mass says who wins, and the decoded value of a confident head can
reach phi^-1(+-1) = +-2.99, outside every possible outcome. `transform =
"identity"` skips phi: +-1 is one-hot on the end categories, 0 on the middle,
and decoded values stay in [min_value, max_value] (docs/board_games.md).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

DEFAULT_EPS = 1e-3


def phi(x, eps: float = DEFAULT_EPS):
    """phi(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x, elementwise."""
    x = jnp.asarray(x, jnp.float32)
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def phi_inverse(y, eps: float = DEFAULT_EPS):
    """The closed-form inverse of `phi`, elementwise.

    The thesis writes ((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1.
    In float32 the subtraction sqrt(1 + z) - 1 cancels catastrophically (z is
    about 4e-3 |y|), so we use the algebraically identical rationalised form
    (sqrt(1 + z) - 1) / (2 eps) = 2 (|y| + 1 + eps) / (sqrt(1 + z) + 1).
    """
    y = jnp.asarray(y, jnp.float32)
    a = jnp.abs(y)
    z = 4.0 * eps * (a + 1.0 + eps)
    root = 2.0 * (a + 1.0 + eps) / (jnp.sqrt(1.0 + z) + 1.0)
    return jnp.sign(y) * (jnp.square(root) - 1.0)


TRANSFORMS = ("phi", "identity")


@dataclasses.dataclass(frozen=True)
class Support:
    """The integer support {min_value, ..., max_value} of the value and reward heads."""

    min_value: int = -5  # lowest category, in transformed space (thesis: -5)
    max_value: int = 5  # highest category, in transformed space (thesis: 5)
    transform: str = "phi"  # "phi" (the thesis's squashing) or "identity" (outcomes in [-1, 1]: board games)

    def __post_init__(self):
        if self.max_value <= self.min_value:
            raise ValueError(f"Support needs max_value > min_value, got {self.min_value}..{self.max_value}")
        if self.transform not in TRANSFORMS:
            raise ValueError(f"Support.transform must be one of {', '.join(TRANSFORMS)}, got {self.transform!r}")

    def forward(self, x, eps: float = DEFAULT_EPS):
        """Environment scale -> the support's scale."""
        return phi(x, eps) if self.transform == "phi" else jnp.asarray(x, jnp.float32)

    def inverse(self, y, eps: float = DEFAULT_EPS):
        """The support's scale -> environment scale."""
        return phi_inverse(y, eps) if self.transform == "phi" else jnp.asarray(y, jnp.float32)

    @property
    def size(self) -> int:
        """Z, the number of categories."""
        return self.max_value - self.min_value + 1

    def values(self):
        """[Z] float32: the category values min_value .. max_value."""
        return jnp.arange(self.min_value, self.max_value + 1, dtype=jnp.float32)


def scalar_to_two_hot(x, support: Support, eps: float = DEFAULT_EPS):
    """[...] scalars in environment scale -> [..., Z] two-hot vectors of phi(x) (or x: `Support.transform`).

    phi(x) is clipped to the support, then split between floor and floor + 1
    with weights that reproduce phi(x) as their expectation (phi(x) = 1.3 ->
    0.7 on category 1 and 0.3 on category 2).
    """
    y = jnp.clip(support.forward(x, eps), support.min_value, support.max_value)
    # Clipping the lower neighbour to max_value - 1 keeps y = max_value on the
    # grid: it becomes weight 1 on the top category instead of indexing past it.
    low = jnp.clip(jnp.floor(y), support.min_value, support.max_value - 1)
    upper_weight = y - low  # [...] in [0, 1]
    low_index = (low - support.min_value).astype(jnp.int32)
    low_hot = jax.nn.one_hot(low_index, support.size, dtype=jnp.float32)
    high_hot = jax.nn.one_hot(low_index + 1, support.size, dtype=jnp.float32)
    return low_hot * (1.0 - upper_weight)[..., None] + high_hot * upper_weight[..., None]


def two_hot_to_scalar(probs, support: Support, eps: float = DEFAULT_EPS):
    """[..., Z] distributions over the support -> [...] scalars in environment scale."""
    y = jnp.sum(jnp.asarray(probs, jnp.float32) * support.values(), axis=-1)
    return support.inverse(y, eps)


def logits_to_scalar(logits, support: Support, eps: float = DEFAULT_EPS):
    """[..., Z] logits -> [...] scalars in environment scale (softmax, expectation, phi^-1)."""
    return two_hot_to_scalar(jax.nn.softmax(logits, axis=-1), support, eps)
