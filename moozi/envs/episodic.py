"""The shell shared by single-agent episodic bridges (MinAtar, Gymnasium, Atari).

The public `reset`/`step` own the shared rules once (as pgx's `core.step`
does): reset on `is_last`, refuse illegal actions, count steps against an
optional limit, and build the StepOutput. A bridge fills in two hooks:
`_begin(seed) -> obs` and `_advance(action) -> (obs, reward, terminal)`.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, EnvSpec, StepOutput
from moozi.errors import IllegalActionError, MooziError

# Shared, read-only scalars: building numpy scalars costs more than the game step
# of some MinAtar games, so the constant fields reuse these objects.
_TRUE, _FALSE = np.bool_(True), np.bool_(False)
_NO_REWARD = np.float32(0.0)
_TO_PLAY = np.int32(SINGLE_AGENT)


def parse_options(cls, where: str, options: dict, *, strict: bool = True):
    """(cls(**known options), the other options); with `strict`, unknown names are a one-line MooziError."""
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown and strict:
        raise MooziError(f"unknown option(s) {', '.join(unknown)} for {where}; allowed: {', '.join(allowed)}")
    return cls(**{k: v for k, v in options.items() if k in allowed}), {k: options[k] for k in unknown}


def legal_masks(num_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """(mask on non-last steps, mask on last steps) of a game whose actions are all always legal.

    Read-only, so every step can hand out the same arrays without copying.
    """
    mid = np.ones(num_actions, bool)
    mid[DUMMY_ACTION] = False
    last = ~mid
    mid.setflags(write=False)
    last.setflags(write=False)
    return mid, last


class SingleAgentEnv(abc.ABC):
    """Base of the single-agent bridges; subclasses set `spec` and call `_init_episodes`."""

    spec: EnvSpec

    def _init_episodes(self, max_episode_steps: int | None) -> None:
        self._limit = max_episode_steps  # the library's own limit ends episodes by itself
        self._mid_mask, self._last_mask = legal_masks(self.spec.num_actions)
        self._t = 0
        self._done: bool | None = None  # None before the first reset

    # ------------------------------------------------------------------ hooks
    @abc.abstractmethod
    def _begin(self, seed: int | None) -> np.ndarray:
        """Starts the library's episode (reseeding when given); returns its first observation."""

    @abc.abstractmethod
    def _advance(self, action: int) -> tuple[np.ndarray, float, bool]:
        """Applies augmented action `action` (>= 1); returns (observation, reward, episode ended)."""

    # ----------------------------------------------------------------- public
    def reset(self, seed: int | None = None) -> StepOutput:
        obs = self._begin(seed)
        self._t = 0
        self._done = False
        return StepOutput(
            obs=obs, is_first=_TRUE, is_last=_FALSE, reward=_NO_REWARD, legal_actions=self._mid_mask, to_play=_TO_PLAY
        )

    def step(self, action: int, is_last: bool) -> StepOutput:
        if is_last or self._done is None:
            return self.reset()
        action = int(action)
        if self._done or not 0 < action < self.spec.num_actions:
            raise self._illegal(action)
        obs, reward, terminal = self._advance(action)
        self._t += 1
        done = bool(terminal) or (self._limit is not None and self._t >= self._limit)
        self._done = done
        return StepOutput(
            obs=obs,
            is_first=_FALSE,
            is_last=_TRUE if done else _FALSE,
            reward=np.float32(reward),
            legal_actions=self._last_mask if done else self._mid_mask,
            to_play=_TO_PLAY,
        )

    def close(self) -> None:
        self._done = None

    def _illegal(self, action: int) -> IllegalActionError:
        if self._done:
            return IllegalActionError(
                f"action {action} is illegal in {self.spec.name}: the episode has ended;"
                f" pass is_last=True to start the next one; legal: [{DUMMY_ACTION}]"
            )
        legal = list(range(1, self.spec.num_actions))
        return IllegalActionError(f"action {action} is illegal in {self.spec.name}; legal: {legal}")
