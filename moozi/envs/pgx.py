"""pgx bridge: pgx's JAX-native games behind the `JaxEnv` step contract (thesis 5.2.2).

Names are `pgx:<env id>` for any id in `pgx.available_envs()`, e.g.
`pgx:tic_tac_toe`, `pgx:connect_four`, `pgx:go_9x9`, `pgx:minatar-breakout`.

- The bridge state is the pgx `State` itself; `init`/`step` are pure and
  unbatched (vmap at the call site) and jit-compile, so self-play can run as
  one XLA program.
- obs is `state.observation`, pgx's view of the player to move, as float32;
  1-D observations become (1, 1, C) and 2-D ones (H, W, 1).
- reward is the reward of the player who just acted: pgx's `rewards` holds one
  entry per player, indexed here with the player to move before the step.
- to_play is `state.current_player` for two-player games and SINGLE_AGENT for
  one-player games (2048, MinAtar).
- Illegal actions cannot raise inside jit. Every illegal action (a masked
  library action, the dummy on a non-last step, an index outside [0, A)) goes
  through pgx's own rule for illegal moves: the episode ends at once and the
  mover gets pgx's penalty (-1; in two-player games the opponent gets +1). We
  get there by hiding the library mask for out-of-range and dummy actions
  before calling `pgx.Env.step`, so pgx, not moozi, decides the penalty.
- `chance_rules` splits a step into its afterstate and its chance outcome with the true
  probabilities, for the games with chance whose split is written (2048 and backgammon:
  moozi/envs/afterstates.py); None for the others.
- pgx's backgammon gives a player several moves in a row (one per die): its
  spec says `turns_alternate=False`, and the targets take each step's sign
  from `to_play`. kuhn_poker/leduc_holdem hide information, which the search
  does not model.
"""

from __future__ import annotations

import difflib
from typing import Any

import jax
import jax.numpy as jnp

from moozi.envs.afterstates import for_pgx
from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, EnvSpec, StepOutput, TerritorySpec
from moozi.errors import MooziError, UnknownGameError, UnsupportedGameError

PREFIX = "pgx:"
_MINATAR_OPTIONS = ("sticky_action_prob",)  # passed to pgx's MinAtar env classes
# Go (go_9x9, go_19x19): komi and the ply at which pgx ends a game (its default is 2 * N * N) follow
# the real game the agent plays (an OpenSpiel go through its pgx twin, moozi/play/openspiel_bot.py);
# `go_features` adds liberty, atari and ko planes to the observation (moozi/envs/go_features.py).
_GO_OPTIONS = ("komi", "max_terminal_steps", "go_features")
# `backgammon_features` adds TD-Gammon's encoding of the board (moozi/envs/backgammon_features.py).
_BACKGAMMON_OPTIONS = ("backgammon_features",)
_TURNS_REPEAT = {"backgammon"}  # a turn is one step per die, all of the same player


def known_games() -> list[str]:
    """Every playable `pgx:` name (games with more than two players are left out)."""
    import pgx

    return [PREFIX + game for game in pgx.available_envs() if game != "sparrow_mahjong"]


def make(game: str, **options) -> "PgxEnv":
    """Builds the bridge for `pgx:<env id>` (or a bare env id).

    Options: `sticky_action_prob` (float, default 0.1 as in pgx and the MinAtar
    paper) for `minatar-*` games only.
    """
    import pgx

    env_id = game[len(PREFIX):] if game.startswith(PREFIX) else game
    available = list(pgx.available_envs())
    if env_id not in available:
        by_lower = {name.lower(): name for name in available}
        close = [by_lower[c] for c in difflib.get_close_matches(env_id.lower(), list(by_lower), n=3)]
        hint = f"did you mean {', '.join(PREFIX + c for c in close)}?" if close else "see `moozi games`"
        raise UnknownGameError(f"unknown pgx game {game!r}: {hint}")
    is_go = env_id.startswith("go_")
    allowed = (_MINATAR_OPTIONS if env_id.startswith("minatar-") else _GO_OPTIONS if is_go
               else _BACKGAMMON_OPTIONS if env_id == "backgammon" else ())
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise MooziError(f"pgx:{env_id} does not take option(s) {', '.join(unknown)}; allowed: {', '.join(allowed) or 'none'}")
    go_features = bool(options.pop("go_features", False))
    backgammon_features = bool(options.pop("backgammon_features", False))
    env = pgx.make(env_id)
    if is_go:
        # pgx's Go takes its size from the id; komi and length are rebuilt only when given.
        size = int(env_id.split("x")[-1])
        komi = float(options.get("komi", env._game.komi))
        length = options.get("max_terminal_steps")
        if length is not None and (isinstance(length, bool) or int(length) != length or length < 1):
            raise MooziError(f"pgx:{env_id} max_terminal_steps must be a positive integer, got {length!r}")
        env = type(env)(size=size, komi=komi, max_terminal_steps=None if length is None else int(length))
    elif options:
        env = type(env)(**options)
    if env.num_players > 2:
        raise UnsupportedGameError(f"pgx:{env_id} has {env.num_players} players; moozi plays one- and two-player games only")
    return PgxEnv(env, PREFIX + env_id, go_features=go_features, backgammon_features=backgammon_features)


