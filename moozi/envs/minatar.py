"""The MinAtar bridge: `minatar:<game>` for asterix, breakout, freeway, seaquest and space_invaders.

Protocol (the MinAtar paper's, Young & Tian 2019, unless an option says otherwise):
- Sticky actions with probability 0.1, drawn from the env's own RNG, which
  `minatar.Environment.seed` shares with the game's randomness: an episode is
  reproducible from the seed.
- The game's minimal action set by default; `full_action_space=True` gives all
  six MinAtar actions (noop, left, up, right, down, fire).
- `obs` is the (10, 10, n_channels) boolean state as float32 (`binary_obs`).
- Episode length: MinAtar has no general step limit. Only freeway ends by time
  (2500 frames of its timer, i.e. 2501 steps); the other games end only when
  the player loses, which a good agent may postpone for a very long time, so
  `max_episode_steps` optionally truncates episodes (the truncated step is
  `is_last`, like a terminal one).
"""

from __future__ import annotations

import dataclasses
import difflib

import numpy as np
from minatar import Environment

from moozi.envs.base import EnvSpec
from moozi.envs.episodic import SingleAgentEnv, parse_options
from moozi.errors import MooziError, UnknownGameError

__all__ = ["MinAtarEnv", "MinAtarOptions", "make", "known_games"]

PREFIX = "minatar"
_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
# Steps after which the game itself ends the episode (freeway's timer starts at
# 2500 and the game ends once it drops below zero).
_LIBRARY_STEP_LIMITS = {"freeway": 2501}
_ACTION_NAMES = {"n": "noop", "l": "left", "u": "up", "r": "right", "d": "down", "f": "fire"}



@dataclasses.dataclass(frozen=True)
class MinAtarOptions:
    """Options of `make` (every one optional)."""

    seed: int | None = None  # seeds the game and sticky-action RNG at construction; None: OS entropy
    sticky_action_prob: float = 0.1  # chance the previous action repeats instead of the chosen one
    full_action_space: bool = False  # all 6 MinAtar actions instead of the game's minimal set
    max_episode_steps: int | None = None  # truncate episodes after this many steps (None: the game's own end)
    difficulty_ramping: bool = True  # MinAtar's default: games speed up as the episode goes on


def known_games() -> list[str]:
    """The five MinAtar games."""
    return list(_GAMES)


class MinAtarEnv(SingleAgentEnv):
    """One MinAtar game as a moozi `Env` (single agent, so `to_play` is always -1)."""

    def __init__(self, game: str, options: MinAtarOptions = MinAtarOptions()):
        if game not in _GAMES:
            close = difflib.get_close_matches(game.lower(), _GAMES, n=3)
            hint = f"; did you mean {', '.join(PREFIX + ':' + c for c in close)}?" if close else ""
            raise UnknownGameError(f"unknown MinAtar game {game!r}{hint} (known: {', '.join(_GAMES)})")
        if not 0.0 <= options.sticky_action_prob <= 1.0:
            raise MooziError(f"sticky_action_prob must be in [0, 1], got {options.sticky_action_prob}")
        if options.max_episode_steps is not None and options.max_episode_steps < 1:
            raise MooziError(f"max_episode_steps must be at least 1 or None, got {options.max_episode_steps}")
        self.options = options
        self._env = Environment(
            game, sticky_action_prob=options.sticky_action_prob, difficulty_ramping=options.difficulty_ramping
        )
        # Environment() draws its first state from an unseeded RNG; seeding now
        # makes even a reset(seed=None) episode reproducible when `seed` is given.
        self._env.seed(options.seed)
        all_actions = list(range(self._env.num_actions()))
        self._actions = all_actions if options.full_action_space else list(self._env.minimal_action_set())
        limits = [n for n in (_LIBRARY_STEP_LIMITS.get(game), options.max_episode_steps) if n is not None]
        letters = self._env.env.action_map
        self.spec = EnvSpec(
            name=f"{PREFIX}:{game}",
            obs_shape=tuple(int(d) for d in self._env.state_shape()),
            num_actions=len(self._actions) + 1,
            num_players=1,
            binary_obs=True,
            max_episode_steps=min(limits) if limits else None,
            action_names=tuple(_ACTION_NAMES[letters[a]] for a in self._actions),
        )
        self._init_episodes(options.max_episode_steps)

    def _begin(self, seed: int | None) -> np.ndarray:
        if seed is not None:
            self._env.seed(seed)
        self._env.reset()
        # MinAtar keeps the last action across episodes, so the first sticky
        # repeat of an episode would depend on the previous one; an episode
        # should depend only on the RNG, as reproducibility from the seed needs.
        self._env.last_action = 0
        return self._env.state().astype(np.float32)

    def _advance(self, action: int) -> tuple[np.ndarray, float, bool]:
        reward, terminal = self._env.act(self._actions[action - 1])
        return self._env.state().astype(np.float32), reward, terminal


def make(game: str, **options) -> MinAtarEnv:
    """The bridge's factory for the registry: `game` is what follows `minatar:`; options as in MinAtarOptions."""
    return MinAtarEnv(game, parse_options(MinAtarOptions, f"{PREFIX}:{game}", options)[0])
