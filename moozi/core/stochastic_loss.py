"""Stochastic MuZero's loss (Antonoglou et al., 2022): loss.py's MuZero terms plus the chance terms.

Per training target, with z_{t+k} the value target of loss.py (the n-step return
G^N_{t+k}, or its mix with v* under the search-value schedule) and the unroll

    s⁰ = h(o_≤t);  as^k = φ(s^k, a_{t+k});  Q^k, σ^k = ψ(as^k)
    c_{t+k+1} = e(o_≤t+k, o_≤t+k+1)   (one-hot, straight-through)
    s^{k+1}, r^{k+1} = g(as^k, c_{t+k+1});  p^{k+1}, v^{k+1} = f(s^{k+1})        k = 0 .. K-1

the terms are
    policy, value, reward, consistency, entropy    as loss.py (on the states s⁰ .. s^K)
    consistency over the unroll (optional)   = c_s · 1/K Σ_{k=1..K} (1 - cos(ϱ(s^k), sg(h(o_≤t+k))))   masked
    afterstate value = c_Q · 1/K Σ_{k<K} CE(Φ(z_{t+k}), Q^k)   (or the one-step target, below)
    chance           = c_σ · 1/K Σ_{k<K} CE(sg(c_{t+k+1}), σ^k)                    masked
    commitment       = β   · 1/K Σ_{k<K} ||c_{t+k+1} - softmax(c^e_{t+k+1})||²       masked
and the batch loss is mean_b(ρ_b · per-example loss) + c_L2 ||θ||², as loss.py.

Why these targets: the move a_{t+k} was taken, so the return from t+k is a
sample of Q(s_{t+k}, a_{t+k}) as much as of v(s_{t+k}); the paper trains Q
on the value head's own target. σ learns which code the encoder assigns to
what happened, with the code held fixed (sg), so σ follows the encoder and
not the other way round. The encoder itself learns through the
straight-through code that g consumes (every term downstream of g), and the
commitment term pulls its softmax towards the one-hot it emits, which is
VQ-VAE's commitment cost for a codebook of one-hot vectors.

`afterstate_value_target="next_value"` trains Q^k instead on one step,
r_{t+k+1} + γ s_{t+k} v(o_{t+k+1}) (s_{t+k} = -1 where the player to move
changes, 0 weight where o_{t+k+1} is terminal or past the end), v the target
network's value of the real next position, as TD-Gammon learned its afterstate
values with TD. Its expectation over chance is Q(s, a), as z's is, but it
carries the noise of one chance step, not of the rest of the game: in
backgammon the value of the real next position ranks the moves far better
than Q (docs/stochastic.md).

`consistency_steps="all"` replaces loss.py's consistency on s¹ alone with
the same cosine term on every unrolled state, as EfficientZero applies its
similarity loss over the whole unroll. The encoder's code c_{t+k} has seen
o_{t+k}, so g(as^{k-1}, c_{t+k}) can match the real position, and the term
makes φ carry the board after the move (a checker moved, a tile slid) through
the unroll instead of leaving φ to learn it from the value and reward alone;
the future histories it needs are already in the batch for the encoder.

Choices the paper leaves open:
  * The three chance terms average over the K steps (1/K Σ), as the
    unrolled policy and value terms of loss.py do; the paper sums.
  * The chance and commitment terms are masked where o_{t+k+1} lies past the
    episode's end (policy_mask[:, k+1] = 0): there is no transition to encode.
    The afterstate value is not masked, for the reason loss.py gives for v:
    its target past the end is 0, which is the absorbing dummy's value.
  * The gradient is scaled once per step, at the entrance of φ, so a
    two-stage step compounds like one dynamics call of loss.py.
  * The encoder runs once on all B·K transitions in training mode, so its
    batch-norm moments are those of one batch of transitions.

The extra input (`StochasticTrainingTarget.future_stacked_obs`) is what the
encoder needs beyond a `TrainingTarget`: the history inputs at t+1 .. t+K,
built like `stacked_obs` (zero frames and dummy actions outside the episode).
The encoder's pair for step k is (history at t+k, history at t+k+1), with
`stacked_obs` as the history at t. `make_stochastic_targets` gathers them from
the step storage alongside `targets.make_targets`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from moozi.core.history import stack_history
from moozi.core.loss import (
    LossAux,
    LossConfig,
    add_turn_term,
    combine_terms,
    consistency_term,
    policy_term,
    projected_cosine_distance,
    reward_term,
    scale_gradient,
    value_targets,
    value_term,
)
from moozi.core.scalar import Support, scalar_to_two_hot
from moozi.core.stochastic_network import AfterstateOutput, ChanceOutput, StochasticNetwork
from moozi.core.targets import StepStorage, TargetConfig, make_targets
from moozi.core.types import Array, TrainingTarget
from moozi.envs.base import DUMMY_ACTION, decode_obs
from moozi.errors import MooziError


AFTERSTATE_VALUE_TARGETS = ("return", "next_value")
CONSISTENCY_STEPS = ("first", "all")


@dataclasses.dataclass(frozen=True)
class StochasticLossConfig(LossConfig):
    """loss.py's coefficients and target choices, plus the chance terms' weights."""

    afterstate_value_coef: float = 0.25  # c_Q; the value head's c_v by default: the same target, the same overfitting risk
    afterstate_value_target: str = "return"  # Q's target: "return" (z_{t+k}) or "next_value" (see the module docstring)
    chance_coef: float = 1.0  # c_σ, weight of σ's cross-entropy against the encoder's code (the paper: 1)
    commitment_coef: float = 0.25  # β, the encoder's commitment cost (VQ-VAE's usual 0.25)
    consistency_steps: str = "first"  # "first": s¹ only (loss.py); "all": every s^k (see the module docstring)

    def __post_init__(self):
        super().__post_init__()
        for name in ("afterstate_value_coef", "chance_coef", "commitment_coef"):
            if getattr(self, name) < 0:
                raise MooziError(f"loss.{name} must be >= 0, got {getattr(self, name)}")
        if self.afterstate_value_target not in AFTERSTATE_VALUE_TARGETS:
            raise MooziError(f"afterstate_value_target must be one of {AFTERSTATE_VALUE_TARGETS}, "
                             f"got {self.afterstate_value_target!r}")
        if self.consistency_steps not in CONSISTENCY_STEPS:
            raise MooziError(f"consistency_steps must be one of {CONSISTENCY_STEPS}, got {self.consistency_steps!r}")


class StochasticTrainingTarget(NamedTuple):
    """A `TrainingTarget` batch plus what the chance encoder reads. Leading axis [B]."""

    target: TrainingTarget
    future_stacked_obs: Array  # [B, K, H, W, C_h]: history inputs at t+1 .. t+K (index 0 equals next_stacked_obs)
    # [B, K] float32: gamma · s_{t+k} where o_{t+k+1} is a position to value (t+k+1 < T-1), else 0; s_{t+k} is -1
    # where the player to move changes from t+k to t+k+1. The one-step target's bootstrap weight.
    next_value_discount: Array | None = None


class StochasticUnroll(NamedTuple):
    """The model unrolled K steps in training mode."""

    states: tuple  # K+1 NetworkOutput: s⁰ (initial inference), then s¹ .. s^K
    afterstates: AfterstateOutput  # each field stacked [B, K, ...]: as⁰ .. as^{K-1}
    chance: ChanceOutput  # [B, K, C]: the encoder's logits and codes for c_{t+1} .. c_{t+K}


# --------------------------------------------------------------------------- the extra input


def gather_future_stacked_obs(storage: StepStorage, indices, *, config: TargetConfig, num_actions: int,
                              obs_levels: int | None = None) -> Array:
    """[B, K, H, W, C_h]: the history inputs at t+1 .. t+K for the targets at slots `indices` [B].

    Reads frames o_{t-L+2} .. o_{t+K} and actions a_{t-L+1} .. a_{t+K-1} (one read per
    row), masks them as targets.py does, and stacks K overlapping windows of L rows.
    With numpy storage and indices (the replay buffer's host arrays) the rows are
    read with numpy, so only B · (L+K-1) frames reach the device, never the storage.
    """
    L, K = config.history_length, config.num_unroll_steps
    host = all(isinstance(a, np.ndarray) for a in (indices, storage.obs, storage.action, storage.step_index,
                                                   storage.episode_length))
    xp = np if host else jnp
    indices = xp.asarray(indices)
    num_slots = storage.step_index.shape[0]
    offsets = np.arange(-L + 2, K + 1)  # frames; each action is read one step earlier
    slots = (indices[:, None] + xp.asarray(offsets)[None, :]) % num_slots  # [B, L+K-1]
    frames = decode_obs(storage.obs[slots], obs_levels, jnp)
    actions = jnp.asarray(storage.action[(slots - 1) % num_slots], jnp.int32)
    t = jnp.asarray(storage.step_index[indices], jnp.int32)[:, None] + offsets  # [B, L+K-1]: the frames' steps
    T = jnp.asarray(storage.episode_length[indices], jnp.int32)[:, None]
    frames = jnp.where(((t >= 0) & (t < T))[..., None, None, None], frames, 0.0)
    actions = jnp.where((t - 1 >= 0) & (t - 1 < T), actions, DUMMY_ACTION)
    windows = np.arange(K)[:, None] + np.arange(L)[None, :]  # [K, L]: history at t+k+1 = rows k .. k+L-1
    return stack_history(frames[:, windows], actions[:, windows], num_actions)


def next_value_discounts(step_index, episode_length, turn_passes, *, num_unroll: int, discount: float,
                         discount_sign: float, xp: Any = jnp) -> Array:
    """[B, K]: γ · s_{t+k} where o_{t+k+1} is a position to value, else 0 (`next_value_discount`).

    step_index, episode_length [B]: t and T of each target; the last stored step, T-1, is terminal (value
    0), as for targets.py's bootstrap. turn_passes [B, K] (games whose turns may repeat) or None, when
    every step signs by `discount_sign`."""
    next_step = xp.asarray(step_index)[:, None] + xp.arange(1, num_unroll + 1)[None, :]  # t+k+1
    valid = next_step < xp.asarray(episode_length)[:, None] - 1
    if turn_passes is None:
        sign = xp.full(valid.shape, discount_sign, xp.float32)
    else:
        sign = 1.0 - 2.0 * xp.asarray(turn_passes, xp.float32)
    return xp.where(valid, np.float32(discount) * sign, 0.0).astype(xp.float32)


def make_stochastic_targets(storage: StepStorage, indices, *, config: TargetConfig, num_actions: int,
                            discount_sign: float) -> StochasticTrainingTarget:
    """`targets.make_targets` plus `future_stacked_obs` and `next_value_discount` (pure, jittable; the same
    static arguments)."""
    target = make_targets(storage, indices, config=config, num_actions=num_actions, discount_sign=discount_sign)
    future = gather_future_stacked_obs(storage, indices, config=config, num_actions=num_actions)
    indices = jnp.asarray(indices, jnp.int32)
    discounts = next_value_discounts(
        jnp.asarray(storage.step_index)[indices], jnp.asarray(storage.episode_length)[indices], target.turn_passes,
        num_unroll=config.num_unroll_steps, discount=config.discount, discount_sign=discount_sign)
    return StochasticTrainingTarget(target=target, future_stacked_obs=future, next_value_discount=discounts)


# --------------------------------------------------------------------------- unroll and terms


def stochastic_unroll(network: StochasticNetwork, params, batch_stats, batch: StochasticTrainingTarget,
                      dynamics_gradient_scale: float) -> tuple[StochasticUnroll, Any]:
    """Unrolls h, then K times φ, ψ, e, g, f, in training mode; returns the unroll and the new moments."""
    target = batch.target
    batch_size, num_unroll = target.actions.shape

    def variables(stats):
        return {"params": params, "batch_stats": stats}

    root, stats = network.initial_inference_train(variables(batch_stats), target.stacked_obs)
    if num_unroll == 0:
        empty = jnp.zeros((batch_size, 0, network.num_chance_outcomes), jnp.float32)
        return StochasticUnroll((root,), None, ChanceOutput(empty, empty)), stats

    histories = jnp.concatenate([target.stacked_obs[:, None], batch.future_stacked_obs], axis=1)  # [B, K+1, ...]
    flat = lambda x: x.reshape(batch_size * num_unroll, *x.shape[2:])  # noqa: E731
    chance, stats = network.chance_inference_train(variables(stats), flat(histories[:, :-1]), flat(histories[:, 1:]))
    chance = jax.tree.map(lambda x: x.reshape(batch_size, num_unroll, *x.shape[1:]), chance)

    states, afterstates = [root], []
    hidden_state = root.hidden_state
    for k in range(num_unroll):
        hidden_state = scale_gradient(hidden_state, dynamics_gradient_scale)
        after, stats = network.afterstate_inference_train(variables(stats), hidden_state, target.actions[:, k])
        out, stats = network.recurrent_inference_train(variables(stats), after.afterstate, chance.code[:, k])
        afterstates.append(after)
        states.append(out)
        hidden_state = out.hidden_state
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs, axis=1), *afterstates)
    return StochasticUnroll(tuple(states), stacked, chance), stats


def _unrolled_mean(per_step):
    """[B, K] -> [B]: the mean over the K unrolled steps."""
    return jnp.sum(per_step, axis=1) / max(per_step.shape[1], 1)


def next_value_targets(network: StochasticNetwork, target_variables, batch: StochasticTrainingTarget) -> Array:
    """[B, K]: r_{t+k+1} + γ s_{t+k} v(o_{t+k+1}), v the target network's value of the real next position."""
    if batch.next_value_discount is None or target_variables is None:
        raise MooziError("stochastic.afterstate_value_target='next_value' needs next_value_discount in the batch "
                         "and target variables")
    target = batch.target
    batch_size, num_unroll = target.actions.shape
    obs = batch.future_stacked_obs
    out = network.initial_inference(target_variables, obs.reshape(batch_size * num_unroll, *obs.shape[2:]))
    values = out.value.reshape(batch_size, num_unroll)
    return jax.lax.stop_gradient(target.rewards + batch.next_value_discount * values)


def unrolled_consistency_term(network: StochasticNetwork, params, batch_stats, unrolled_batch_stats,
                              batch: StochasticTrainingTarget, outputs):
    """([B] 1/K Σ_{k=1..K} (1 - cos(ϱ(s^k), sg(h(o_≤t+k)))), masked; the moments after ϱ).

    loss.py's consistency distance on all K unrolled states at once, against the B·K future histories."""
    target = batch.target
    batch_size, num_unroll = target.actions.shape
    states = jnp.stack([o.hidden_state for o in outputs[1:]], axis=1)  # [B, K, ...]
    flat = lambda x: x.reshape(batch_size * num_unroll, *x.shape[2:])  # noqa: E731
    distances, new_batch_stats = projected_cosine_distance(network, params, batch_stats, unrolled_batch_stats,
                                                           flat(states), flat(batch.future_stacked_obs))
    per_step = distances.reshape(batch_size, num_unroll) * target.policy_mask[:, 1:]
    return _unrolled_mean(per_step), new_batch_stats


def afterstate_value_term(targets: Array, q_logits: Array, support: Support):
    """([B] mean over k of CE(Φ(z_{t+k}), Q^k), [B, K]); targets [B, >= K], q_logits [B, K, Z]."""
    num_unroll = q_logits.shape[1]
    q_ce = optax.softmax_cross_entropy(q_logits, scalar_to_two_hot(targets[:, :num_unroll], support))
    return _unrolled_mean(q_ce), q_ce


def chance_term(chance_logits: Array, codes: Array, mask: Array):
    """([B] mean over k of CE(sg(c_{t+k+1}), σ^k), masked; [B, K]); logits and codes [B, K, C], mask [B, K]."""
    ce = optax.softmax_cross_entropy(chance_logits, jax.lax.stop_gradient(codes)) * mask
    return _unrolled_mean(ce), ce


def commitment_term(encoder_logits: Array, mask: Array):
    """([B] mean over k of ||onehot - softmax(c^e)||², masked; [B, K]); encoder_logits [B, K, C].

    The one-hot carries no gradient (an argmax has none), so only the softmax
    moves: towards the code it already emits."""
    probs = jax.nn.softmax(encoder_logits, axis=-1)
    one_hot = jax.nn.one_hot(jnp.argmax(encoder_logits, axis=-1), encoder_logits.shape[-1], dtype=probs.dtype)
    squared = jnp.sum(jnp.square(one_hot - probs), axis=-1) * mask
    return _unrolled_mean(squared), squared


def code_perplexity(codes: Array, mask: Array) -> Array:
    """exp(entropy) of the batch's code usage over the unmasked transitions: 1 when one code takes every
    outcome (a collapsed codebook), C when all are used equally."""
    weights = mask[..., None]
    usage = jnp.sum(codes * weights, axis=(0, 1)) / jnp.maximum(jnp.sum(weights), 1.0)  # [C]
    return jnp.exp(jnp.sum(jax.scipy.special.entr(usage)))


# --------------------------------------------------------------------------- the loss


def stochastic_loss_fn(
    params,
    batch_stats,
    target_variables,
    batch: StochasticTrainingTarget,
    *,
    network: StochasticNetwork,
    config: StochasticLossConfig,
    update=0,
) -> tuple[Array, LossAux]:
    """The batch loss and its aux, with loss.py's `loss_fn` signature; differentiate w.r.t. `params`."""
    target = batch.target
    support = network.config.support
    num_unroll = target.actions.shape[1]
    targets, alpha = value_targets(target, config, network, target_variables, update)
    unrolled, new_batch_stats = stochastic_unroll(network, params, batch_stats, batch, config.dynamics_gradient_scale)
    outputs = list(unrolled.states)

    policy, policy_ce = policy_term(target, outputs, num_unroll)
    value, value_ce = value_term(targets, outputs, support, num_unroll)
    zeros = jnp.zeros_like(policy)
    reward, reward_ce, consistency, q_value, chance, commitment = zeros, None, zeros, zeros, zeros, zeros
    chance_mask = target.policy_mask[:, 1:]  # [B, K]: o_{t+k+1} exists
    if num_unroll > 0:
        reward, reward_ce = reward_term(target, outputs, support)
        if config.consistency_steps == "all":
            consistency, new_batch_stats = unrolled_consistency_term(network, params, batch_stats, new_batch_stats,
                                                                     batch, outputs)
        else:
            consistency, new_batch_stats = consistency_term(network, params, batch_stats, new_batch_stats, target,
                                                            outputs)
        q_targets = targets
        if config.afterstate_value_target == "next_value":
            q_targets = next_value_targets(network, target_variables, batch)
        q_value, _ = afterstate_value_term(q_targets, unrolled.afterstates.value_logits, support)
        chance, _ = chance_term(unrolled.afterstates.chance_logits, unrolled.chance.code, chance_mask)
        commitment, _ = commitment_term(unrolled.chance.logits, chance_mask)

    terms = {
        "policy_loss": config.policy_coef * policy,
        "value_loss": config.value_coef * value,
        "reward_loss": config.reward_coef * reward,
        "consistency_loss": config.consistency_coef * consistency,
        "afterstate_value_loss": config.afterstate_value_coef * q_value,
        "chance_loss": config.chance_coef * chance,
        "commitment_loss": config.commitment_coef * commitment,
    }
    extra = {"code_perplexity": code_perplexity(unrolled.chance.code, chance_mask) if num_unroll else jnp.float32(0)}
    add_turn_term(terms, extra, target, outputs, num_unroll)
    return combine_terms(config, params, target, outputs, targets, terms, (policy_ce, value_ce, reward_ce),
                         num_unroll, alpha, new_batch_stats, extra)
