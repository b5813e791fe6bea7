"""The OpenSpiel bridge: `openspiel:<name or name(params)>` (thesis 5.2.2).

Protocol settings (docs/envs.md):
- Perspective: `obs` is `state.observation_tensor(to_play)`, i.e. from the player
  to move; board tensors (C, H, W) become (H, W, C), 2-D tensors a one-channel
  grid (H, W, 1), 1-D tensors (1, 1, C).
- Two-player games: many OpenSpiel tensors are absolute (connect_four's planes
  are x, o, empty whoever moves: `observation_tensor(0) == observation_tensor(1)`),
  while values are from the player to move. So the bridge makes the mover
  explicit: every two-player game gets one more channel holding `to_play` (0 or
  1) everywhere, and games whose planes are "player 0's pieces, player 1's
  pieces" (`_PIECE_PLANES`) are reordered so the mover's pieces come first, as
  AlphaZero's inputs are. A network trained 900 steps to tell whether the
  mover can win this move scored 0.83 on the absolute planes, 0.925 with a
  to-play plane and 0.98 on player-relative planes
  (docs/experiments/2026-11-23-connect-four-learned-model-fixes.md).
- Reward: the change in the acting player's return over its ply, chance moves
  that follow it included (the reward of the player who just acted).
- to_play: `state.current_player()`. At a terminal state nobody moves; there it
  is the other player of a two-player game (the one who would move next if play
  went on), so the loser of a game won by its last move sees `-reward`.
- Chance nodes are resolved inside the bridge with the env's own seeded numpy
  RNG, so the agent never sees them and an episode is reproducible from the seed.
- Turns need not alternate (e.g. `pig`, `dots_and_boxes`): `to_play` is always
  right, but a search using a constant discount of -1 per ply is not.

Fast path for `moozi.envs.vector.VectorEnv`: `step_into` / `reset_into` do what
`step` / `reset` do but write the observation and the legal-action mask straight
into row `index` of the batch arrays and return the four scalars as plain
Python values, so no per-step StepOutput, numpy scalars or copies are built.
The outputs are bit-identical to those of `step` / `reset`; errors are the same.
"""

from __future__ import annotations

import json

import numpy as np
import pyspiel
from open_spiel.python.observation import make_observation

from moozi.envs.base import TerritorySpec, DUMMY_ACTION, SINGLE_AGENT, EnvSpec, StepOutput
from moozi.errors import IllegalActionError, MooziError, UnknownGameError, UnsupportedGameError

__all__ = ["OpenSpielEnv", "make", "known_games"]

PREFIX = "openspiel"

# Games whose observation tensors are one-hot planes (replay may store them as uint8);
# checked over random play in tests/envs/test_openspiel.py.
_BINARY_OBS_GAMES = frozenset({"tic_tac_toe", "connect_four", "go", "hex", "othello", "breakthrough", "clobber"})

_Type = pyspiel.GameType

# Two-player games whose tensor has player 0's pieces in channel p0 and player 1's in p1 (checked
# in tests/envs/test_openspiel.py): the bridge puts the mover's pieces first, the opponent's second.
_PIECE_PLANES = {"tic_tac_toe": (2, 1), "connect_four": (0, 1)}


