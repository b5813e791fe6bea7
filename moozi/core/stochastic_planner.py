"""Stochastic MuZero's search: decision nodes and chance nodes, through `mctx.stochastic_muzero_policy`.

A simulation alternates two kinds of node (Antonoglou et al., 2022; mctx):

    state s  --action a-->  afterstate as  --chance code c-->  state s'
    (decision: PUCT)        (chance: pick argmax σ(c)/(n(c)+1))

mctx fixes the decision edge: reward 0, discount 1, so Q(s, a) = v(as), the
afterstate's value from the view of the player who moves at s. The chance
edge carries the step's reward and discount: v(as) backs up r + d · v(s').
Who is to move changes with the move, never with chance, so the two-player
sign of planner.py (`search_discount`, d = -gamma) goes where mctx lets one
full step carry it: the discount of the chance edge, once per step. A chance
node therefore compares outcomes for the player who just moved (σ decides
which one is visited, not their values), and the decision node's PUCT compares
moves for the player to move, exactly as in the deterministic planner.

The dummy action is absorbing as in planner.py's `with_absorbing_dummy`
(thesis 5.2.4): below it every afterstate value, reward and value is 0, the
chance prior and the action prior are uniform, and above a predicted end the
dummy is masked at interior decision nodes.

Only PUCT exists for chance nodes in mctx (no Gumbel variant), so a
`PlannerConfig` asking for Gumbel MuZero is refused here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import mctx

from moozi.core.planner import (
    AbsorbingEmbedding,
    PlannerConfig,
    PlannerOutput,
    SearchPolicy,
    learned_root,
    legal_to_invalid,
    mask_interior_dummy,
    step_discount,
    summarize,
    tree_max_depth,
    with_policy_target,
)
from moozi.core.types import Array
from moozi.envs.base import DUMMY_ACTION
from moozi.errors import MooziError

Params = Any


@dataclasses.dataclass(frozen=True)
class StochasticSearchModel:
    """The model behind a stochastic search: three pure, batched functions in mctx's own types.

    root(params, rng, root_input) -> mctx.RootFnOutput                                  (a state)
    decision(params, rng, action [B], state_embedding)
        -> (mctx.DecisionRecurrentFnOutput, afterstate_embedding)                        (s, a -> as)
    chance(params, rng, code [B], afterstate_embedding)
        -> (mctx.ChanceRecurrentFnOutput, state_embedding)                               (as, c -> s')
    The chance output's `discount` [B] carries gamma and the two-player sign.
    """

    root: Callable
    decision: Callable
    chance: Callable


def make_stochastic_learned_model(network, discount: float) -> StochasticSearchModel:
    """The learned model of stochastic_network.py as a search model (no dummy-action rule).

    `network` needs `initial_inference(params, obs)`, `afterstate_inference(params, state, action)` and
    `recurrent_inference(params, afterstate, code_one_hot)` with the output fields of
    stochastic_network.py; `discount` is the signed per-step discount (`planner.search_discount`).
    """

    def decision(params, rng, action, hidden_state):
        del rng
        out = network.afterstate_inference(params, hidden_state, action)
        return mctx.DecisionRecurrentFnOutput(chance_logits=out.chance_logits, afterstate_value=out.value), out.afterstate

    def chance(params, rng, code, afterstate):
        del rng
        num_codes = network.num_chance_outcomes
        out = network.recurrent_inference(params, afterstate, jax.nn.one_hot(code, num_codes, dtype=jnp.float32))
        return (
            mctx.ChanceRecurrentFnOutput(
                action_logits=out.policy_logits,
                value=out.value,
                reward=out.reward,
                discount=step_discount(discount, out),
            ),
            out.hidden_state,
        )

    return StochasticSearchModel(root=learned_root(network), decision=decision, chance=chance)


def with_absorbing_dummy(model: StochasticSearchModel) -> StochasticSearchModel:
    """planner.py's `with_absorbing_dummy` for a stochastic model (read its docstring for why).

    Absorbing starts at the afterstate of a dummy move: its value is 0, its
    chance prior uniform, and every state and afterstate below it has zero
    reward and value and a uniform prior.
    """

    def root(params, rng, root_input):
        out = model.root(params, rng, root_input)
        return out.replace(embedding=AbsorbingEmbedding(out.embedding, jnp.zeros(jnp.shape(out.value), bool)))

    def decision(params, rng, action, embedding: AbsorbingEmbedding):
        out, inner = model.decision(params, rng, action, embedding.inner)
        absorbing = embedding.absorbing | (action == DUMMY_ACTION)  # [B]
        out = out.replace(
            afterstate_value=jnp.where(absorbing, 0.0, out.afterstate_value).astype(out.afterstate_value.dtype),
            chance_logits=jnp.where(absorbing[:, None], 0.0, out.chance_logits).astype(out.chance_logits.dtype),
        )
        return out, AbsorbingEmbedding(inner, absorbing)

    def chance(params, rng, code, embedding: AbsorbingEmbedding):
        out, inner = model.chance(params, rng, code, embedding.inner)
        absorbing = embedding.absorbing
        logits = mask_interior_dummy(out.action_logits)
        out = out.replace(
            reward=jnp.where(absorbing, 0.0, out.reward).astype(out.reward.dtype),
            value=jnp.where(absorbing, 0.0, out.value).astype(out.value.dtype),
            action_logits=jnp.where(absorbing[:, None], 0.0, logits).astype(out.action_logits.dtype),
        )
        return out, AbsorbingEmbedding(inner, absorbing)

    return StochasticSearchModel(root=root, decision=decision, chance=chance)


def make_stochastic_muzero_model(network, discount: float) -> StochasticSearchModel:
    """Stochastic MuZero's search model: the learned model with an absorbing dummy action."""
    return with_absorbing_dummy(make_stochastic_learned_model(network, discount))


def _require_puct(config: PlannerConfig) -> None:
    if config.search_policy is not SearchPolicy.MUZERO:
        raise MooziError(
            "Stochastic MuZero searches with PUCT only (mctx has no Gumbel policy with chance nodes); "
            f"planner.search_policy={config.search_policy.value!r}"
        )


def run_stochastic_search(
    config: PlannerConfig, model: StochasticSearchModel, params: Params, rng: Array, root_input: Any, legal_actions: Array,
) -> mctx.PolicyOutput:
    """`mctx.stochastic_muzero_policy` from `root_input`; illegal root actions are masked.

    The returned tree is mctx's, already cut to the decision slots [.., A]."""
    _require_puct(config)
    root_rng, search_rng = jax.random.split(rng)
    root = model.root(params, root_rng, root_input)
    invalid = legal_to_invalid(legal_actions)
    output = mctx.stochastic_muzero_policy(
        params,
        search_rng,
        root,
        model.decision,
        model.chance,
        num_simulations=config.num_simulations,
        invalid_actions=invalid,
        dirichlet_fraction=float(config.dirichlet_fraction),
        dirichlet_alpha=float(config.dirichlet_alpha),
        pb_c_init=float(config.pb_c_init),
        pb_c_base=float(config.pb_c_base),
        temperature=float(config.temperature),
    )
    return with_policy_target(config, output, root.prior_logits, invalid)


def summarize_stochastic(config: PlannerConfig, policy_output: mctx.PolicyOutput) -> PlannerOutput:
    """planner.py's `summarize`, with `max_depth` counted in env steps (a move and its chance outcome)."""
    out = summarize(config, policy_output)
    # Tree depth alternates afterstate (odd) and state (even): an afterstate at depth 2k-1 plans k moves.
    steps = (tree_max_depth(policy_output.search_tree) + 1) // 2
    return out._replace(stats=out.stats._replace(max_depth=steps))


def _checked(model: StochasticSearchModel, num_actions: int, num_chance_outcomes: int) -> StochasticSearchModel:
    """The model, with its output widths checked against A and C when the search is traced (no runtime cost)."""

    def check(name, width, expected):
        if width != expected:
            raise MooziError(f"the model's {name} has width {width}, the planner expects {expected}")

    def root(params, rng, root_input):
        out = model.root(params, rng, root_input)
        check("root policy", out.prior_logits.shape[-1], num_actions)
        return out

    def decision(params, rng, action, embedding):
        out, afterstate = model.decision(params, rng, action, embedding)
        check("chance prior σ", out.chance_logits.shape[-1], num_chance_outcomes)
        return out, afterstate

    return StochasticSearchModel(root=root, decision=decision, chance=model.chance)


def make_stochastic_planner(
    planner_config: PlannerConfig, network, num_actions: int, num_chance_outcomes: int, discount: float,
) -> Callable[[Params, Array, Any, Array], PlannerOutput]:
    """`planner(params, rng, stacked_obs [B, ...], legal_actions [B, A]) -> PlannerOutput`, as planner.py's
    `make_planner` returns, so acting can use either.

    `discount` is the signed per-step discount (`planner.search_discount(config, spec)`).
    """
    _require_puct(planner_config)
    model = _checked(make_stochastic_muzero_model(network, discount), num_actions, num_chance_outcomes)

    def planner(params, rng, root_input, legal_actions):
        policy_output = run_stochastic_search(planner_config, model, params, rng, root_input, legal_actions)
        return summarize_stochastic(planner_config, policy_output)

    return planner
