"""The Gymnasium and Atari bridges: `gym:<id>` and `atari:<game>`.

`gym:<id>` plays any Gymnasium env with a Discrete action space:
- Box vector observations (C,) become (1, 1, C) float32; images (H, W, C) keep
  their shape and (H, W) images get one channel; uint8 images with values up to
  255 are scaled to [0, 1], as networks expect. A Discrete observation becomes
  a one-hot (1, 1, n). Anything else (Dict, Tuple, ... observations, non-Discrete
  actions) raises UnsupportedGameError saying why.
- `is_last = terminated or truncated`: a time-limit truncation ends the episode
  for moozi exactly like a terminal state. Value targets then treat the cut as
  terminal, which is the usual simplification (bootstrapping through a time
  limit would need the truncation flag in the step sample contract).

`atari:<game>` (a ROM id such as `pong` or `space_invaders`, or an ALE id such as
`ALE/Pong-v5`) is ale-py through Gymnasium's own wrappers with the protocol of
Machado et al. (2018): sticky actions 0.25 (at every emulator frame), frame skip
4 with a max-pool over the last two frames, 84x84 grey, no life-loss signal,
the game's minimal action set unless `full_action_space=True`, and episodes cut
at 108,000 frames (27,000 steps). No-op starts are off (`noop_max=0`): Machado
et al. recommend sticky actions as the source of stochasticity instead. Frames
are not stacked here; history stacking (thesis 5.2.6) does that.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Callable

import gymnasium
import numpy as np
from gymnasium import spaces

from moozi.envs.base import EnvSpec, obs_scale
from moozi.envs.episodic import SingleAgentEnv, parse_options
from moozi.errors import MooziError, UnknownGameError, UnsupportedGameError

__all__ = [
    "AtariOptions",
    "GymEnv",
    "GymOptions",
    "known_atari_games",
    "known_gym_games",
    "make_atari",
    "make_gym",
]

_ATARI_FRAMES_PER_EPISODE = 108_000  # ale-py's v5 cut: 30 minutes of play at 60 frames/s
# Gymnasium namespaces of JAX-functional envs: they belong to the JAX-native path
# (and host env workers must not import JAX).
_JAX_NAMESPACES = ("phys2d", "tabular")


@dataclasses.dataclass(frozen=True)
class GymOptions:
    """moozi's options of `make_gym`; any other keyword goes to `gymnasium.make` (e.g. `continuous=False`)."""

    seed: int | None = None  # seed of the first reset; None: Gymnasium's default (OS entropy)
    max_episode_steps: int | None = None  # cut episodes after this many steps (None: the env's own TimeLimit)


@dataclasses.dataclass(frozen=True)
class AtariOptions:
    """Options of `make_atari`; the defaults are Machado et al.'s protocol."""

    seed: int | None = None  # seed of the first reset; None: OS entropy
    full_action_space: bool = False  # all 18 ALE actions instead of the game's minimal set
    sticky_action_prob: float = 0.25  # chance the emulator repeats the previous action, per frame
    frame_skip: int = 4  # emulator frames per step (the last two are max-pooled)
    screen_size: int = 84  # observations are screen_size x screen_size grey
    noop_max: int = 0  # up to this many random no-ops at reset (0: off, sticky actions randomize instead)
    terminal_on_life_loss: bool = False  # end episodes on a lost life (off: the full game is one episode)
    max_episode_steps: int | None = None  # cut episodes earlier than ale-py's 108,000 frames


def _obs_converter(space: gymnasium.Space, where: str) -> tuple[Callable, tuple[int, int, int], bool, int | None]:
    """(function from a library observation to moozi's float32 (H, W, C), that shape, binary_obs, obs_levels)."""
    if isinstance(space, spaces.Discrete):
        n, start = int(space.n), int(space.start)

        def one_hot(obs):
            out = np.zeros((1, 1, n), np.float32)
            out[0, 0, int(obs) - start] = 1.0
            return out

        return one_hot, (1, 1, n), True, None
    if not isinstance(space, spaces.Box):
        raise UnsupportedGameError(
            f"{where} is not supported: its observation space is {type(space).__name__};"
            " moozi needs a Box (vector or image) or Discrete observation space"
        )
    shape = tuple(int(d) for d in space.shape)
    if len(shape) == 1:
        target = (1, 1, shape[0])
    elif len(shape) == 2:
        target = (*shape, 1)
    elif len(shape) == 3:
        target = shape
    else:
        raise UnsupportedGameError(
            f"{where} is not supported: its observations have shape {shape}; moozi needs (C,), (H, W) or (H, W, C)"
        )
    binary = space.dtype == np.bool_ or (
        np.issubdtype(space.dtype, np.integer) and np.all(space.low == 0) and np.all(space.high == 1)
    )
    if space.dtype == np.uint8 and np.max(space.high) == 255:

        def scaled(obs):
            return np.multiply(obs, obs_scale(255), dtype=np.float32).reshape(target)

        return scaled, target, False, 255  # 8-bit frames: stored as their bytes

    def cast(obs):
        # np.array copies: some envs hand out a buffer they overwrite on the next step.
        return np.array(obs, dtype=np.float32).reshape(target)

    return cast, target, bool(binary), None


