"""Acting inputs for many positions of one game at once, each position given by its moves.

The agent's bots (moozi/play/openspiel_bot.py) rebuild the history input of one position
from its game's action history. Measuring an agent on hundreds of labelled
positions needs the same for all of them together, so that one batched search
answers them all: `PositionBatcher(game, history_length)(move_lists)` gives the
arguments of the acting function (`make_acting`) for the whole batch.

OpenSpiel games replay the moves in OpenSpiel and read the env bridge's
observations (`OpenSpielEnv.step_output_at`); the pgx twin of an OpenSpiel game
(what AlphaZero mode trains on) replays them in pgx, all positions in one
jitted scan, and also returns the pgx states that AlphaZero searches from.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel

from moozi.envs.base import DUMMY_ACTION, StepOutput
from moozi.errors import MooziError
from moozi.core.history import HistoryState

__all__ = ["PositionBatch", "PositionBatcher", "history_window"]


class PositionBatch(NamedTuple):
    history: HistoryState  # [B, L]: the frames and actions before each position's own
    step: StepOutput  # [B]: the env's output at each position
    last_action: np.ndarray  # [B] int32: the augmented action that led there (the dummy at the start)
    env_state: Any  # [B] pgx states at the positions (AlphaZero searches from them); None for OpenSpiel


def history_window(frames: np.ndarray, actions: np.ndarray, lengths: np.ndarray, history_length: int):
    """What the acting function needs to push the current observation onto the right history.

    frames [B, T+1, H, W, C]: the observation after each ply (only plies n-L..n of a position of
    n plies are read); actions [B, max(T, 1)]: the augmented actions played; lengths [B]: n.
    Returns (HistoryState [B, L] holding o_{n-L..n-1} and a_{n-L-1..n-2}, o_n [B, H, W, C],
    a_{n-1} [B]), with zero frames and the dummy action before the start (moozi/core/history.py):
    exactly the history that pushing o_0..o_{n-1} one step at a time would leave.
    """
    lengths = np.asarray(lengths, np.int64)
    rows = np.arange(len(lengths))
    plies = lengths[:, None] - history_length + np.arange(history_length)  # [B, L]: n-L..n-1
    frames_before = frames[rows[:, None], np.maximum(plies, 0)]  # [B, L, H, W, C]
    frames_before = np.where((plies >= 0)[..., None, None, None], frames_before, 0.0).astype(np.float32)
    led_to = plies - 1  # the action played at ply p-1 led to the frame of ply p
    actions_before = np.where(led_to >= 0, actions[rows[:, None], np.maximum(led_to, 0)], DUMMY_ACTION)
    last_action = np.where(lengths > 0, actions[rows, np.maximum(lengths - 1, 0)], DUMMY_ACTION)
    history = HistoryState(frames=frames_before, actions=actions_before.astype(np.int32))
    return history, np.asarray(frames[rows, lengths], np.float32), last_action.astype(np.int32)


class PositionBatcher:
    """`batcher(move_lists) -> PositionBatch` for `game` (an env name: `openspiel:...` or a pgx twin).

    A move is the library's action id (for connect_four the column); every position must be
    reachable by legal moves and not be over.
    """

    def __init__(self, game: str, history_length: int):
        from moozi.envs.twins import openspiel_twin

        self.history_length = history_length
        self._pgx = None
        if openspiel_twin(game) is not None:
            from moozi.envs.registry import make_env

            env = make_env(game)
            self._max_plies = pyspiel.load_game(openspiel_twin(game).split(":", 1)[1]).max_game_length()
            self._pgx = jax.jit(functools.partial(_replay_in_pgx, env))
        elif game.startswith("openspiel:"):
            from moozi.envs.openspiel import OpenSpielEnv

            self._env = OpenSpielEnv(game.split(":", 1)[1])
        else:
            raise MooziError(f"positions given by their moves need an OpenSpiel game or a pgx twin of one, not {game}")

    def __call__(self, move_lists: Sequence[Sequence[int]]) -> PositionBatch:
        move_lists = [[int(m) for m in moves] for moves in move_lists]
        lengths = np.asarray([len(moves) for moves in move_lists], np.int64)
        actions = np.zeros((len(move_lists), max(1, int(lengths.max(initial=0)))), np.int32)
        for i, moves in enumerate(move_lists):
            actions[i, : len(moves)] = np.asarray(moves, np.int32) + 1
        if self._pgx is not None:
            frames, step, env_state = self._replay_pgx(actions, lengths)
        else:
            frames, step = self._replay_openspiel(move_lists)
            env_state = None
        history, obs, last_action = history_window(frames, actions, lengths, self.history_length)
        step = step._replace(obs=obs, is_first=lengths == 0)
        return PositionBatch(history, step, last_action, env_state)

    def _replay_openspiel(self, move_lists):
        env, length = self._env, self.history_length
        frames = np.zeros((len(move_lists), max(map(len, move_lists), default=0) + 1, *env.spec.obs_shape), np.float32)
        steps = []
        for i, moves in enumerate(move_lists):
            state = env.game.new_initial_state()
            for ply in range(len(moves) + 1):
                if state.is_terminal() or state.is_chance_node():
                    raise MooziError(f"no move to search after {moves[:ply]}: the game is over or at a chance node")
                if ply >= len(moves) - length:
                    out = env.step_output_at(state)
                    frames[i, ply] = out.obs
                if ply < len(moves):
                    if moves[ply] not in state.legal_actions():
                        raise MooziError(f"move {moves[ply]} is illegal after {moves[:ply]}")
                    state.apply_action(moves[ply])
            steps.append(out)
        return frames, StepOutput(*(np.stack(field) for field in zip(*steps)))

    def _replay_pgx(self, actions, lengths):
        padded = np.zeros((len(lengths), self._max_plies), np.int32)
        padded[:, : actions.shape[1]] = actions
        env_state, *rest = self._pgx(padded, np.asarray(lengths, np.int32))
        step, frames, legal = jax.device_get(rest)
        ended = step.is_last | ~legal
        if ended.any():
            i = int(np.flatnonzero(ended)[0])
            moves = (actions[i, : lengths[i]] - 1).tolist()
            raise MooziError(f"no move to search after {moves}: an illegal move, or the game is over")
        return frames, step, env_state


def _replay_in_pgx(env, actions, lengths):
    """Plays each row's first `lengths` actions; rows stop where their moves end.
    -> (states [B], step outputs [B], observations after each ply [B, T+1, ...], all moves legal [B])."""
    batch, plies = actions.shape
    # The key PgxTwinBot replays with: pgx draws which player id moves first from the init key.
    keys = jnp.tile(jax.random.PRNGKey(0)[None], (batch, 1))
    state, out = jax.vmap(env.init)(keys)
    no_reset = jnp.zeros((batch,), bool)

    def play(carry, ply):
        state, out, legal = carry
        action = actions[:, ply]
        active = ply < lengths
        legal = legal & (~active | out.legal_actions[jnp.arange(batch), action])
        new_state, new_out = jax.vmap(env.step)(state, action, no_reset, keys)

        def keep(new, old):
            return jnp.where(active.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)

        state, out = jax.tree.map(keep, new_state, state), jax.tree.map(keep, new_out, out)
        return (state, out, legal), out.obs

    first_obs = out.obs
    (state, out, legal), obs = jax.lax.scan(play, (state, out, jnp.ones((batch,), bool)), jnp.arange(plies))
    frames = jnp.concatenate([first_obs[:, None], jnp.moveaxis(obs, 0, 1)], axis=1)
    return state, out, frames, legal
