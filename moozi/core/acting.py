"""Acting (thesis 5.2.13): history stacking + initial inference + search as one jitted program.

A rollout worker keeps a `HistoryState` for its batch of envs and calls

    history, out = act(params, history, step_output, last_action, rng)

once per env step; `out.action` goes back to the vectorized env, and
(`out.root_value`, `out.action_probs`) are the step sample's v*_t and p*_t.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax

from moozi.core.planner import PlannerConfig, SearchStats, make_muzero_model, make_planner, search_discount
from moozi.envs.base import EnvSpec, StepOutput
from moozi.history import HistoryState, history_input, push_history

Array = Any


class ActingOutput(NamedTuple):
    """The planner's answer for one batched env step."""

    action: Array  # [B] int32: a_t (the dummy action 0 on is_last steps)
    root_value: Array  # [B] float32: v*_t, from the player to move
    action_probs: Array  # [B, A] float32: p*_t
    stats: SearchStats  # [B] each


ActFn = Callable[[Any, HistoryState, StepOutput, Array, Array], tuple[HistoryState, ActingOutput]]


def make_act_fn(network, planner_config: PlannerConfig, spec: EnvSpec, history_length: int) -> ActFn:
    """The jitted `act(params, history_state, step_output [B], last_action [B], rng)`; see `make_act`."""
    return jax.jit(make_act(network, planner_config, spec, history_length))


def make_act(network, planner_config: PlannerConfig, spec: EnvSpec, history_length: int) -> ActFn:
    """Builds the pure, unjitted `act(params, history_state, step_output [B], last_action [B], rng)`.

    Callers that put acting inside a bigger compiled program (the Anakin
    self-play segment) call it from there; everyone else uses `make_act_fn`.

    `params` are the network's Flax variables; `last_action` [B] is a_{t-1},
    the action that led to `step_output` (ignored where `is_first`). The root
    legal mask is `step_output.legal_actions`, so on an is_last step, where only
    the dummy is legal, the search acts 0 with p* = one-hot(0). Start a batch
    with `moozi.history.init_history(B, history_length, spec.obs_shape)`.
    """
    model = make_muzero_model(network, search_discount(planner_config, spec))
    planner = make_planner(planner_config, model)
    num_actions = spec.num_actions

    def act(params, history_state: HistoryState, step_output: StepOutput, last_action, rng):
        if history_state.actions.shape[-1] != history_length:  # a trace-time check: shapes are static
            raise ValueError(
                f"history_state holds {history_state.actions.shape[-1]} steps, the network expects {history_length}"
            )
        history_state = push_history(history_state, step_output.obs, step_output.is_first, last_action)
        stacked_obs = history_input(history_state, num_actions)  # [B, H, W, L*(C+A)]
        out = planner(params, rng, stacked_obs, step_output.legal_actions)
        return history_state, ActingOutput(out.action, out.root_value, out.action_probs, out.stats)

    return act