class GymEnv(SingleAgentEnv):
    """A Gymnasium env with a Discrete action space as a moozi `Env` (single agent)."""

    def __init__(
        self,
        env: gymnasium.Env,
        *,
        name: str,
        seed: int | None = None,
        max_episode_steps: int | None = None,
        action_names: tuple[str, ...] | None = None,
        library_max_episode_steps: int | None = None,
    ):
        if not isinstance(env.action_space, spaces.Discrete):
            env.close()
            raise UnsupportedGameError(
                f"{name} is not supported: its action space is {env.action_space};"
                " moozi searches over a finite action set and needs a Discrete action space"
            )
        if max_episode_steps is not None and max_episode_steps < 1:
            env.close()
            raise MooziError(f"max_episode_steps must be at least 1 or None, got {max_episode_steps}")
        try:
            self._convert, obs_shape, binary, levels = _obs_converter(env.observation_space, name)
        except UnsupportedGameError:
            env.close()
            raise
        self._env = env
        num_env_actions = int(env.action_space.n)
        # moozi action a >= 1 is the library's action a - 1 (+ the space's start).
        self._action_offset = int(env.action_space.start) - 1
        limits = [n for n in (max_episode_steps, library_max_episode_steps) if n is not None]
        self.spec = EnvSpec(
            name=name,
            obs_shape=obs_shape,
            num_actions=num_env_actions + 1,
            num_players=1,
            binary_obs=binary,
            obs_levels=levels,
            max_episode_steps=min(limits) if limits else None,
            action_names=tuple(action_names) if action_names is not None else None,
        )
        self._init_episodes(max_episode_steps)
        self._first_seed = seed

    @property
    def gym_env(self) -> gymnasium.Env:
        """The Gymnasium env with its wrappers (e.g. for rendering)."""
        return self._env

    def _begin(self, seed: int | None) -> np.ndarray:
        if seed is None:
            seed = self._first_seed  # the `seed` option applies to the first reset only
        self._first_seed = None
        obs, _ = self._env.reset(seed=seed)
        return self._convert(obs)

    def _advance(self, action: int) -> tuple[np.ndarray, float, bool]:
        obs, reward, terminated, truncated, _ = self._env.step(action + self._action_offset)
        return self._convert(obs), reward, terminated or truncated

    def close(self) -> None:
        super().close()
        self._env.close()


# ------------------------------------------------------------------ gym:<id>
def _is_atari_entry(env_spec) -> bool:
    return isinstance(env_spec.entry_point, str) and env_spec.entry_point.startswith("ale_py")


def known_gym_games() -> list[str]:
    """Registered Gymnasium ids, less Atari (see `atari:`) and the JAX-functional namespaces.

    Which of them moozi can play depends on their spaces, known only once an env
    is made: `make_gym` says why one cannot be played.
    """
    return sorted(
        env_id
        for env_id, env_spec in gymnasium.registry.items()
        if not _is_atari_entry(env_spec) and env_spec.namespace not in _JAX_NAMESPACES
    )


def _check_gym_id(game: str) -> None:
    if ":" in game:  # "module:Id": gymnasium.make imports the module, which registers Id
        module, _, env_id = game.partition(":")
        if not module.strip() or not env_id.strip() or ":" in env_id:
            # gymnasium.make would fail with a bare ValueError on these.
            raise UnknownGameError(f"bad Gymnasium id {game!r}: expected <id> or <module>:<id>")
        return
    if game in gymnasium.registry:
        return
    try:  # ale-py registers the ALE ids when imported
        import ale_py  # noqa: F401
    except ImportError:
        pass
    if game in gymnasium.registry:
        return
    playable = [i for i, env_spec in gymnasium.registry.items() if env_spec.namespace not in _JAX_NAMESPACES]
    close = difflib.get_close_matches(game, playable, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join('gym:' + c for c in close)}?" if close else ""
    raise UnknownGameError(f"unknown Gymnasium id {game!r}{hint} (`moozi games` lists them)")


