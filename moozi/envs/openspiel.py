"""The OpenSpiel bridge: `openspiel:<name or name(params)>` (thesis 5.2.2).

Protocol settings (docs/envs.md):
- Perspective: `obs` is `state.observation_tensor(to_play)`, i.e. from the player
  to move; board tensors (C, H, W) become (H, W, C), 2-D tensors a one-channel
  grid (H, W, 1), 1-D tensors (1, 1, C).
- Reward: the change in the acting player's return over its ply, chance moves
  that follow it included (the reward of the player who just acted).
- to_play: `state.current_player()`. At a terminal state nobody moves; there it
  is the other player of a two-player game (the one who would move next if play
  went on), so the loser of a game won by its last move sees `-reward`.
- Chance nodes are resolved inside the bridge with the env's own seeded numpy
  RNG, so the agent never sees them and an episode is reproducible from the seed.
- Turns need not alternate (e.g. `pig`, `dots_and_boxes`): `to_play` is always
  right, but a search using a constant discount of -1 per ply is not.
"""

from __future__ import annotations

import json

import numpy as np
import pyspiel
from open_spiel.python.observation import make_observation

from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, EnvSpec, StepOutput
from moozi.errors import IllegalActionError, MooziError, UnknownGameError, UnsupportedGameError

__all__ = ["OpenSpielEnv", "make", "known_games"]

PREFIX = "openspiel"

# Games whose observation tensors are one-hot planes (replay may store them as uint8);
# checked over random play in tests/test_openspiel_env.py.
_BINARY_OBS_GAMES = frozenset({"tic_tac_toe", "connect_four", "go", "hex", "othello", "breakthrough", "clobber"})

_Type = pyspiel.GameType

# Shared immutable numpy scalars: building them costs more per step than the rest of the bookkeeping.
_TRUE, _FALSE, _ZERO = np.bool_(True), np.bool_(False), np.float32(0.0)
_PLAYERS = {SINGLE_AGENT: np.int32(SINGLE_AGENT), 0: np.int32(0), 1: np.int32(1)}
# Up to this many library actions, the dense legal-action mask beats indexing with the legal list.
_DENSE_MASK_MAX_ACTIONS = 256


def _unsupported_reason(game: pyspiel.Game) -> str | None:
    """Why moozi cannot play `game`, or None when it can."""
    game_type = game.get_type()
    if game_type.dynamics != _Type.Dynamics.SEQUENTIAL:
        return "it is a simultaneous-move game; moozi plays games where one player moves at a time"
    if game.num_players() > 2:
        return f"it has {game.num_players()} players; moozi plays one- and two-player games"
    if game.num_players() == 2 and game_type.utility != _Type.Utility.ZERO_SUM:
        # Search backs values up with a sign flip per ply, which is only right when
        # one player's gain is the other's loss.
        return f"it is a two-player {game_type.utility.name.lower().replace('_', '-')} game; moozi needs zero-sum"
    if not game_type.provides_observation_tensor:
        return "it provides no observation tensor"
    if game_type.chance_mode == _Type.ChanceMode.SAMPLED_STOCHASTIC:
        return "its chance outcomes are sampled inside OpenSpiel, so moozi cannot seed them"
    return None


def _is_supported_type(game_type) -> bool:
    """A cheap, load-free version of `_unsupported_reason` for listing games."""
    return (
        game_type.dynamics == _Type.Dynamics.SEQUENTIAL
        and game_type.provides_observation_tensor
        and game_type.chance_mode != _Type.ChanceMode.SAMPLED_STOCHASTIC
        and game_type.min_num_players <= 2
        and (game_type.utility == _Type.Utility.ZERO_SUM or game_type.max_num_players == 1)
    )


def known_games() -> list[str]:
    """Registered OpenSpiel games that moozi can play with their default parameters (or some)."""
    return sorted(t.short_name for t in pyspiel.registered_games() if _is_supported_type(t))


def _obs_layout(tensor_shape: list[int]) -> tuple[tuple[int, ...], tuple[int, int, int], bool]:
    """(shape to reshape to, resulting (H, W, C), whether to move axis 0 last)."""
    if len(tensor_shape) == 3:  # OpenSpiel's board tensors are (C, H, W)
        c, h, w = tensor_shape
        return (c, h, w), (h, w, c), True
    if len(tensor_shape) == 2:  # a grid such as catch's (rows, cols): one channel
        h, w = tensor_shape
        return (h, w, 1), (h, w, 1), False
    size = int(np.prod(tensor_shape))
    return (1, 1, size), (1, 1, size), False


