"""Acting (thesis 5.2.13): history stacking + initial inference + search as one pure function.

A rollout worker keeps a `HistoryState` for its batch of envs and calls

    history, out = act(params, history, step_output, last_action, env_state, rng)

once per env step; `out.action` goes back to the vectorized env, and
(`out.root_value`, `out.action_probs`) are the step sample's v*_t and p*_t.
Every agent kind's acting has this signature (`ActFn`); `env_state` is the
env's own batched state, which only a search over the true rules reads
(AlphaZero, moozi/core/alphazero.py). moozi/builders.py picks the config's kind.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from moozi.core.planner import (PlannerConfig, PlannerOutput, RootChildren, SearchStats, make_muzero_model,
                                 make_planner, search_discount)
from moozi.envs.base import EnvSpec, StepOutput
from moozi.core.history import HistoryState, history_input, push_history
from moozi.core.types import Array



class ActingOutput(NamedTuple):
    """The planner's answer for one batched env step."""

    action: Array  # [B] int32: a_t (the dummy action 0 on is_last steps)
    root_value: Array  # [B] float32: v*_t, from the player to move
    action_probs: Array  # [B, A] float32: p*_t
    stats: SearchStats  # [B] each
    root: RootChildren  # [B, A] each: prior, visit share and Q of the root's children


# planner(params, rng, stacked_obs [B, ...], legal_actions [B, A]) -> PlannerOutput [B]
Planner = Callable[[Any, Array, Array, Array], PlannerOutput]

# act(params, history_state, step_output [B], last_action [B], env_state [B] | None, rng)
#   -> (history_state, ActingOutput [B])
ActFn = Callable[[Any, HistoryState, StepOutput, Array, Any, Array], tuple[HistoryState, ActingOutput]]


def make_muzero_act(network, planner_config: PlannerConfig, spec: EnvSpec, history_length: int,
                    planner: Planner | None = None) -> ActFn:
    """MuZero's pure, unjitted `act`: the search runs over the learned model, so `env_state` is unused.

    Callers that put acting inside a bigger compiled program (the Anakin
    self-play segment) call it from there; everyone else jits it
    (`moozi.builders.make_acting`).

    `params` are the network's Flax variables; `last_action` [B] is a_{t-1},
    the action that led to `step_output` (ignored where `is_first`). The root
    legal mask is `step_output.legal_actions`, so on an is_last step, where only
    the dummy is legal, the search acts 0 with p* = one-hot(0). Start a batch
    with `moozi.core.history.init_history(B, history_length, spec.obs_shape)`.

    `planner(params, rng, stacked_obs, legal_actions) -> PlannerOutput` replaces MuZero's search over
    `network` (Stochastic MuZero's, `moozi.core.stochastic_planner.make_stochastic_planner`, returns
    the same fields); None: `make_planner` over `make_muzero_model(network)`.
    """
    if planner is None:
        planner = make_planner(planner_config, make_muzero_model(network, search_discount(planner_config, spec)))
    num_actions = spec.num_actions

    def act(params, history_state: HistoryState, step_output: StepOutput, last_action, env_state, rng):
        del env_state  # the learned model searches from the stacked history alone
        if history_state.actions.shape[-1] != history_length:  # a trace-time check: shapes are static
            raise ValueError(
                f"history_state holds {history_state.actions.shape[-1]} steps, the network expects {history_length}"
            )
        history_state = push_history(history_state, step_output.obs, step_output.is_first, last_action)
        stacked_obs = history_input(history_state, num_actions)  # [B, H, W, L*(C+A)]
        out = planner(params, rng, stacked_obs, step_output.legal_actions)
        return history_state, ActingOutput(out.action, out.root_value, out.action_probs, out.stats, out.root)

    return act


@functools.lru_cache(maxsize=16)
def capped_act(act_fn: ActFn, fast_act_fn: ActFn | None, full_search_share: float) -> ActFn:
    """Playout cap randomisation (`planner.full_search_share`): an act that searches with `act_fn`
    with probability `full_search_share` and otherwise with `fast_act_fn`, whose p* it zeroes (no policy
    target: the loss weighs an all-zero p* 0). One coin for the whole batch of envs, from the act's
    own key, so a segment stays reproducible. `act_fn` alone where `fast_act_fn` is None."""
    if fast_act_fn is None:
        return act_fn

    def act(params, history, step, last_action, env_state, key):
        coin_key, search_key = jax.random.split(key)
        full = jax.random.uniform(coin_key) < full_search_share

        def fast(*args):
            history, out = fast_act_fn(*args)
            return history, out._replace(action_probs=jnp.zeros_like(out.action_probs))

        return jax.lax.cond(full, act_fn, fast, params, history, step, last_action, env_state, search_key)

    return act
