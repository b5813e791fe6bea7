"""AlphaZero mode: search with the perfect model (the game's own rules) inside mctx.

The model's embedding is the pgx game state itself plus the history the
network reads, so a simulation steps the real game and asks the network only
for a policy prior and a value (the representation and prediction functions;
the dynamics function is never used). The env step is a pure JAX function, so
the whole search, game steps included, stays one compiled program.

Terminal states: the transition into a terminal state carries the game's
reward and discount 0, so nothing below a terminal node reaches the root
(the pgx/mctx AlphaZero convention); below it rewards and values are 0 and the
prior is uniform, as under MuZero's absorbing dummy action.

Interior nodes mask illegal actions in the prior (the root is masked by mctx).
pgx answers an illegal action with its penalty (the mover loses), so the rare
simulation that still tries one learns it is bad.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx

from moozi.core.acting import ActFn, ActingOutput
from moozi.core.planner import PlannerConfig, SearchModel, make_planner, search_discount
from moozi.core.territory import final_ownership_and_score
from moozi.envs.base import EnvSpec, StepOutput, TerritorySpec
from moozi.core.history import HistoryState, history_input, push_history
from moozi.core.types import Array



class PerfectModelEmbedding(NamedTuple):
    env_state: Any  # [B] pgx states
    history: HistoryState  # [B, L, ...]: the network's input up to this node
    done: Array  # [B] bool: the game has ended at this node or above it
    to_play: Array  # [B] int32: the player to move at this node


class PerfectModelRoot(NamedTuple):
    env_state: Any  # [B] pgx states at the root
    history: HistoryState  # [B, L, ...] already holding the root observation
    is_last: Array  # [B] bool
    to_play: Array  # [B] int32


class ScoreUtility(NamedTuple):
    """`planner.score_utility`: the search's utility adds coef * (2/pi) * atan(margin / scale) to the win value."""

    coef: float
    scale: float  # points
    territory: TerritorySpec  # where a finished game's observation shows its board


def score_utility(margin, coef: float, scale: float):
    """KataGo's static score utility of a score margin (points, the mover's view): in (-coef, coef)."""
    return coef * (2.0 / jnp.pi) * jnp.arctan(margin / scale)


def network_evaluator(network, num_actions: int, utility: ScoreUtility | None = None):
    """(params, history) -> (policy logits, value): the network's prior and value at a node whose
    input is the history the search carries (the rules, not the network, give the next state). With
    `utility`, the value adds the score utility of the score head's margin (points: its output times
    the board's points)."""

    def evaluate(params, history):
        out = network.initial_inference(params, history_input(history, num_actions))
        if utility is None:
            return out.policy_logits, out.value
        points = out.ownership_logits.shape[-2] * out.ownership_logits.shape[-1]
        return out.policy_logits, out.value + score_utility(out.score * points, utility.coef, utility.scale)

    return evaluate


def _final_margin_utility(step, actor, utility: ScoreUtility):
    """[B] the score utility of each finished game's final margin for the player who made the last
    move (`actor`): the observation shows the board from the side of the player to move then."""
    _, margin = jax.vmap(lambda obs: final_ownership_and_score(obs, utility.territory))(step.obs)
    margin = jnp.where(step.to_play == actor, margin, -margin)
    return score_utility(margin, utility.coef, utility.scale)


def make_perfect_model(env, network, discount: float, num_actions: int, per_step_signs: bool = False,
                       utility: ScoreUtility | None = None) -> SearchModel:
    """AlphaZero's search model. `env` is a JaxEnv with a pure `step(state, action, is_last, key)`;
    `discount` is the signed per-edge discount (`search_discount`: -1 for two-player board games).
    `per_step_signs` (games whose turns may repeat): each edge's sign is read from the rules instead,
    -1 where the player to move changes, +1 where the mover moves again. Chance inside the search
    (pgx's backgammon rolls the next turn's dice in `step`) is sampled once per expanded edge; where the
    bridge splits its step exactly (2048, backgammon), `planner.chance_search="exact"` searches chance
    nodes instead (alphazero_chance.py). `utility` (`planner.score_utility`): values and the reward of a
    game's end add the score utility of the margin."""

    evaluate = network_evaluator(network, num_actions, utility)

    def root(params, rng, root_input: PerfectModelRoot):
        del rng
        logits, value = evaluate(params, root_input.history)
        embedding = PerfectModelEmbedding(root_input.env_state, root_input.history, root_input.is_last,
                                          root_input.to_play)
        return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=embedding)

    def recurrent(params, rng, action, embedding: PerfectModelEmbedding):
        batch = action.shape[0]
        keys = jax.random.split(rng, batch)
        no_reset = jnp.zeros((batch,), bool)
        env_state, step = jax.vmap(env.step)(embedding.env_state, action, no_reset, keys)
        history = push_history(embedding.history, step.obs, no_reset, action)
        logits, value = evaluate(params, history)
        ended_before = embedding.done
        done = ended_before | step.is_last
        legal_logits = jnp.where(step.legal_actions, logits, jnp.finfo(logits.dtype).min)
        edge_discount = discount
        if per_step_signs:
            edge_discount = jnp.where(step.to_play == embedding.to_play, abs(discount), -abs(discount))
        reward = jnp.where(ended_before, 0.0, step.reward)
        if utility is not None:  # the final margin, counted only in the (few) batches where a game ends
            ends = step.is_last & ~ended_before
            final = jax.lax.cond(jnp.any(ends), lambda: _final_margin_utility(step, embedding.to_play, utility),
                                 lambda: jnp.zeros_like(reward))
            reward = reward + jnp.where(ends, final, 0.0)
        out = mctx.RecurrentFnOutput(
            reward=reward.astype(value.dtype),
            discount=jnp.where(done, 0.0, edge_discount).astype(value.dtype),
            prior_logits=jnp.where(done[:, None], 0.0, legal_logits).astype(logits.dtype),
            value=jnp.where(done, 0.0, value).astype(value.dtype),
        )
        return out, PerfectModelEmbedding(env_state, history, done, step.to_play)

    return SearchModel(root=root, recurrent=recurrent)


def make_alphazero_act(env, network, planner_config: PlannerConfig, spec: EnvSpec) -> ActFn:
    """AlphaZero's pure, unjitted `act` (`moozi.core.acting.ActFn`): the search starts from
    `env_state`, the batched env state, and steps copies of it with the game's rules.

    Not jitted here: callers jit it alone (`moozi.builders.make_acting`) or
    inside a whole self-play segment (the Anakin path).
    """
    utility = None
    if planner_config.score_utility > 0:
        utility = ScoreUtility(planner_config.score_utility, planner_config.score_utility_scale, spec.territory)
    model = make_perfect_model(env, network, search_discount(planner_config, spec), spec.num_actions,
                               per_step_signs=spec.per_step_turn_signs, utility=utility)
    planner = make_planner(planner_config, model)

    def act(params, history_state: HistoryState, step_output: StepOutput, last_action, env_state, rng):
        history_state = push_history(history_state, step_output.obs, step_output.is_first, last_action)
        root = PerfectModelRoot(env_state, history_state, jnp.asarray(step_output.is_last, bool),
                                jnp.asarray(step_output.to_play, jnp.int32))
        out = planner(params, rng, root, step_output.legal_actions)
        return history_state, ActingOutput(out.action, out.root_value, out.action_probs, out.stats, out.root)

    return act