def make_gym(game: str, **options) -> GymEnv:
    """The `gym:` factory: `game` is a Gymnasium id; options: GymOptions' fields, others go to gymnasium.make."""
    name = f"gym:{game}"
    moozi_options, env_kwargs = parse_options(GymOptions, name, options, strict=False)
    _check_gym_id(game)
    namespace = gymnasium.registry[game].namespace if game in gymnasium.registry else None
    if namespace in _JAX_NAMESPACES:
        raise UnsupportedGameError(f"{name} is not supported: it is a JAX-functional env; use gymnax: for JAX envs")
    try:
        env = gymnasium.make(game, **env_kwargs)
    except TypeError as err:
        allowed = ", ".join(f.name for f in dataclasses.fields(GymOptions))
        raise MooziError(
            f"bad option(s) {', '.join(sorted(env_kwargs)) or '(none)'} for {name}: {str(err).splitlines()[0]};"
            f" moozi's options: {allowed}"
        ) from None
    except (gymnasium.error.Error, ImportError) as err:  # ImportError: the module of "module:Id"
        raise MooziError(f"cannot make {name}: {str(err).splitlines()[0]}") from None
    return GymEnv(
        env,
        name=name,
        seed=moozi_options.seed,
        max_episode_steps=moozi_options.max_episode_steps,
        library_max_episode_steps=env.spec.max_episode_steps if env.spec is not None else None,
    )


# ------------------------------------------------------------ atari:<game>
def _atari_roms() -> dict[str, str]:
    """ROM id -> Gymnasium name of the games with an `ALE/<Name>-v5` env."""
    import ale_py
    from ale_py.registration import rom_id_to_name

    gymnasium.register_envs(ale_py)
    roms = {rom: rom_id_to_name(rom) for rom in ale_py.roms.get_all_rom_ids()}
    return {rom: name for rom, name in roms.items() if f"ALE/{name}-v5" in gymnasium.registry}


def known_atari_games() -> list[str]:
    """ROM ids of the Atari games (`atari:pong`, ...); `ALE/<Name>-v5` ids are accepted as well."""
    return sorted(_atari_roms())


def _atari_rom(game: str, roms: dict[str, str]) -> str:
    """The ROM id that `game` (`pong`, `Pong`, `SpaceInvaders`, `ALE/Pong-v5`) names."""
    key = game
    if key.startswith("ALE/"):
        key, _, version = key[len("ALE/") :].partition("-")
        if version != "v5":
            raise UnsupportedGameError(f"atari:{game} is not supported: moozi plays the ALE v5 envs (ALE/<Name>-v5)")
    if key in roms:
        return key
    by_name = {name.lower(): rom for rom, name in roms.items()}
    if key.lower().replace("_", "") in by_name:
        return by_name[key.lower().replace("_", "")]
    close = difflib.get_close_matches(key.lower(), list(roms), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join('atari:' + c for c in close)}?" if close else ""
    raise UnknownGameError(f"unknown Atari game {game!r}{hint} (`moozi games` lists them)")


def make_atari(game: str, **options) -> GymEnv:
    """The `atari:` factory: `game` is a ROM id or ALE id; options as in AtariOptions."""
    import ale_py
    import cv2
    from gymnasium.wrappers import AtariPreprocessing

    # AtariPreprocessing resizes with OpenCV, whose thread pool (one thread per core) costs
    # more than it saves on one 210x160 frame, and oversubscribes the cores when a VectorEnv
    # runs P processes of envs: one thread per process scales (Pong, B=64: P=2/P=1 1.25x with
    # the pool, see bench/envs.py).
    cv2.setNumThreads(1)

    opts, _ = parse_options(AtariOptions, f"atari:{game}", options)
    roms = _atari_roms()
    rom = _atari_rom(game, roms)
    if not 0.0 <= opts.sticky_action_prob <= 1.0:
        raise MooziError(f"sticky_action_prob must be in [0, 1], got {opts.sticky_action_prob}")
    if opts.frame_skip < 1 or opts.screen_size < 1 or opts.noop_max < 0:
        raise MooziError(f"frame_skip and screen_size must be >= 1 and noop_max >= 0, got {opts}")
    # ALE prints a banner per emulator; with dozens of envs over several processes it drowns the logs.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    env = gymnasium.make(
        f"ALE/{roms[rom]}-v5",
        frameskip=1,  # AtariPreprocessing skips frames itself, max-pooling the last two
        repeat_action_probability=opts.sticky_action_prob,
        full_action_space=opts.full_action_space,
        max_num_frames_per_episode=_ATARI_FRAMES_PER_EPISODE,
    )
    action_names = tuple(env.unwrapped.get_action_meanings())
    env = AtariPreprocessing(
        env,
        noop_max=opts.noop_max,
        frame_skip=opts.frame_skip,
        screen_size=opts.screen_size,
        terminal_on_life_loss=opts.terminal_on_life_loss,
        grayscale_obs=True,
        grayscale_newaxis=True,
        # The bridge scales the bytes itself (k * float32(1/255)), so the spec can say obs_levels=255
        # and trajectories, replay and checkpoints keep one byte per pixel.
        scale_obs=False,
    )
    return GymEnv(
        env,
        name=f"atari:{rom}",
        seed=opts.seed,
        max_episode_steps=opts.max_episode_steps,
        action_names=action_names,
        library_max_episode_steps=math.ceil(_ATARI_FRAMES_PER_EPISODE / opts.frame_skip),
    )