def _mover_first_orders(num_channels: int, p0: int, p1: int) -> dict[int, np.ndarray]:
    """Channel order for each mover: its own pieces, the opponent's, then the rest in place."""
    rest = [c for c in range(num_channels) if c not in (p0, p1)]
    return {0: np.array([p0, p1, *rest]), 1: np.array([p1, p0, *rest])}


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
        self._reshape, library_shape, self._channels_first = _obs_layout(self.game.observation_tensor_shape())
        short_name = self.game.get_type().short_name
        # Two-player games: the mover made explicit (module docstring).
        self._to_play_plane = self._num_players == 2
        self._channel_order = None
        if self._to_play_plane and short_name in _PIECE_PLANES:
            self._channel_order = _mover_first_orders(library_shape[-1], *_PIECE_PLANES[short_name])
        obs_shape = (*library_shape[:2], library_shape[2] + int(self._to_play_plane))
        self._library_channels = library_shape[2]
        # With terminal-only rewards the return changes only at the end, so the
        # bridge reads it once per episode instead of once per step.
        self._terminal_rewards_only = self.game.get_type().reward_model == _Type.RewardModel.TERMINAL
        self.spec = EnvSpec(
            name=f"{PREFIX}:{canonical}",
            obs_shape=obs_shape,
            num_actions=self._env_actions + 1,
            num_players=self._num_players,
            binary_obs=short_name in _BINARY_OBS_GAMES,
            max_episode_steps=self.game.max_game_length(),
            # Names depend on the state in many games; use action_to_string instead.
            action_names=None,
            # OpenSpiel's go planes: black's stones, white's, the empty points, 1 where white is to move.
            territory=(TerritorySpec(first_plane=0, second_plane=1, relative=False, white_to_move_plane=3,
                                     komi=float(self.game.get_parameters()["komi"])) if short_name == "go" else None),
        )
        self._observer = _default_observer(self.game)
        self._set_from = None  # the fast path's observer call (None: observation_tensor)
        if self._observer is not None:
            view = self._observer.tensor.reshape(self._reshape)
            self._obs_view = view.transpose(1, 2, 0) if self._channels_first else view
            # The C++ method itself where the Python wrapper exposes it: one call less per step.
            inner = getattr(self._observer, "_observation", None)
            self._set_from = getattr(inner, "set_from", None) or self._observer.set_from
        self._dense_mask = self._env_actions <= _DENSE_MASK_MAX_ACTIONS
        self._last_mask = np.zeros(self.spec.num_actions, bool)
        self._last_mask[DUMMY_ACTION] = True
        self._last_mask_bytes = self._last_mask.tobytes()
        self._num_actions = self.spec.num_actions
        self._one_player = self._num_players == 1
        self._deterministic = self.game.get_type().chance_mode == _Type.ChanceMode.DETERMINISTIC
        self._rng = np.random.default_rng(seed)
        self.state: pyspiel.State = self.game.new_initial_state()
        self._returns = None  # the acting player's return before the current ply (reward-per-step games)
        # The last output lives in one of two places: after `step`/`reset` in
        # `_last`; after `step_into`/`reset_into` in the bound batch rows, and
        # `_last` is None. `_last_output()` reads it from either.
        self._last: StepOutput | None = None
        # The last output's legal-action mask, None before the first reset: a bool
        # array, or (fast path) the same mask as bytes, which index faster.
        self._legal: np.ndarray | bytes | None = None
        self._mover: int | None = None  # current_player() at the last output's state
        self._sink = None  # the batch buffers `step_into` last wrote, with their row views
        self._sink_index = -1

    # ----------------------------------------------------------------- stepping
    def reset(self, seed: int | None = None) -> StepOutput:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.state = self.game.new_initial_state()
        self._resolve_chance()
        if not self._terminal_rewards_only:
            self._returns = self.state.returns()
        self._set_last(self._output(is_first=True, reward=0.0, actor=None))
        return self._last

    def step(self, action: int, is_last: bool) -> StepOutput:
        if is_last or self._legal is None:
            return self.reset()
        action = int(action)
        mask = self._legal
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
        self._set_last(self._output(is_first=False, reward=reward, actor=actor))
        return self._last

    def close(self) -> None:
        self._set_last(None)
        self._sink = None

    # ------------------------------------------------- fast path for VectorEnv
    def reset_into(self, seed: int | None, buffers, index: int) -> None:
        """`reset(seed)`, its output written into row `index` of `buffers` (see `step_into`)."""
        if buffers is not self._sink or index != self._sink_index:
            self._bind(buffers, index)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.state = self.game.new_initial_state()
        self._resolve_chance()
        if not self._terminal_rewards_only:
            self._returns = self.state.returns()
        self._write_row(True, 0.0, None)

    def step_into(self, action: int, is_last: bool, buffers, index: int) -> None:
        """`step(action, is_last)`, its output written into row `index` of the batch arrays.

        `buffers` has the StepOutput fields as C-contiguous writable arrays with
        a leading batch axis (`obs` float32, `is_first`, `is_last` and
        `legal_actions` bool, `reward` float32, `to_play` int32), as
        `moozi.envs.vector.VectorEnv` keeps them; `action` is a Python int.
        Row `index` then holds exactly what `step` would have returned. An
        illegal action raises `IllegalActionError` (the same message as `step`)
        and leaves the row and the env as they were.
        """
        if buffers is not self._sink or index != self._sink_index:
            self._bind(buffers, index)
        legal = self._legal
        if is_last or legal is None:
            return self.reset_into(None, buffers, index)
        if not 0 < action < self._num_actions or not legal[action]:
            raise self._illegal(action, legal)
        state = self.state
        actor = self._mover  # state.current_player(), read when the last output was made
        state.apply_action(action - 1)
        if not self._deterministic:
            self._resolve_chance()
        is_last = state.is_terminal()
        if self._terminal_rewards_only:
            reward = state.returns()[actor] if is_last else 0.0
        else:
            returns = state.returns()
            reward = returns[actor] - self._returns[actor]
            self._returns = returns
        # `_write_row`, inlined (a call is a noticeable share of a tic-tac-toe step): keep the two in step.
        if is_last:
            legal = self._last_mask_bytes
            to_play = SINGLE_AGENT if self._one_player else 1 - actor
        else:
            legal = b"\x00" + bytes(state.legal_actions_mask()) if self._dense_mask else self._legal_bytes(state)
            self._mover = mover = state.current_player()
            to_play = SINGLE_AGENT if self._one_player else mover
        self._observe_into(self._obs_row, state, to_play if to_play > 0 else 0)
        rows = self._rows
        rows[0][:] = legal
        rows[1][0] = False
        rows[2][0] = is_last
        rows[3][0] = reward if reward != 0.0 else 0.0  # as `_output`: no -0.0
        rows[4][0] = to_play
        self._legal = legal
        self._last = None  # the last output is in the rows now

    def _write_row(self, is_first: bool, reward: float, actor: int | None) -> None:
        """`_output`, written into the bound rows (`step_into` has a copy of this inlined)."""
        state = self.state
        is_last = state.is_terminal()
        if is_last:
            legal = self._last_mask_bytes
            # Nobody moves at a terminal state: report the player who would move next.
            to_play = SINGLE_AGENT if self._one_player else (1 - actor if actor is not None else 0)
        else:
            legal = b"\x00" + bytes(state.legal_actions_mask()) if self._dense_mask else self._legal_bytes(state)
            self._mover = mover = state.current_player()
            to_play = SINGLE_AGENT if self._one_player else mover
        self._observe_into(self._obs_row, state, to_play if to_play > 0 else 0)
        rows = self._rows
        rows[0][:] = legal
        rows[1][0] = is_first
        rows[2][0] = is_last
        rows[3][0] = reward if reward != 0.0 else 0.0
        rows[4][0] = to_play
        self._legal = legal
        self._last = None

    def _legal_bytes(self, state: pyspiel.State) -> bytes:
        return self._legal_mask(state).tobytes()

    def _bind(self, buffers, index: int) -> None:
        """Views of row `index` of the batch arrays, which `step_into` fills."""
        if self._last is None and self._legal is not None:
            self._last = self._last_output()  # moving to other rows: keep the last output
        obs_row = buffers.obs[index]
        if obs_row.shape != self.spec.obs_shape or obs_row.dtype != np.float32:
            raise ValueError(f"an obs row of {obs_row.dtype} {obs_row.shape} does not fit {self.spec.name}")
        fields = [("legal_actions", np.bool_), ("is_first", np.bool_), ("is_last", np.bool_)]
        fields += [("reward", np.float32), ("to_play", np.int32)]
        rows = []
        for name, dtype in fields:
            array = getattr(buffers, name)
            if array.dtype != dtype or not array.flags.c_contiguous or not array.flags.writeable:
                raise ValueError(f"step_into needs a C-contiguous writable {np.dtype(dtype)} {name} array")
            # memoryviews take Python bools, ints, floats and bytes without a numpy call.
            view = memoryview(array[index] if name == "legal_actions" else array[index : index + 1])
            rows.append(view.cast("B") if dtype is np.bool_ else view)
        if len(rows[0]) != self._num_actions or rows[3].format != "f" or rows[4].format != "i":
            raise ValueError(f"batch arrays of {buffers.legal_actions.shape[1:]} actions do not fit {self.spec.name}")
        self._obs_row = obs_row
        self._rows = rows  # legal_actions, is_first, is_last, reward, to_play of row `index`
        self._sink, self._sink_index = buffers, index

    def _set_last(self, out: StepOutput | None) -> None:
        self._last = out
        self._legal = None if out is None else out.legal_actions
        self._mover = None if out is None else self.state.current_player()

    def _last_output(self) -> StepOutput | None:
        """The last output, wherever it lives (copied out of the batch rows after `step_into`)."""
        if self._last is not None or self._legal is None:
            return self._last
        sink, i = self._sink, self._sink_index
        return StepOutput(
            obs=self._obs_row.copy(),
            is_first=_TRUE if sink.is_first[i] else _FALSE,
            is_last=_TRUE if sink.is_last[i] else _FALSE,
            reward=_ZERO if sink.reward[i] == 0.0 else np.float32(sink.reward[i]),
            legal_actions=np.frombuffer(bytearray(self._legal), bool),
            to_play=_PLAYERS[int(sink.to_play[i])],
        )

    # ------------------------------------------------- snapshots and other states
    def step_output_at(self, state: pyspiel.State) -> StepOutput:
        """The step output of a decision state of this game (reward 0, not first): for bots and tools.
        Chance and terminal states are refused: nobody's view or move is defined there."""
        if state.is_chance_node() or state.is_terminal():
            kind = "a chance node" if state.is_chance_node() else "terminal"
            raise MooziError(f"step_output_at needs a state where a player moves; this one is {kind}: {state.history_str()}")
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
        last = self._last_output()
        if last is not None:
            snapshot.update({f"last_{k}": np.asarray(v) for k, v in last._asdict().items()})
        return snapshot

    def set_state(self, snapshot: dict[str, np.ndarray]) -> None:
        self.state = self.game.deserialize_state(bytes(snapshot["game_state"]).decode())
        self._rng.bit_generator.state = json.loads(bytes(snapshot["rng"]).decode())
        returns = np.asarray(snapshot["returns"])
        self._returns = list(returns) if returns.size else None
        if "last_obs" in snapshot:
            self._set_last(StepOutput(**{k: np.asarray(snapshot[f"last_{k}"]) for k in StepOutput._fields}))
        else:
            self._set_last(None)

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
        """The obs of `state` seen by `player`, the mover made explicit for two-player games."""
        out = np.empty(self.spec.obs_shape, np.float32)
        self._observe_into(out, state, player)
        return out

    def _observe_into(self, out: np.ndarray, state: pyspiel.State, player: int) -> None:
        if self._set_from is not None:
            # The observer writes into its own buffer, far cheaper than building a
            # Python list; `_obs_view` is that buffer seen as (H, W, C).
            self._set_from(state, player)
            library = self._obs_view
        else:
            library = np.asarray(state.observation_tensor(player), np.float32).reshape(self._reshape)
            if self._channels_first:
                library = library.transpose(1, 2, 0)
        if not self._to_play_plane:
            out[...] = library
            return
        channels = self._library_channels
        if self._channel_order is None:
            out[..., :channels] = library
        else:
            out[..., :channels] = library[..., self._channel_order[player]]
        out[..., channels] = player

    def _illegal(self, action: int, mask: np.ndarray | bytes) -> IllegalActionError:
        if isinstance(mask, bytes):
            mask = np.frombuffer(mask, bool)
        legal = np.flatnonzero(mask).tolist()
        if mask[DUMMY_ACTION]:
            why = "the episode has ended; pass is_last=True to start the next one"
            return IllegalActionError(f"action {action} is illegal in {self.spec.name}: {why}; legal: {legal}")
        return IllegalActionError(f"action {action} is illegal in {self.spec.name}; legal: {legal}")


def make(game: str, *, seed: int | None = None) -> OpenSpielEnv:
    """The bridge's factory for the registry: `game` is what follows `openspiel:`."""
    return OpenSpielEnv(game, seed=seed)


def load_two_player_game(game_name: str) -> pyspiel.Game:
    """The OpenSpiel game behind a moozi game name, which must be a two-player OpenSpiel game."""
    from moozi.envs.registry import make_played_env

    canonical, env = make_played_env(game_name)
    try:
        game = getattr(env, "game", None)
        if not isinstance(game, pyspiel.Game) or game.num_players() != 2:
            raise MooziError(f"{canonical} is not a two-player OpenSpiel game; playing an opponent needs one")
        return game
    finally:
        env.close()
