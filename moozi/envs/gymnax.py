"""gymnax bridge: gymnax's JAX-native single-agent envs behind the `JaxEnv` contract (thesis 5.2.2).

Names are `gymnax:<env id>` for any discrete-action id in
`gymnax.registered_envs`, e.g. `gymnax:Breakout-MinAtar`, `gymnax:CartPole-v1`.

- Episode ends are exact. gymnax's public `env.step` auto-resets and hides the
  terminal observation; the bridge calls the non-resetting `step_env` /
  `reset_env` instead, so the step that ends an episode is reported with
  is_last=True, its reward and its own (pre-reset) observation, and the next
  call (with is_last=True) returns the first step of a new episode.
- Truncation at `max_steps_in_episode` (gymnax's `is_truncated`) also counts
  as is_last; `spec.max_episode_steps` is that limit.
- obs are float32 images: (H, W, C) as given, 2-D ones (H, W, 1), vectors
  (1, 1, C) and scalars (1, 1, 1).
- Sticky actions: gymnax's MinAtar envs have none, so the bridge adds them as
  in the MinAtar paper (Young & Tian 2019): with probability
  `sticky_action_prob` the previous executed action is repeated, and the
  previous action is NOOP (library action 0) after a reset.
- Illegal actions cannot raise inside jit. Every library action is always
  legal; an index outside it (the dummy on a non-last step, or >= A) ends the
  episode at once with reward -1 and leaves the observation unchanged, which
  mirrors pgx's rule for illegal moves so bugs show up as lost episodes.
"""

from __future__ import annotations

import difflib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, EnvSpec, StepOutput
from moozi.errors import MooziError, UnknownGameError, UnsupportedGameError

PREFIX = "gymnax:"
ILLEGAL_ACTION_REWARD = -1.0
MINATAR_STICKY_ACTION_PROB = 0.1  # MinAtar paper protocol


class GymnaxState(NamedTuple):
    """The bridge's state: gymnax's state plus what the bridge needs to report and repeat."""

    env_state: Any  # gymnax EnvState
    obs: jax.Array  # [H, W, C] float32: the current observation (kept for illegal-action steps)
    last_action: jax.Array  # [] int32: the library action executed last (for sticky actions)


def known_games() -> list[str]:
    """The `gymnax:` names of every registered env (continuous-action ones are refused by `make`)."""
    import gymnax

    return [PREFIX + game for game in gymnax.registered_envs]


def make(game: str, *, sticky_action_prob: float | None = None, max_steps_in_episode: int | None = None, **env_kwargs) -> "GymnaxEnv":
    """Builds the bridge for `gymnax:<env id>` (or a bare env id).

    Options:
      sticky_action_prob: chance of repeating the previous action; None means
        0.1 for `*-MinAtar` games and 0 for the others.
      max_steps_in_episode: overrides gymnax's episode limit (truncation).
      env_kwargs: passed to `gymnax.make` (e.g. `use_minimal_action_set`).
    """
    import gymnax

    env_id = game[len(PREFIX):] if game.startswith(PREFIX) else game
    registered = list(gymnax.registered_envs)
    if env_id not in registered:
        by_lower = {name.lower(): name for name in registered}
        close = [by_lower[c] for c in difflib.get_close_matches(env_id.lower(), list(by_lower), n=3)]
        hint = f"did you mean {', '.join(PREFIX + c for c in close)}?" if close else "see `moozi games`"
        raise UnknownGameError(f"unknown gymnax game {game!r}: {hint}")
    try:
        env, params = gymnax.make(env_id, **env_kwargs)
    except TypeError as error:
        raise MooziError(f"bad option(s) for gymnax:{env_id}: {error}") from error
    except Exception as error:  # e.g. MNISTBandit downloads its data set when built
        raise UnsupportedGameError(f"gymnax:{env_id} could not be built: {type(error).__name__}: {error}") from error
    if not hasattr(env.action_space(params), "n"):
        raise UnsupportedGameError(f"gymnax:{env_id} has a continuous action space; moozi plays discrete actions only")
    if max_steps_in_episode is not None:
        params = params.replace(max_steps_in_episode=int(max_steps_in_episode))
    if sticky_action_prob is None:
        sticky_action_prob = MINATAR_STICKY_ACTION_PROB if env_id.endswith("-MinAtar") else 0.0
    if not 0.0 <= sticky_action_prob <= 1.0:
        raise MooziError(f"sticky_action_prob must lie in [0, 1], got {sticky_action_prob}")
    return GymnaxEnv(env, params, PREFIX + env_id, float(sticky_action_prob))