def _default_observer(game: pyspiel.Game):
    """OpenSpiel's default observer, whose tensor is `observation_tensor`, or None if it has no tensor."""
    observer = make_observation(game)
    size = int(np.prod(game.observation_tensor_shape()))
    if observer is None or observer.tensor is None or observer.tensor.size != size:
        return None
    return observer


def load_game(game: str) -> pyspiel.Game:
    """`pyspiel.load_game` with moozi's errors: unknown names and bad parameters are user errors."""
    base = game.split("(", 1)[0].strip()
    if base not in pyspiel.registered_names():
        import difflib

        close = difflib.get_close_matches(base, known_games(), n=3)
        hint = f" (did you mean {' or '.join(PREFIX + ':' + c for c in close)}?)" if close else ""
        raise UnknownGameError(f"unknown OpenSpiel game {base!r}{hint}; `moozi games` lists the playable ones")
    try:
        return pyspiel.load_game(game)
    except pyspiel.SpielError as err:
        raise MooziError(f"cannot load {PREFIX}:{game}: {str(err).splitlines()[0]}") from None


class OpenSpielEnv:
    """A sequential OpenSpiel game as a moozi `Env` (one or two players, chance resolved here)."""

    def __init__(self, game: str | pyspiel.Game, *, seed: int | None = None):
        self.game = load_game(game) if isinstance(game, str) else game
        canonical = str(self.game).removesuffix("()")
        reason = _unsupported_reason(self.game)
        if reason is not None:
            raise UnsupportedGameError(f"{PREFIX}:{canonical} is not supported: {reason}")
        self._num_players = self.game.num_players()
        self._env_actions = self.game.num_distinct_actions()
        self._reshape, obs_shape, self._channels_first = _obs_layout(self.game.observation_tensor_shape())
        # With terminal-only rewards the return changes only at the end, so the
        # bridge reads it once per episode instead of once per step.
        self._terminal_rewards_only = self.game.get_type().reward_model == _Type.RewardModel.TERMINAL
        self.spec = EnvSpec(
            name=f"{PREFIX}:{canonical}",
            obs_shape=obs_shape,
            num_actions=self._env_actions + 1,
            num_players=self._num_players,
            binary_obs=self.game.get_type().short_name in _BINARY_OBS_GAMES,
            max_episode_steps=self.game.max_game_length(),
            # Names depend on the state in many games; use action_to_string instead.
            action_names=None,
        )
        self._observer = _default_observer(self.game)
        if self._observer is not None:
            view = self._observer.tensor.reshape(self._reshape)
            self._obs_view = view.transpose(1, 2, 0) if self._channels_first else view
        self._dense_mask = self._env_actions <= _DENSE_MASK_MAX_ACTIONS
        self._last_mask = np.zeros(self.spec.num_actions, bool)
        self._last_mask[DUMMY_ACTION] = True
        self._deterministic = self.game.get_type().chance_mode == _Type.ChanceMode.DETERMINISTIC
        self._rng = np.random.default_rng(seed)
        self.state: pyspiel.State = self.game.new_initial_state()
        self._returns = None  # the acting player's return before the current ply (reward-per-step games)
        self._last: StepOutput | None = None

    # ----------------------------------------------------------------- stepping
    def reset(self, seed: int | None = None) -> StepOutput:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.state = self.game.new_initial_state()
        self._resolve_chance()
        if not self._terminal_rewards_only:
            self._returns = self.state.returns()
        self._last = self._output(is_first=True, reward=0.0, actor=None)
        return self._last

    def step(self, action: int, is_last: bool) -> StepOutput:
        if is_last or self._last is None:
            return self.reset()
        action = int(action)
        mask = self._last.legal_actions
        if not 0 < action < self.spec.num_actions or not mask[action]:
            raise self._illegal(action, mask)
        actor = self.state.current_player()
        self.state.apply_action(action - 1)
        if not self._deterministic:
            self._resolve_chance()
        if self._terminal_rewards_only:
            reward = self.state.returns()[actor] if self.state.is_terminal() else 0.0
        else:
            returns = self.state.returns()
            reward = returns[actor] - self._returns[actor]
            self._returns = returns
        self._last = self._output(is_first=False, reward=reward, actor=actor)
        return self._last

    def close(self) -> None:
        self._last = None

    # ------------------------------------------------- snapshots and other states
    def step_output_at(self, state: pyspiel.State) -> StepOutput:
        """The step output of any state of this game (reward 0, not first): for bots and tools."""
        saved = self.state
        self.state = state
        try:
            return self._output(is_first=False, reward=0.0, actor=None)
        finally:
            self.state = saved

    def get_state(self) -> dict[str, np.ndarray]:
        """A pickle-free snapshot (game state, RNG, last output) from which `set_state` continues exactly."""
        snapshot = {
            "game_state": np.frombuffer(self.state.serialize().encode(), np.uint8),
            "rng": np.frombuffer(json.dumps(self._rng.bit_generator.state).encode(), np.uint8),
            "returns": np.asarray(self._returns if self._returns is not None else [], np.float64),
        }
        if self._last is not None:
            snapshot.update({f"last_{k}": np.asarray(v) for k, v in self._last._asdict().items()})
        return snapshot

    def set_state(self, snapshot: dict[str, np.ndarray]) -> None:
        self.state = self.game.deserialize_state(bytes(snapshot["game_state"]).decode())
        self._rng.bit_generator.state = json.loads(bytes(snapshot["rng"]).decode())
        returns = np.asarray(snapshot["returns"])
        self._returns = list(returns) if returns.size else None
        if "last_obs" in snapshot:
            self._last = StepOutput(**{k: np.asarray(snapshot[f"last_{k}"]) for k in StepOutput._fields})
        else:
            self._last = None

    # ------------------------------------------------------------- for humans
    def render(self) -> str:
        return str(self.state)

    def action_to_string(self, action: int) -> str:
        """The library's name of augmented action `action` at the current state."""
        if action == DUMMY_ACTION:
            return "<dummy>"
        player = self.state.current_player()
        return self.state.action_to_string(player if player >= 0 else 0, int(action) - 1)

    # -------------------------------------------------------------- internals
    def _resolve_chance(self) -> None:
        state, rng = self.state, self._rng
        while state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes())
            cumulative = np.cumsum(probs)
            index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
            state.apply_action(outcomes[min(index, len(outcomes) - 1)])

    def _output(self, *, is_first: bool, reward: float, actor: int | None) -> StepOutput:
        state = self.state
        is_last = state.is_terminal()
        if is_last:
            mask = self._last_mask.copy()
            # Nobody moves at a terminal state: report the player who would move next.
            to_play = SINGLE_AGENT if self._num_players == 1 else (1 - actor if actor is not None else 0)
        else:
            mask = self._legal_mask(state)
            to_play = SINGLE_AGENT if self._num_players == 1 else state.current_player()
        return StepOutput(
            obs=self._observe(state, max(to_play, 0)),
            is_first=_TRUE if is_first else _FALSE,
            is_last=_TRUE if is_last else _FALSE,
            reward=_ZERO if reward == 0.0 else np.float32(reward),
            legal_actions=mask,
            to_play=_PLAYERS[to_play],
        )

    def _legal_mask(self, state: pyspiel.State) -> np.ndarray:
        if self._dense_mask:
            # One C++ call and no index arithmetic: cheapest when the action space is
            # small. A bytearray keeps the mask writable without another copy.
            return np.frombuffer(bytearray([0, *state.legal_actions_mask()]), bool)
        mask = np.zeros(self.spec.num_actions, bool)
        mask[np.asarray(state.legal_actions(), np.intp) + 1] = True
        return mask

    def _observe(self, state: pyspiel.State, player: int) -> np.ndarray:
        if self._observer is not None:
            # The observer writes into its own buffer, far cheaper than building a
            # Python list; `_obs_view` is that buffer seen as (H, W, C), copied
            # (into a contiguous array) before the next write.
            self._observer.set_from(state, player)
            return self._obs_view.copy()
        obs = np.asarray(state.observation_tensor(player), np.float32).reshape(self._reshape)
        return obs.transpose(1, 2, 0).copy() if self._channels_first else obs

    def _illegal(self, action: int, mask: np.ndarray) -> IllegalActionError:
        legal = np.flatnonzero(mask).tolist()
        if mask[DUMMY_ACTION]:
            why = "the episode has ended; pass is_last=True to start the next one"
            return IllegalActionError(f"action {action} is illegal in {self.spec.name}: {why}; legal: {legal}")
        return IllegalActionError(f"action {action} is illegal in {self.spec.name}; legal: {legal}")


def make(game: str, *, seed: int | None = None) -> OpenSpielEnv:
    """The bridge's factory for the registry: `game` is what follows `openspiel:`."""
    return OpenSpielEnv(game, seed=seed)
