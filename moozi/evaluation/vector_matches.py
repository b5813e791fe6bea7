"""Games played side by side in a batch of envs: the agent's search against an opponent policy.

One batched search per step plays every game at once. The testing worker
measures a run with it during training (a random opponent), and `moozi eval`
plays two-player JAX-native games that have no OpenSpiel twin with it
(pgx:backgammon against `random` or the greedy pip-count bot,
moozi/evaluation/backgammon_bot.py). Game i gives the agent seat i % 2.
"""

from __future__ import annotations

import threading
from typing import Callable, NamedTuple

import jax
import numpy as np

from moozi.core.history import init_history
from moozi.envs.base import random_legal_actions

# (step, vector env, to_move) -> one action per env; called on every step, its answer used where the
# opponent is to move: `to_move`, a bool per env (an opponent that keeps a plan per game, as the
# gnubg ones do, must know which moves are its own).
OpponentPolicy = Callable[[object, object, np.ndarray], np.ndarray]


class BatchOutcome(NamedTuple):
    returns: np.ndarray  # [B] each game's summed reward (one-player games: the episode's return)
    outcome: np.ndarray  # [B] two-player games: the agent's result, +1 win, 0 draw or unfinished, -1 loss
    points: np.ndarray  # [B] two-player games: the last reward signed for the agent (backgammon: +-1, 2, 3)
    finished: np.ndarray  # [B] bool: the game ended before the step cap
    agent_seat: np.ndarray  # [B] the agent's seat in each game (two-player games)
    final_obs: np.ndarray | None = None  # [B, H, W, C] each game's last observation (zeros if unfinished)
    final_to_play: np.ndarray | None = None  # [B] the player to move at that observation


def random_opponent(seed: int) -> OpponentPolicy:
    """A uniformly random legal move, from its own numpy stream."""
    rng = np.random.default_rng(seed)
    return lambda step, env, to_move: random_legal_actions(rng, step.legal_actions)


def play_batch(act: Callable, variables, env, *, history_length: int, obs_shape: tuple[int, ...],
               is_two_player: bool, seed: int, max_steps: int, opponent: OpponentPolicy | None = None,
               needs_env_state: bool = False, cancelled: threading.Event | None = None) -> BatchOutcome:
    """Plays one game in each of `env`'s envs (each until its first episode ends, or `max_steps` steps).

    `act(variables, history, step, last_action, env_state, key) -> (history, ActingOutput)` is the
    agent's batched acting program. Two-player games need `opponent`."""
    if is_two_player and opponent is None:
        raise ValueError("a two-player game needs an opponent policy")
    step = env.reset()
    num_games = step.is_last.shape[0]
    key = jax.random.key(seed)
    history = init_history(num_games, history_length, obs_shape)
    last_action = np.zeros(num_games, np.int32)
    agent_seat = np.arange(num_games) % 2
    acted_by = np.full(num_games, -1)  # who chose the action that led to `step`
    done = np.zeros(num_games, bool)
    total = np.zeros(num_games, np.float64)
    points = np.zeros(num_games, np.float64)
    final_obs = np.zeros((num_games, *obs_shape), np.float32)
    final_to_play = np.zeros(num_games, np.int32)
    steps = 0
    while not done.all() and steps < max_steps and not (cancelled is not None and cancelled.is_set()):
        key, sub = jax.random.split(key)
        env_state = env.state if needs_env_state else None
        history, out = act(variables, history, step, last_action, env_state, sub)
        action = np.asarray(out.action, np.int32)
        if is_two_player:
            opponent_turn = (step.to_play != agent_seat) & ~step.is_last
            opponent_action = np.asarray(opponent(step, env, opponent_turn & ~done), np.int32)
            action = np.where(opponent_turn, opponent_action, action)
        live = ~done
        total[live] += step.reward[live]
        ended = step.is_last & live
        if is_two_player and ended.any():
            # The reward belongs to the player who just acted: the one to play at the step before. (Not
            # "the one not to play now": pgx's backgammon leaves the winner to play at the end.)
            mover_is_agent = acted_by == agent_seat
            points[ended] = np.where(mover_is_agent, step.reward, -step.reward)[ended]
        final_obs[ended] = np.asarray(step.obs)[ended]
        final_to_play[ended] = np.asarray(step.to_play)[ended]
        done |= step.is_last
        if done.all():
            break
        # A copy: a VectorEnv's step arrays are views of buffers the next step overwrites in place
        # (moozi/envs/vector.py), so a kept reference would name the next player, not this one.
        acted_by = np.array(step.to_play)
        step = env.step(action, step.is_last)
        last_action = action
        steps += 1
    return BatchOutcome(returns=total, outcome=np.sign(points), points=points, finished=done, agent_seat=agent_seat,
                        final_obs=final_obs, final_to_play=final_to_play)