def _as_image(obs) -> jax.Array:
    """Any gymnax observation as a float32 (H, W, C) image."""
    obs = jnp.asarray(obs, jnp.float32)
    if obs.ndim == 0:
        return obs.reshape(1, 1, 1)
    if obs.ndim == 1:
        return obs[None, None, :]  # [1, 1, C]
    if obs.ndim == 2:
        return obs[:, :, None]  # [H, W, 1]
    return obs


class GymnaxEnv:
    """A gymnax env as a `JaxEnv`. Build it with `make`."""

    def __init__(self, env: Any, params: Any, name: str, sticky_action_prob: float):
        self._env = env
        self._params = params
        self.sticky_action_prob = sticky_action_prob
        self._num_env_actions = int(env.action_space(params).n)
        obs, _ = env.reset_env(jax.random.PRNGKey(0), params)
        self.spec = EnvSpec(
            name=name,
            obs_shape=tuple(int(d) for d in _as_image(obs).shape),
            num_actions=self._num_env_actions + 1,
            num_players=1,
            # MinAtar frames are 0/1 planes; other gymnax obs are not known to be.
            binary_obs=name.endswith("-MinAtar"),
            max_episode_steps=int(params.max_steps_in_episode),
        )

    def _output(self, obs, reward, is_first, is_last) -> StepOutput:
        is_last = jnp.asarray(is_last, jnp.bool_)
        legal = jnp.concatenate([is_last[None], jnp.broadcast_to(~is_last, (self._num_env_actions,))])  # [A]
        return StepOutput(
            obs=obs,
            is_first=jnp.asarray(is_first, jnp.bool_),
            is_last=is_last,
            reward=jnp.asarray(reward, jnp.float32),
            legal_actions=legal,
            to_play=jnp.int32(SINGLE_AGENT),
        )

    def init(self, key) -> tuple[GymnaxState, StepOutput]:
        obs, env_state = self._env.reset_env(key, self._params)
        # gymnax resets may hold Python scalars; arrays keep dtypes equal under jit, vmap and select.
        env_state = jax.tree.map(jnp.asarray, env_state)
        obs = _as_image(obs)
        state = GymnaxState(env_state=env_state, obs=obs, last_action=jnp.int32(0))
        return state, self._output(obs, 0.0, True, False)

    def step(self, state: GymnaxState, action, is_last, key) -> tuple[GymnaxState, StepOutput]:
        reset_key, step_key, sticky_key = jax.random.split(key, 3)
        action = jnp.asarray(action, jnp.int32)
        legal = (action > DUMMY_ACTION) & (action < self.spec.num_actions)
        lib_action = jnp.clip(action - 1, 0, self._num_env_actions - 1)
        sticky = jax.random.uniform(sticky_key) < self.sticky_action_prob
        lib_action = jnp.where(sticky, state.last_action, lib_action)

        obs, env_state, reward, terminated, _ = self._env.step_env(step_key, state.env_state, lib_action, self._params)
        obs = _as_image(obs)
        env_state = jax.tree.map(jnp.asarray, env_state)
        truncated = self._env.is_truncated(env_state, self._params)
        stepped = (
            GymnaxState(env_state=env_state, obs=obs, last_action=lib_action),
            self._output(obs, reward, False, terminated | truncated),
        )
        penalised = (state, self._output(state.obs, ILLEGAL_ACTION_REWARD, False, True))
        step_branch = jax.tree.map(lambda a, b: jnp.where(legal, a, b), stepped, penalised)
        # Both branches are computed so the select vmaps (no Python control flow on is_last).
        reset_branch = self.init(reset_key)
        return jax.tree.map(lambda a, b: jnp.where(is_last, a, b), reset_branch, step_branch)

    def close(self) -> None:
        """Pure functions hold nothing to release; here so that every env the registry makes closes alike."""