def _as_image(obs) -> jax.Array:
    """Any pgx observation as a float32 (H, W, C) image."""
    obs = jnp.asarray(obs, jnp.float32)
    if obs.ndim == 1:
        return obs[None, None, :]  # [1, 1, C]
    if obs.ndim == 2:
        return obs[:, :, None]  # [H, W, 1]
    return obs


class PgxEnv:
    """A pgx game as a `JaxEnv`. Build it with `make`."""

    def __init__(self, env: Any, name: str, go_features: bool = False, backgammon_features: bool = False):
        self._env = env
        self._go_size = int(env._game.size) if name.removeprefix(PREFIX).startswith("go_") else None
        self._go_features = go_features
        self._backgammon_features = backgammon_features
        probe = env.init(jax.random.PRNGKey(0))
        self._num_env_actions = int(probe.legal_action_mask.shape[0])
        territory = None
        if self._go_size is not None:
            # pgx's go planes: 0 the mover's stones now, 1 the opponent's, 16 the colour to move (1: white).
            territory = TerritorySpec(first_plane=0, second_plane=1, relative=True, white_to_move_plane=16,
                                      komi=float(env._game.komi))
        self.spec = EnvSpec(
            name=name,
            obs_shape=tuple(int(d) for d in self._observation(probe).shape),
            num_actions=self._num_env_actions + 1,
            num_players=int(env.num_players),
            binary_obs=probe.observation.dtype == jnp.bool_,
            turns_alternate=name.removeprefix(PREFIX) not in _TURNS_REPEAT,
            territory=territory,
        )
        # The step split into afterstate and chance outcome, where one is written (2048, backgammon), else None:
        # AlphaZero mode's search with chance nodes (moozi/envs/afterstates.py).
        self.chance_rules = for_pgx(self)

    def _observation(self, state):
        obs = _as_image(state.observation)
        if self._go_features:
            from moozi.envs.go_features import go_feature_planes

            obs = jnp.concatenate([obs, go_feature_planes(state._x, self._go_size)], axis=-1)
        if self._backgammon_features:
            from moozi.envs.backgammon_features import backgammon_features

            obs = jnp.concatenate([obs, backgammon_features(state._board)[None, None, :]], axis=-1)
        return obs

    def _output(self, state, reward, is_first) -> StepOutput:
        is_last = state.terminated | state.truncated
        # On last steps only the dummy is legal; pgx's all-True terminal mask is dropped.
        legal = jnp.concatenate([is_last[None], state.legal_action_mask & ~is_last])  # [A]
        to_play = state.current_player if self.spec.num_players == 2 else jnp.int32(SINGLE_AGENT)
        return StepOutput(
            obs=self._observation(state),
            is_first=jnp.asarray(is_first, jnp.bool_),
            is_last=jnp.asarray(is_last, jnp.bool_),
            reward=jnp.asarray(reward, jnp.float32),
            legal_actions=legal,
            to_play=jnp.asarray(to_play, jnp.int32),
        )

    def init(self, key) -> tuple[Any, StepOutput]:
        state = self._env.init(key)
        return state, self._output(state, 0.0, True)

    def step(self, state, action, is_last, key) -> tuple[Any, StepOutput]:
        reset_key, step_key = jax.random.split(key)
        action = jnp.asarray(action, jnp.int32)
        mover = state.current_player
        in_range = (action > DUMMY_ACTION) & (action < self.spec.num_actions)
        # An empty mask makes pgx treat the (clipped) action as illegal and apply its penalty.
        checked = state.replace(legal_action_mask=state.legal_action_mask & in_range)
        lib_action = jnp.clip(action - 1, 0, self._num_env_actions - 1)
        stepped = self._env.step(checked, lib_action, step_key)
        step_branch = (stepped, self._output(stepped, stepped.rewards[mover], False))
        # Both branches are computed so the select vmaps (no Python control flow on is_last).
        reset_branch = self.init(reset_key)
        return jax.tree.map(lambda a, b: jnp.where(is_last, a, b), reset_branch, step_branch)

    def close(self) -> None:
        """Pure functions hold nothing to release; here so that every env the registry makes closes alike."""
