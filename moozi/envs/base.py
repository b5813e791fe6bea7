"""The step contract every env bridge produces (docs/envs.md; thesis 5.2.2).

Actions are in moozi's augmented action space of size A = A_env + 1: index 0 is
the dummy action (thesis 5.2.4), index a >= 1 is the library's action a - 1.

An env is a continuous task: `step(action, is_last)` resets the env when
`is_last` is True (the `is_last` of the previous output) and ignores `action`
(thesis Algorithm 1), so the main loop never special-cases episode ends.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

DUMMY_ACTION = 0
SINGLE_AGENT = -1  # `to_play` of single-agent envs


class StepOutput(NamedTuple):
    """What one env step yields. A vectorized env adds a leading batch axis [B] to every field."""

    obs: Any  # [H, W, C] float32; vector observations are [1, 1, C]
    is_first: Any  # [] bool
    is_last: Any  # [] bool
    reward: Any  # [] float32: reward of the player who just acted (0 on is_first)
    legal_actions: Any  # [A] bool; index 0 (dummy) is legal only on is_last steps
    to_play: Any  # [] int32: player to move at this state, SINGLE_AGENT (-1) for one player


@dataclasses.dataclass(frozen=True)
class TerritorySpec:
    """How the last observation of a territory game (Go) shows its final board, from which the targets
    read each point's owner and the score margin (Tromp-Taylor area, moozi/core/territory.py).

    Two stone planes: the mover's and the opponent's (`relative`, pgx) or black's and white's
    (OpenSpiel); `white_to_move_plane` is 1 everywhere when white is to move."""

    first_plane: int
    second_plane: int
    relative: bool
    white_to_move_plane: int
    komi: float


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static facts about an env, enough to build networks and buffers."""

    name: str  # canonical, library-qualified name, e.g. "openspiel:tic_tac_toe"
    obs_shape: tuple[int, int, int]  # (H, W, C)
    num_actions: int  # A = A_env + 1, dummy action included
    num_players: int  # 1 or 2 (two-player games are zero-sum and alternate turns)
    binary_obs: bool = False  # every observation value is 0 or 1: replay may store it as uint8
    # 8-bit frames: every observation value is k / obs_levels for an integer k in 0..obs_levels
    # (images of 0..255 scaled to [0, 1]: 255). Trajectories, replay and checkpoints keep k as uint8,
    # a quarter of float32's bytes; the learner's jitted program divides again.
    obs_levels: int | None = None
    max_episode_steps: int | None = None  # a bound on episode length where the library has one
    action_names: tuple[str, ...] | None = None  # names of actions 1..A-1 for humans, if known
    # Two-player games where a player may move several times in a row (pgx's backgammon: one step per
    # die): targets and search take the sign of each step from who moves next (docs/stochastic.md).
    turns_alternate: bool = True
    # Territory games (Go): where the final board is read from, for the ownership and score targets.
    territory: TerritorySpec | None = None

    @property
    def stored_obs_levels(self) -> int | None:
        """How stored observations encode values: k / levels as uint8 (1 for binary), None for float32."""
        return 1 if self.binary_obs else self.obs_levels

    @property
    def is_two_player(self) -> bool:
        return self.num_players == 2

    @property
    def discount_sign(self) -> float:
        """+1 for one player; -1 for alternating two-player zero-sum games (values flip sign each ply).
        Where turns need not alternate (`turns_alternate` False) the sign is per step instead."""
        return -1.0 if self.num_players == 2 else 1.0

    @property
    def per_step_turn_signs(self) -> bool:
        """Whether targets read each step's sign from `to_play` (a two-player game whose turns may repeat)."""
        return self.num_players == 2 and not self.turns_alternate


@runtime_checkable
class Env(Protocol):
    """A single host-side environment (OpenSpiel, MinAtar, Gymnasium, ALE)."""

    spec: EnvSpec

    def reset(self, seed: int | None = None) -> StepOutput:
        """Starts a new episode (and reseeds if `seed` is given); returns its first step."""

    def step(self, action: int, is_last: bool) -> StepOutput:
        """Takes `action` (augmented index), or resets if `is_last`. Raises IllegalActionError."""

    def close(self) -> None: ...


@runtime_checkable
class JaxEnv(Protocol):
    """A JAX-native environment (pgx, gymnax): pure functions, jittable and vmappable.

    `State` is any pytree. Both functions are unbatched; vmap them at the call site.
    """

    spec: EnvSpec

    def init(self, key) -> tuple[Any, StepOutput]:
        """Returns the state and first step of a new episode."""

    def step(self, state, action, is_last, key) -> tuple[Any, StepOutput]:
        """Pure step with the same reset-on-is_last semantics as `Env.step`.

        Illegal actions cannot raise inside jit: document what happens (e.g. the
        library's own penalty) in the bridge.
        """

    def close(self) -> None:
        """Nothing to release (pure functions), but every env the registry makes can be closed."""


def empty_step(spec: EnvSpec) -> StepOutput:
    """A zero step with the spec's shapes (for buffers and tracing)."""
    return StepOutput(
        obs=np.zeros(spec.obs_shape, np.float32),
        is_first=np.bool_(False),
        is_last=np.bool_(False),
        reward=np.float32(0.0),
        legal_actions=np.zeros((spec.num_actions,), bool),
        to_play=np.int32(SINGLE_AGENT),
    )


def random_legal_actions(rng: np.random.Generator, legal_actions: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per row of a [B, A] mask (Gumbel-max over the mask, vectorised)."""
    noise = rng.random(legal_actions.shape)
    return np.argmax(np.where(legal_actions, noise, -1.0), axis=-1).astype(np.int32)


def stored_obs_dtype(spec: EnvSpec):
    """The dtype trajectories, replay and checkpoints keep observations in (`EnvSpec.obs_levels`)."""
    return np.float32 if spec.stored_obs_levels is None else np.uint8


def encode_obs(obs, spec: EnvSpec) -> np.ndarray:
    """Observations (any leading axes) in their stored dtype; exact, or ValueError naming the game.

    Already-encoded uint8 observations pass through unchanged.
    """
    levels = spec.stored_obs_levels
    obs = np.asarray(obs)
    if levels is None or obs.dtype == np.uint8:
        return obs if levels is not None else obs.astype(np.float32, copy=False)
    stored = np.rint(obs * np.float32(levels)).astype(np.uint8)
    if not np.array_equal(decode_obs(stored, levels), obs):
        what = "0 or 1 (binary_obs)" if levels == 1 else f"k / {levels} for integers k in 0..{levels} (obs_levels)"
        raise ValueError(f"{spec.name}: every observation value should be {what}, but one is not")
    return stored


def obs_scale(levels: int) -> np.float32:
    """The factor from a byte k to its value: float32(1 / levels).

    Bridges and the decoder multiply by it rather than divide by `levels`: XLA
    compiles a division by a constant as a multiplication by its reciprocal, so
    only the product is the same bit for bit in numpy and in a jitted program.
    """
    return np.float32(1.0 / levels)


def decode_obs(stored, levels: int | None, xp=np):
    """float32 observations from stored ones: k · obs_scale(levels), exactly as the bridge computed them.

    `xp` is numpy or jax.numpy (the learner decodes inside its jitted program).
    """
    obs = xp.asarray(stored, xp.float32)
    if levels is None or levels == 1:
        return obs
    return obs * obs_scale(levels)
