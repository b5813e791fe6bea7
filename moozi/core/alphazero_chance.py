"""AlphaZero mode with chance nodes: the search steps the game's real rules and expands chance as
chance nodes weighted by the true probabilities (`planner.chance_search="exact"`, docs/stochastic.md).

AlphaZero mode's perfect model (alphazero.py) steps the env, so a game that draws inside its step
draws once per expanded edge and the search plans as if that one draw were certain. Here the step is
split exactly by the game's `ChanceRules` (moozi/envs/afterstates.py) and searched with
`mctx.stochastic_muzero_policy`, as Stochastic MuZero searches its learned model:

    state s  --move a-->  afterstate as  --chance outcome c, probability p(c | as)-->  state s'
    (decision: PUCT over the network's prior)   (chance: argmax p(c) / (n(c) + 1))

- The decision step applies the real move. mctx fixes its edge (reward 0, discount 1), so
  Q(s, a) = v(as).
- The chance step applies the real outcome. Its edge carries the whole step's reward (the mover's)
  and the signed discount (0 into a terminal state), so v(as), the mover's value, backs up
  r + d · v(s'). The sign is the game's (-1 where turns alternate); with `per_step_signs` (games
  whose turns may repeat, backgammon: one step per die) it is read from who moves in s': +1 where
  the mover moves again, -1 where the turn passed. The chance logits are the true log-probabilities
  (-inf for impossible outcomes), fixed, not learned.
- The network (its representation and prediction functions, on the history the search carries as
  alphazero.py does) gives the prior and the value at decision nodes.
- The afterstate value, which mctx takes as the chance node's first estimate and keeps in its mean
  for good, is one exact expectimax step over the network's values (`afterstate_value="expected"`,
  the default):  v(as) = Σ_c p(c | as) · (r_c + d_c · v(s'_c)),  C network calls per expansion (32 for
  2048, 21 for backgammon, batched into one call of C · B rows). A chance node's estimate is then the probability-weighted mean of
  what its children will report, so its first visit already compares moves by their expectation and
  later visits refine it. "parent" takes the value v(s) of the state the move is made from instead:
  no extra call, but every move of s starts equal, and the search learns nothing about a move until
  it visits one of its outcomes.

mctx runs both functions on every expansion and keeps one result by the node's kind, so each must
take the other's input: the decision step clips its action into [0, A) (a chance node passes A + c)
and the chance step clips its code into [0, C) (a decision node passes a - A); the rules give a
distribution with at least one possible outcome for every afterstate, illegal and ended ones
included, so nothing divides by zero.

Terminal states absorb: the edge into one carries the game's reward and discount 0; below it every
reward, value and afterstate value is 0, the prior uniform and the chance certain. An illegal move
(masked in the prior; PUCT may still try one) gets pgx's penalty and ends the game, as in alphazero.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx

from moozi.core.acting import ActFn, ActingOutput
from moozi.core.alphazero import PerfectModelEmbedding, PerfectModelRoot, network_evaluator
from moozi.core.history import HistoryState, push_history
from moozi.core.planner import AFTERSTATE_VALUES, PlannerConfig, search_discount
from moozi.core.stochastic_planner import StochasticSearchModel, run_stochastic_search, summarize_stochastic
from moozi.core.types import Array
from moozi.envs.base import EnvSpec, StepOutput
from moozi.errors import MooziError


class PerfectStateEmbedding(NamedTuple):
    """A decision node: alphazero.py's embedding plus the network's value there ("parent")."""

    node: PerfectModelEmbedding  # [B] the pgx state, its history, done, to_play
    value: Array  # [B] the network's value of the state (0 where done), from the player to move


class PerfectAfterstateEmbedding(NamedTuple):
    """A chance node: the real afterstate and what the step into the next state needs."""

    afterstate: Any  # [B] the rules' Afterstate
    history: HistoryState  # [B, L, ...] the network's input at the state the move was made from
    action: Array  # [B] int32: the move (the history's next action)
    done: Array  # [B] bool: the game had ended at that state or above it
    to_play: Array  # [B] int32: the player who moved


def _certain(batch: int, num_codes: int) -> Array:
    return jnp.full((batch, num_codes), -jnp.inf, jnp.float32).at[:, 0].set(0.0)


def make_perfect_chance_model(rules, network, discount: float, num_actions: int, per_step_signs: bool = False,
                              afterstate_value: str = "expected") -> StochasticSearchModel:
    """The search model of AlphaZero mode with chance nodes, for `mctx.stochastic_muzero_policy`.

    `rules` is the game's `moozi.envs.afterstates.ChanceRules` (unbatched; vmapped here); `network`
    needs `initial_inference(params, stacked_obs)` with `policy_logits` and `value`; `discount` is the
    signed per-step discount (`planner.search_discount`); `per_step_signs` reads each step's sign from
    who moves next (turns that repeat); `afterstate_value` is "expected" or "parent" (module docstring).
    """
    if afterstate_value not in AFTERSTATE_VALUES:
        raise MooziError(f"afterstate_value={afterstate_value!r}; allowed: {', '.join(AFTERSTATE_VALUES)}")
    num_codes = int(rules.num_chance_outcomes)

    evaluate = network_evaluator(network, num_actions)

    def root(params, rng, root_input: PerfectModelRoot):
        del rng
        logits, value = evaluate(params, root_input.history)
        node = PerfectModelEmbedding(root_input.env_state, root_input.history, root_input.is_last, root_input.to_play)
        return mctx.RootFnOutput(prior_logits=logits, value=value,
                                 embedding=PerfectStateEmbedding(node, jnp.where(node.done, 0.0, value).astype(value.dtype)))

    def step(params, after: PerfectAfterstateEmbedding, code):
        """The chance step of every row for its `code` [B]: (mctx output, next decision node)."""
        code = jnp.clip(jnp.asarray(code, jnp.int32), 0, num_codes - 1)
        env_state, out = jax.vmap(rules.outcome)(after.afterstate, code)
        no_reset = jnp.zeros(code.shape, bool)
        history = push_history(after.history, out.obs, no_reset, after.action)
        logits, value = evaluate(params, history)
        ended_before = after.done
        done = ended_before | out.is_last
        edge_discount = discount
        if per_step_signs:
            edge_discount = jnp.where(out.to_play == after.to_play, abs(discount), -abs(discount))
        value = jnp.where(done, 0.0, value).astype(value.dtype)
        legal_logits = jnp.where(out.legal_actions, logits, jnp.finfo(logits.dtype).min)
        output = mctx.ChanceRecurrentFnOutput(
            action_logits=jnp.where(done[:, None], 0.0, legal_logits).astype(logits.dtype),
            value=value,
            reward=jnp.where(ended_before, 0.0, out.reward).astype(value.dtype),
            discount=jnp.where(done, 0.0, edge_discount).astype(value.dtype),
        )
        node = PerfectModelEmbedding(env_state, history, done, out.to_play)
        return output, PerfectStateEmbedding(node, value)

    def decision(params, rng, action, embedding: PerfectStateEmbedding):
        del rng
        node = embedding.node
        raw_action = jnp.asarray(action, jnp.int32)
        action = jnp.clip(raw_action, 0, num_actions - 1)
        afterstate = jax.vmap(rules.afterstate)(node.env_state, action)
        batch = action.shape[0]
        chance_logits = jnp.where(node.done[:, None], _certain(batch, num_codes),
                                  jax.vmap(rules.chance_logits)(afterstate))
        after = PerfectAfterstateEmbedding(afterstate, node.history, action, node.done, node.to_play)
        dtype = embedding.value.dtype
        if afterstate_value == "parent":
            value = embedding.value
        else:
            def expectation():
                # One expectimax step: each outcome's reward and discounted value, weighted by its probability.
                codes = jnp.broadcast_to(jnp.arange(num_codes)[:, None], (num_codes, batch))
                outputs, _ = jax.vmap(lambda code: step(params, after, code))(codes)  # [C, B] each
                backed_up = outputs.reward + outputs.discount * outputs.value  # [C, B]
                probs = jax.nn.softmax(chance_logits, axis=-1)  # [B, C]; impossible outcomes weigh 0
                return jnp.sum(probs.T * backed_up, axis=0).astype(dtype)

            # mctx passes A + c where it expands a chance node, and drops this output there: where no row
            # of the batch expands a decision node, the C network calls are skipped.
            expands_decision = jnp.any(raw_action < num_actions)
            value = jax.lax.cond(expands_decision, expectation, lambda: jnp.zeros((batch,), dtype))
        value = jnp.where(node.done, 0.0, value).astype(dtype)
        return mctx.DecisionRecurrentFnOutput(chance_logits=chance_logits, afterstate_value=value), after

    def chance(params, rng, code, after: PerfectAfterstateEmbedding):
        del rng
        return step(params, after, code)

    return StochasticSearchModel(root=root, decision=decision, chance=chance)


def make_alphazero_chance_act(env, network, planner_config: PlannerConfig, spec: EnvSpec) -> ActFn:
    """AlphaZero's `act` (alphazero.py's `make_alphazero_act`, same inputs and outputs) searching with
    chance nodes over `env.chance_rules`, its afterstate value `planner_config.afterstate_value`.
    PUCT only: mctx has no Gumbel policy with chance nodes."""
    rules = getattr(env, "chance_rules", None)
    if rules is None:
        raise MooziError(f"{spec.name} gives no exact chance outcomes (its bridge has no chance_rules)")
    model = make_perfect_chance_model(rules, network, search_discount(planner_config, spec), spec.num_actions,
                                      per_step_signs=spec.per_step_turn_signs,
                                      afterstate_value=planner_config.afterstate_value)

    def act(params, history_state: HistoryState, step_output: StepOutput, last_action, env_state, rng):
        history_state = push_history(history_state, step_output.obs, step_output.is_first, last_action)
        root = PerfectModelRoot(env_state, history_state, jnp.asarray(step_output.is_last, bool),
                                jnp.asarray(step_output.to_play, jnp.int32))
        policy_output = run_stochastic_search(planner_config, model, params, rng, root, step_output.legal_actions)
        out = summarize_stochastic(planner_config, policy_output)
        return history_state, ActingOutput(out.action, out.root_value, out.action_probs, out.stats, out.root)

    return act
