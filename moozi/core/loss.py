"""The MooZi loss (thesis 5.2.9), term by term.

Per training target (one example of the batch):
    policy      = CE(p*_t, p⁰) + 1/K Σ_{k=1..K} CE(p*_{t+k}, p^k)        masked by policy_mask
    value       = c_v [CE(Φ(G_t), v⁰) + 1/K Σ_{k=1..K} CE(Φ(G_{t+k}), v^k)]
    reward      = Σ_{k=1..K} CE(Φ(r_{t+k}), r̂^k)
    consistency = c_s (1 - cos(ϱ(x¹_t), sg(x⁰_{t+1})))                  masked by consistency_mask
    entropy     = -c_H H(p⁰ over the actions p*_t supports)                masked by policy_mask[:, 0]
and the batch loss is mean_b(ρ_b · per-example loss) + c_L2 ||θ||².

Choices where the thesis is silent or loose (MuZero practice):
  * The thesis's formula multiplies the L2 term by ρ too; ρ is per example and
    ||θ||² is not, so only the per-example terms are weighted.
  * Value and reward targets past the episode end are not masked: their
    targets are 0 there, which teaches the absorbing dummy-action subtree
    zero value and reward, as in MuZero.
  * The K-step averages divide by K, not by the number of unmasked steps, as
    the thesis writes them.
  * The gradient is halved at the entrance of every dynamics call (MuZero's
    training pseudocode), so the gradient a hidden state receives from the
    rest of the unroll does not compound with K.
  * The entropy bonus (c_H, default 0, which leaves the thesis's loss) is not the thesis's: it
    counters the collapse of the prior that Gumbel MuZero's policy target drives (the target is
    softmax(logits + σ(q̂)), and min-max rescaling stretches any Q gap to the full range, so the
    logits drift apart update after update). Its entropy is over the actions p*_t gives weight:
    with Gumbel MuZero exactly the legal ones, so the dummy action and illegal moves neither
    dilute it nor receive probability from it; with PUCT the visited ones.
  * The entropy floor (`entropy_floor`, default 0: none) is the bonus made adaptive: a penalty
    on the batch's mean root-prior entropy (`entropy_floor_scope="state"`: on each example's) only
    while it is below a set fraction of its most, so it
    holds up a prior that collapses and leaves alone one that does not (one MinAtar preset for games
    whose priors collapse and games whose priors do not; docs/training.md).
  * x⁰_{t+1} = h(next_stacked_obs) is computed in training mode (batch
    moments, as x¹ is) but its batch-norm moment update is discarded, so
    h's running moments are updated once per step, from stacked_obs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from moozi.core.network import Network
from moozi.core.scalar import scalar_to_two_hot
from moozi.core.types import Array, TrainingTarget
from moozi.errors import MooziError


BOOTSTRAP_SOURCES = ("search", "target_network")
PRIORITY_SOURCES = ("root", "max_step")
ENTROPY_FLOOR_SCOPES = ("batch", "state")


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """Coefficients and target choices of the loss (thesis 5.2.9)."""

    value_coef: float = 0.25  # c_v; MuZero Reanalyze used 0.25 so value does not overfit replayed targets
    consistency_coef: float = 2.0  # c_s; EfficientZero's weight for its similarity loss
    l2_coef: float = 1e-4  # c_L2, weight of ||θ||² over all parameters (MuZero's weight decay)
    reward_coef: float = 1.0  # weight of the reward term (the thesis has none, i.e. 1)
    policy_coef: float = 1.0  # weight of the policy term (the thesis has none, i.e. 1)
    dynamics_gradient_scale: float = 0.5  # gradient factor at the entrance of each dynamics call (MuZero: 0.5)
    entropy_coef: float = 0.0  # c_H, weight of the root prior's entropy bonus (module docstring); 0 = none
    # The entropy floor (module docstring): the batch's mean root-prior entropy, each example's as a fraction
    # of its most (ln of the actions p* supports), is held above `entropy_floor` by a penalty of
    # entropy_floor_coef per unit below it. 0 = none. Unlike the bonus it does nothing while the prior is
    # spread wider than the floor, so a game whose prior does not collapse trains as without it.
    entropy_floor: float = 0.0
    entropy_floor_coef: float = 1.0
    # What the floor holds up: "batch" the batch's mean fraction (a prior may still go one-hot in the
    # states it favours while others keep the mean up); "state" each example's own fraction (the penalty
    # is the mean shortfall over the examples below the floor), so no state's prior can go one-hot.
    entropy_floor_scope: str = "batch"
    # v in G^N = partial_return + bootstrap_discount · v: "search" uses the stored
    # root value v*; "target_network" evaluates bootstrap_stacked_obs with the target network.
    bootstrap_from: str = "search"
    # Value target alpha·v* + (1 - alpha)·G (the AlphaZero-for-Go design notes, docs/board_games.md: mixing the search value Q into the
    # outcome z lowers the target's variance early on). alpha moves linearly from `_start` to
    # `_end` over `_updates` updates, then stays; 0 everywhere (the default) is the plain return.
    search_value_weight_start: float = 0.0
    search_value_weight_end: float = 0.0
    search_value_weight_updates: int = 1
    # Territory games (Go; moozi/core/territory.py): weights of the root's ownership term (the binary
    # cross-entropy of each point's final owner, averaged over the points) and score term (the squared
    # error of the final score margin divided by the board's points). 0 (the default): no such heads.
    # KataGo's ownership weight is 1.5 per board, summed over the points and divided by their number.
    ownership_coef: float = 0.0
    score_coef: float = 0.0
    # The replay priority delta the learner writes back: "root" is |v⁰_t - G_t| (MuZero Reanalyze,
    # EfficientZero); "max_step" is max_k |v^k - G_{t+k}| over the root and the K unrolled steps, so
    # a target whose unroll crosses a death the model does not foresee is replayed more often.
    priority: str = "root"

    def __post_init__(self):
        if self.bootstrap_from not in BOOTSTRAP_SOURCES:
            raise MooziError(f"loss.bootstrap_from must be one of {BOOTSTRAP_SOURCES}, got {self.bootstrap_from!r}")
        if self.priority not in PRIORITY_SOURCES:
            raise MooziError(f"loss.priority must be one of {PRIORITY_SOURCES}, got {self.priority!r}")
        for name in ("search_value_weight_start", "search_value_weight_end"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise MooziError(f"loss.{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.entropy_coef < 0:
            raise MooziError(f"loss.entropy_coef must be >= 0, got {self.entropy_coef}")
        if not 0.0 <= self.entropy_floor < 1.0:
            raise MooziError(f"loss.entropy_floor must lie in [0, 1) (a fraction of the most entropy), got {self.entropy_floor}")
        if self.entropy_floor_coef < 0:
            raise MooziError(f"loss.entropy_floor_coef must be >= 0, got {self.entropy_floor_coef}")
        if self.entropy_floor_scope not in ENTROPY_FLOOR_SCOPES:
            raise MooziError(f"loss.entropy_floor_scope={self.entropy_floor_scope!r}; allowed: {', '.join(ENTROPY_FLOOR_SCOPES)}")
        for name in ("ownership_coef", "score_coef"):
            if getattr(self, name) < 0:
                raise MooziError(f"loss.{name} must be >= 0 (0: no such term), got {getattr(self, name)}")
        if self.search_value_weight_updates < 1:
            raise MooziError(f"loss.search_value_weight_updates must be >= 1, got {self.search_value_weight_updates}")


def search_value_weight(config: LossConfig, update) -> Array:
    """alpha after `update` updates: the linear schedule of LossConfig.search_value_weight_*."""
    progress = jnp.minimum(jnp.asarray(update, jnp.float32) / config.search_value_weight_updates, 1.0)
    start, end = config.search_value_weight_start, config.search_value_weight_end
    return jnp.float32(start) + (jnp.float32(end) - jnp.float32(start)) * progress


class LossAux(NamedTuple):
    """What `loss_fn` returns beside the scalar loss."""

    metrics: dict  # str -> scalar: each term (batch mean, importance-weighted) and diagnostics
    batch_stats: Any  # the updated running batch-norm moments
    priorities: Array  # [B]: |v⁰_t - G^N_t| (or its max over the unroll), the learner's new δ for the replay buffer
    per_example_loss: Array  # [B]: ρ_b times example b's loss (without L2)
    terms: dict  # str -> [B]: each unweighted per-example term (coefficients applied, ρ not)


def scale_gradient(x, scale: float):
    """Identity forward; multiplies the gradient flowing back through it by `scale`.

    Written as sg(x) + scale (x - sg(x)) so the forward value is exactly x.
    """
    stopped = jax.lax.stop_gradient(x)
    return jax.tree.map(lambda a, s: s + scale * (a - s), x, stopped)


def cosine_distance(a, b, eps: float = 1e-8):
    """[B, D], [B, D] -> [B]: 1 - a·b / (|a| |b|).

    Each vector is normalised with rsqrt(max(|x|², eps²)), never sqrt(|x|²):
    a hidden state can be all zeros (min-max scaling of a constant one), and
    the gradient of sqrt at 0 is infinite, which `maximum` turns into NaN.
    """
    a_unit = a * jax.lax.rsqrt(jnp.maximum(jnp.sum(a * a, axis=-1, keepdims=True), eps * eps))
    b_unit = b * jax.lax.rsqrt(jnp.maximum(jnp.sum(b * b, axis=-1, keepdims=True), eps * eps))
    return 1.0 - jnp.sum(a_unit * b_unit, axis=-1)


def _categorical_ce(targets, logits):
    """[..., Z] probabilities, [..., Z] logits -> [...] cross-entropy."""
    return optax.softmax_cross_entropy(logits, targets)


def bootstrap_values(batch: TrainingTarget, config: LossConfig, network: Network, target_variables) -> Array:
    """[B, K+1]: the v in G^N_{t+k} = partial_return[k] + bootstrap_discount[k] · v."""
    if config.bootstrap_from == "search":
        return batch.bootstrap_value
    if batch.bootstrap_stacked_obs is None or target_variables is None:
        raise MooziError(
            "bootstrap_from='target_network' needs bootstrap_stacked_obs in the batch and target variables"
        )
    obs = batch.bootstrap_stacked_obs  # [B, K+1, H, W, C_h]
    batch_size, steps = obs.shape[:2]
    out = network.initial_inference(target_variables, obs.reshape(batch_size * steps, *obs.shape[2:]))
    return jax.lax.stop_gradient(out.value.reshape(batch_size, steps))


def value_targets(batch: TrainingTarget, config: LossConfig, network: Network, target_variables, update):
    """([B, K+1] value targets alpha·v* + (1 - alpha)·G^N, alpha); no gradient flows into them."""
    returns = batch.partial_return + batch.bootstrap_discount * bootstrap_values(batch, config, network, target_variables)
    alpha = search_value_weight(config, update)
    return jax.lax.stop_gradient(alpha * batch.root_values + (1.0 - alpha) * returns), alpha


def unroll(network: Network, params, batch_stats, batch: TrainingTarget, dynamics_gradient_scale: float):
    """The model unrolled K steps from each target's stacked observation, in training mode.

    Returns ([K+1] network outputs: the root, then one per unrolled action; the
    batch-norm moments after the last call). The gradient entering each
    dynamics call is scaled by `dynamics_gradient_scale`.
    """
    root, new_batch_stats = network.initial_inference_train({"params": params, "batch_stats": batch_stats}, batch.stacked_obs)
    outputs = [root]
    hidden_state = root.hidden_state
    for k in range(batch.actions.shape[1]):
        hidden_state = scale_gradient(hidden_state, dynamics_gradient_scale)
        out, new_batch_stats = network.recurrent_inference_train(
            {"params": params, "batch_stats": new_batch_stats}, hidden_state, batch.actions[:, k]
        )
        outputs.append(out)
        hidden_state = out.hidden_state
    return outputs, new_batch_stats


def _root_plus_unrolled_mean(per_step, num_unroll: int):
    """[B, K+1] -> [B]: step 0 plus the mean over the K unrolled steps (divided by K, as the thesis writes it)."""
    return per_step[:, 0] + jnp.sum(per_step[:, 1:], axis=1) / max(num_unroll, 1)


def policy_term(batch: TrainingTarget, outputs, num_unroll: int):
    """([B] policy term, [B, K+1] masked cross-entropies against p*)."""
    policy_logits = jnp.stack([o.policy_logits for o in outputs], axis=1)  # [B, K+1, A]
    policy_ce = _categorical_ce(batch.action_probs, policy_logits) * batch.policy_mask  # [B, K+1]
    return _root_plus_unrolled_mean(policy_ce, num_unroll), policy_ce


def value_term(targets, outputs, support, num_unroll: int):
    """([B] value term, [B, K+1] cross-entropies against the two-hot value targets)."""
    value_logits = jnp.stack([o.value_logits for o in outputs], axis=1)  # [B, K+1, Z]
    value_ce = _categorical_ce(scalar_to_two_hot(targets, support), value_logits)  # [B, K+1]
    return _root_plus_unrolled_mean(value_ce, num_unroll), value_ce


def supported_entropy(logits, target_probs):
    """[..., A] logits, [..., A] p* -> [...]: entropy of softmax(logits) renormalised over the actions p* > 0."""
    supported = target_probs > 0
    # Finite, so a row with no supported action (past an episode's end) stays finite, gradient included.
    log_p = jax.nn.log_softmax(jnp.where(supported, logits, -1e9), axis=-1)
    return -jnp.sum(jnp.where(supported, jnp.exp(log_p) * log_p, 0.0), axis=-1)


def entropy_fractions(entropy, target_probs, mask):
    """[B] entropies over the actions p* supports, [B, A] p*, [B] mask -> ([B] each entropy as a fraction
    of its most, ln(supported actions); [B] 1 where the example counts: unmasked, with two or more such actions)."""
    supported = jnp.sum(target_probs > 0, axis=-1)
    counted = mask * (supported >= 2)
    return entropy / jnp.log(jnp.maximum(supported, 2).astype(entropy.dtype)), counted


def counted_mean(values, counted):
    """The mean of [B] `values` over the examples `counted` marks (0 when none is)."""
    return jnp.sum(values * counted) / jnp.maximum(jnp.sum(counted), 1.0)


def entropy_floor_term(config: LossConfig, fraction, counted):
    """The floor's penalty from [B] `entropy_fractions`: entropy_floor_coef times the shortfall below
    entropy_floor of the batch's mean fraction ("batch"), or the mean of each example's ("state")."""
    if config.entropy_floor_scope == "batch":
        shortfall = jax.nn.relu(config.entropy_floor - counted_mean(fraction, counted))
    else:
        shortfall = counted_mean(jax.nn.relu(config.entropy_floor - fraction), counted)
    return config.entropy_floor_coef * shortfall


def reward_term(batch: TrainingTarget, outputs, support):
    """([B] reward term, [B, K] cross-entropies against the two-hot rewards of the unrolled steps)."""
    reward_logits = jnp.stack([o.reward_logits for o in outputs[1:]], axis=1)  # [B, K, Z]
    reward_ce = _categorical_ce(scalar_to_two_hot(batch.rewards, support), reward_logits)  # [B, K]
    return jnp.sum(reward_ce, axis=1), reward_ce


def turn_term(turn_passes: Array, outputs, mask: Array):
    """([B] the sum over the K unrolled steps of the turn logit's binary cross-entropy against whether the
    player to move changed, masked; the batch's accuracy of its sign). turn_passes and mask [B, K].
    Summed and unweighted like the reward: a small head that the search's signs depend on."""
    logits = jnp.stack([o.turn_logit for o in outputs[1:]], axis=1)  # [B, K]
    bce = optax.sigmoid_binary_cross_entropy(logits, turn_passes) * mask
    right = ((logits > 0) == (turn_passes > 0.5)) * mask
    return jnp.sum(bce, axis=1), jnp.sum(right) / jnp.maximum(jnp.sum(mask), 1.0)


def add_turn_term(terms: dict, extra_metrics: dict, batch: TrainingTarget, outputs, num_unroll: int) -> None:
    """Games whose turns may repeat (the batch carries `turn_passes`): the turn head's loss and accuracy."""
    if batch.turn_passes is not None and num_unroll > 0:
        terms["turn_loss"], extra_metrics["turn_accuracy"] = turn_term(
            batch.turn_passes, outputs, batch.policy_mask[:, 1:])  # o_{t+k+1} exists


def territory_terms(config: LossConfig, batch: TrainingTarget, root):
    """([B] ownership term, [B] score term, metrics) at the root, from the batch's final-state targets:
    the binary cross-entropy of "the point ends as the mover's" against (1 + ownership) / 2 (a point
    nobody owns is half and half), averaged over the points, and the squared error of the score
    margin over the board's points. Unweighted by the coefficients."""
    logits = root.ownership_logits  # [B, H, W]
    points = logits.shape[1] * logits.shape[2]
    labels = (1.0 + batch.ownership) / 2.0
    ownership = jnp.mean(optax.sigmoid_binary_cross_entropy(logits, labels), axis=(1, 2))
    score_target = batch.score_margin / points
    score = jnp.square(root.score - score_target)
    owned = batch.ownership != 0
    metrics = dict(
        ownership_accuracy=jnp.sum(owned & (jnp.sign(logits) == batch.ownership)) / jnp.maximum(jnp.sum(owned), 1),
        score_error_points=jnp.mean(jnp.abs(root.score - score_target)) * points,
    )
    return ownership, score, metrics


def add_territory_terms(terms: dict, extra_metrics: dict, config: LossConfig, batch: TrainingTarget, outputs) -> None:
    """Territory games whose loss asks for them (`loss.ownership_coef`, `loss.score_coef`)."""
    if batch.ownership is None or outputs[0].ownership_logits is None:
        return
    ownership, score, metrics = territory_terms(config, batch, outputs[0])
    terms["ownership_loss"] = config.ownership_coef * ownership
    terms["score_loss"] = config.score_coef * score
    extra_metrics.update(metrics)


def projected_cosine_distance(network: Network, params, batch_stats, unrolled_batch_stats, states, next_stacked_obs):
    """([N] 1 - cos(ϱ(states), sg(h(next_stacked_obs))), the moments after the projection); N unrolled states
    and the histories of the real positions they should match."""
    projected, new_batch_stats = network.project_train({"params": params, "batch_stats": unrolled_batch_stats},
                                                       states)  # [N, D]
    # Training mode like the unrolled states, but the moment update it returns is dropped (see module docstring).
    next_root, _ = network.initial_inference_train({"params": params, "batch_stats": batch_stats}, next_stacked_obs)
    next_hidden = jax.lax.stop_gradient(next_root.hidden_state.reshape(projected.shape))  # [N, D]
    return cosine_distance(projected, next_hidden), new_batch_stats


def consistency_term(network: Network, params, batch_stats, unrolled_batch_stats, batch: TrainingTarget, outputs):
    """([B] 1 - cos(ϱ(x¹_t), sg(x⁰_{t+1})), masked; the moments after the projection)."""
    distances, new_batch_stats = projected_cosine_distance(network, params, batch_stats, unrolled_batch_stats,
                                                           outputs[1].hidden_state, batch.next_stacked_obs)
    return distances * batch.consistency_mask, new_batch_stats


def _with_policy_target(batch) -> Array:
    """[B, K+1] 1 where a step has a policy target: inside the episode, and p* not all zero (playout
    cap randomisation's fast moves store none). The policy diagnostics average over these steps, so a
    share of fast moves does not dilute them."""
    return batch.policy_mask * (jnp.sum(batch.action_probs, axis=-1) > 0)


def _diagnostics(batch, outputs, targets, policy_ce, value_ce, reward_ce, has_policy, num_unroll: int) -> dict:
    """Plain cross-entropies per step kind and value statistics, readable against fixed floors.

    The weighted loss terms sum root and unrolled steps under importance weights
    (mean ~0.5 with prioritised replay), so they cannot be read against any
    floor. These can: no coefficient, no weight (a perfect +-1 outcome predictor
    on identity bins scores 0).
    """
    root = outputs[0]
    decided = jnp.abs(targets[:, 0]) > 0.1
    metrics = dict(
        value_ce_root=jnp.mean(value_ce[:, 0]),
        policy_ce_root=counted_mean(policy_ce[:, 0], has_policy[:, 0]),
        # Share of decided targets whose sign the root value gets right (board games: who wins).
        value_sign_accuracy=jnp.sum(decided & (jnp.sign(root.value) == jnp.sign(targets[:, 0])))
        / jnp.maximum(jnp.sum(decided), 1),
    )
    if num_unroll > 0:
        metrics.update(
            value_ce_unrolled=jnp.mean(value_ce[:, 1:]),
            policy_ce_unrolled=counted_mean(policy_ce[:, 1:], has_policy[:, 1:]),
            reward_ce=jnp.mean(reward_ce),
        )
    return metrics


def loss_fn(
    params,
    batch_stats,
    target_variables,
    batch: TrainingTarget,
    *,
    network: Network,
    config: LossConfig,
    update=0,
) -> tuple[Array, LossAux]:
    """The batch loss and its aux; differentiate w.r.t. `params` with has_aux=True.

    target_variables ({"params", "batch_stats"} of the target network) is
    only read with bootstrap_from="target_network"; None is fine otherwise.
    `update` (the updates applied so far) drives the search-value weight schedule.
    """
    support = network.config.support
    num_unroll = batch.actions.shape[1]  # K
    targets, alpha = value_targets(batch, config, network, target_variables, update)
    outputs, new_batch_stats = unroll(network, params, batch_stats, batch, config.dynamics_gradient_scale)

    policy, policy_ce = policy_term(batch, outputs, num_unroll)
    value, value_ce = value_term(targets, outputs, support, num_unroll)
    # K = 0 (an AlphaZero-style learner with a perfect model) trains h and f only.
    if num_unroll > 0:
        reward, reward_ce = reward_term(batch, outputs, support)
        consistency, new_batch_stats = consistency_term(network, params, batch_stats, new_batch_stats, batch, outputs)
    else:
        reward, reward_ce = jnp.zeros_like(policy), None
        consistency = jnp.zeros_like(policy)

    terms = {
        "policy_loss": config.policy_coef * policy,
        "value_loss": config.value_coef * value,
        "reward_loss": config.reward_coef * reward,
        "consistency_loss": config.consistency_coef * consistency,
    }
    extra: dict = {}
    add_turn_term(terms, extra, batch, outputs, num_unroll)
    add_territory_terms(terms, extra, config, batch, outputs)
    return combine_terms(config, params, batch, outputs, targets, terms, (policy_ce, value_ce, reward_ce),
                         num_unroll, alpha, new_batch_stats, extra)


def combine_terms(config: LossConfig, params, batch: TrainingTarget, outputs, targets, terms: dict,
                  cross_entropies, num_unroll: int, alpha, new_batch_stats, extra_metrics=None) -> tuple[Array, LossAux]:
    """The loss from its weighted [B] terms (the entropy bonus, importance weights and L2 added),
    with the replay priorities and the logged metrics: shared by every unrolled loss."""
    policy_ce, value_ce, reward_ce = cross_entropies
    root = outputs[0]
    # [B] the root prior's entropy over the actions p*_t supports, masked: the bonus and the collapse diagnostic.
    root_entropy = supported_entropy(root.policy_logits, batch.action_probs[:, 0]) * batch.policy_mask[:, 0]
    if config.entropy_coef > 0:
        terms["entropy_loss"] = -config.entropy_coef * root_entropy
    weight = batch.importance_weight  # [B]
    per_example_loss = weight * sum(terms.values())  # [B]
    l2_loss = config.l2_coef * sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params))
    loss = jnp.mean(per_example_loss) + l2_loss
    fractions, counted = entropy_fractions(root_entropy, batch.action_probs[:, 0], batch.policy_mask[:, 0])
    entropy_fraction = counted_mean(fractions, counted)
    floor_metrics = {}
    if config.entropy_floor > 0:
        # A term of the batch, not of each example: neither importance-weighted nor a replay priority.
        floor_metrics["entropy_floor_loss"] = entropy_floor_term(config, fractions, counted)
        loss = loss + floor_metrics["entropy_floor_loss"]

    if config.priority == "max_step":
        values = jnp.stack([o.value for o in outputs], axis=1)  # [B, K+1]
        priorities = jax.lax.stop_gradient(jnp.max(jnp.abs(values - targets), axis=1))  # [B]
    else:
        priorities = jax.lax.stop_gradient(jnp.abs(root.value - targets[:, 0]))  # [B]
    root_probs = jax.nn.softmax(root.policy_logits, axis=-1)
    metrics = {name: jnp.mean(weight * term) for name, term in terms.items()}
    has_policy = _with_policy_target(batch)
    metrics.update(_diagnostics(batch, outputs, targets, policy_ce, value_ce, reward_ce, has_policy, num_unroll))
    metrics.update(
        l2_loss=l2_loss,
        total_loss=loss,
        value_mean=jnp.mean(root.value),
        value_target_mean=jnp.mean(targets[:, 0]),
        search_value_weight=alpha,
        reward_mean=jnp.mean(jnp.stack([o.reward for o in outputs[1:]])) if num_unroll else jnp.float32(0),
        policy_entropy=jnp.mean(-jnp.sum(root_probs * jax.nn.log_softmax(root.policy_logits), axis=-1)),
        policy_entropy_supported=counted_mean(root_entropy, has_policy[:, 0]),
        policy_entropy_fraction=entropy_fraction,
        **floor_metrics,
        priority_mean=jnp.mean(priorities),
        importance_weight_mean=jnp.mean(weight),
        **(extra_metrics or {}),
    )
    aux = LossAux(
        metrics=metrics,
        batch_stats=new_batch_stats,
        priorities=priorities,
        per_example_loss=per_example_loss,
        terms=terms,
    )
    return loss, aux
