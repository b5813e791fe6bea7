"""Evaluating an agent: against an opponent in two-player games, by episode return in one-player games.

`moozi eval RUN_DIR --opponent random|minimax|mcts:N|solver|run:DIR` lands here. The
agent is anything with `as_openspiel_bot(player_id) -> pyspiel.Bot` (two-player
OpenSpiel games) or `play_episode(env, seed) -> float` (one-player games); games
are played by OpenSpiel's own `evaluate_bots`, so agent bots must implement
`restart_at` like every OpenSpiel bot.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import pathlib
import time

import numpy as np
import pyspiel
from open_spiel.python.algorithms import evaluate_bots, mcts
from open_spiel.python.algorithms.minimax_solver import MinimaxSolver

from moozi.envs.openspiel import load_two_player_game
from moozi.envs.registry import is_jax_native, make_played_env
from moozi.errors import MooziError
from moozi.evaluation.intervals import Z_95, bootstrap_mean_interval, wilson_interval
from moozi.evaluation.vector_matches import play_batch, random_opponent
from moozi.evaluation.tiles import GAMES_WITH_TILES, largest_tile, tile_shares

__all__ = [
    "OPPONENT_FORMS",
    "EvalResult",
    "ReturnResult",
    "SeatRecord",
    "evaluate",
    "load_two_player_game",
    "make_opponent",
    "result_from_json",
    "wilson_interval",
]

OPPONENT_FORMS = (
    "random, minimax, mcts:N (N simulations, e.g. mcts:100), solver (perfect play, connect_four only), "
    "run:DIR (another trained run), pipcount, pubeval or gnubg (backgammon only: a greedy pip-count bot, "
    "Tesauro's pubeval, GNU Backgammon at 0 ply) or gnugo[:LEVEL] "
    "(go: GNU Go through GTP, level 1 by default)"
)

# minimax solves the whole game first; beyond these bounds that is hopeless (connect_four
# has ~4.5e12 states, tic_tac_toe 4520), and the user should search instead.
_MAX_SOLVE_STATES = 100_000
_MAX_COUNT_SECONDS = 3.0  # counting states of games like go is slow per state
_MCTS_UCT_C = 2.0


# ------------------------------------------------------------------ statistics
def _mean_interval(values: list[float], z: float = Z_95) -> tuple[float, float] | None:
    """Normal-approximation interval for a mean; None with fewer than two values (no spread to estimate)."""
    if len(values) < 2:
        return None
    mean = float(np.mean(values))
    half_width = z * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return (mean - half_width, mean + half_width)


# --------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class SeatRecord:
    """The agent's results when it sat at one seat."""

    player: int  # the OpenSpiel player id the agent played as
    games: int
    wins: int
    draws: int
    losses: int


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """Win/draw/loss of an agent against an opponent in a two-player game, from the agent's side."""

    game: str  # canonical game name, e.g. "openspiel:tic_tac_toe"
    opponent: str  # the opponent spec as given
    seed: int
    games: int
    wins: int
    draws: int
    losses: int
    win_rate: float
    draw_rate: float
    loss_rate: float
    win_rate_ci: tuple[float, float]  # 95% Wilson score interval
    loss_rate_ci: tuple[float, float]  # 95% Wilson score interval
    per_seat: tuple[SeatRecord, ...]  # one record per seat, player 0 first
    kind: str = "two_player"
    # Uniformly random plies before the players take over; games 2k and 2k+1 share one opening
    # with the seats swapped (deterministic players otherwise replay the same two games).
    opening_moves: int = 0
    simulations: int | None = None  # the agent's search simulations per move (None: no search)
    # Games moozi's own batch (pgx:backgammon) stopped at its step cap, counted among the draws.
    unfinished: int = 0
    # Backgammon: the agent's mean points per game (a gammon counts 2, a backgammon 3; lost games
    # negative, cut games 0); None where every win is worth one point.
    points_per_game: float | None = None

    @classmethod
    def from_seats(cls, *, game: str, opponent: str, seed: int, per_seat: tuple[SeatRecord, ...],
                   opening_moves: int = 0, unfinished: int = 0, points_per_game: float | None = None) -> "EvalResult":
        """Totals, rates and intervals derived from the per-seat counts."""
        games = sum(s.games for s in per_seat)
        wins, draws, losses = (sum(getattr(s, k) for s in per_seat) for k in ("wins", "draws", "losses"))
        return cls(
            game=game,
            opponent=opponent,
            seed=seed,
            games=games,
            wins=wins,
            draws=draws,
            losses=losses,
            win_rate=wins / games,
            draw_rate=draws / games,
            loss_rate=losses / games,
            win_rate_ci=wilson_interval(wins, games),
            loss_rate_ci=wilson_interval(losses, games),
            per_seat=tuple(per_seat),
            opening_moves=opening_moves,
            unfinished=unfinished,
            points_per_game=points_per_game,
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "EvalResult":
        data = json.loads(text)
        data["win_rate_ci"] = tuple(data["win_rate_ci"])
        data["loss_rate_ci"] = tuple(data["loss_rate_ci"])
        data["per_seat"] = tuple(SeatRecord(**seat) for seat in data["per_seat"])
        return cls(**data)

    def format_table(self) -> str:
        header = f"{self.game} vs {self.opponent}: {self.games} games, seed {self.seed}"
        if self.opening_moves:
            header += f", {self.opening_moves} random opening plies per pair of games"
        if self.simulations is not None:
            header += f", {self.simulations} simulations per move"
        if self.unfinished:
            header += f"; {self.unfinished} games cut at the step cap, counted as draws"
        if self.points_per_game is not None:
            header += f"; {self.points_per_game:+.3f} points per game (gammons count 2, backgammons 3)"
        columns = f"{'':<12} {'games':>5} {'wins':>5} {'draws':>5} {'losses':>6}   {'win rate (95% CI)':<22} loss rate (95% CI)"
        rows = [header, columns]

        def row(label, games, wins, draws, losses):
            win_lo, win_hi = wilson_interval(wins, games)
            loss_lo, loss_hi = wilson_interval(losses, games)
            win = f"{wins / games:.3f} [{win_lo:.3f}, {win_hi:.3f}]" if games else "-"
            loss = f"{losses / games:.3f} [{loss_lo:.3f}, {loss_hi:.3f}]" if games else "-"
            return f"{label:<12} {games:>5} {wins:>5} {draws:>5} {losses:>6}   {win:<22} {loss}"

        for seat in self.per_seat:
            rows.append(row(f"as player {seat.player}", seat.games, seat.wins, seat.draws, seat.losses))
        rows.append(row("total", self.games, self.wins, self.draws, self.losses))
        return "\n".join(rows)


@dataclasses.dataclass(frozen=True)
class ReturnResult:
    """Episode returns of an agent in a one-player game."""

    game: str
    seed: int  # episode i was played with seed + i
    games: int  # episodes played
    returns: tuple[float, ...]  # one per episode, in order
    mean_return: float
    std_return: float  # sample standard deviation (0 for a single episode)
    mean_return_ci: tuple[float, float] | None  # 95% normal-approximation interval; None for one episode
    kind: str = "single_player"
    mean_return_bootstrap_ci: tuple[float, float] | None = None  # 95% percentile bootstrap, 10,000 resamples
    max_steps: int | None = None  # the step cap of every episode (None: played to their end)
    cut_episodes: int = 0  # episodes stopped by the cap, counted with their return so far
    protocol: str = ""  # the library's evaluation protocol the env follows (sticky actions, ...)
    simulations: int | None = None  # the agent's search simulations per move (None: no search)
    largest_tiles: tuple[int, ...] | None = None  # 2048: each game's largest tile (moozi/evaluation/tiles.py)

    @classmethod
    def from_returns(cls, *, game: str, seed: int, returns: list[float], max_steps: int | None = None,
                     cut_episodes: int = 0, protocol: str = "",
                     largest_tiles: list[int] | None = None) -> "ReturnResult":
        values = [float(r) for r in returns]
        return cls(
            game=game,
            seed=seed,
            games=len(values),
            returns=tuple(values),
            mean_return=float(np.mean(values)),
            std_return=float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            mean_return_ci=_mean_interval(values),
            mean_return_bootstrap_ci=bootstrap_mean_interval(values),
            max_steps=max_steps,
            cut_episodes=cut_episodes,
            protocol=protocol,
            largest_tiles=None if largest_tiles is None else tuple(int(t) for t in largest_tiles),
        )

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        if self.largest_tiles is not None:
            data["tile_shares"] = {str(tile): share for tile, share in tile_shares(list(self.largest_tiles)).items()}
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "ReturnResult":
        data = json.loads(text)
        data.pop("tile_shares", None)  # derived from largest_tiles
        data["returns"] = tuple(data["returns"])
        if data.get("largest_tiles") is not None:
            data["largest_tiles"] = tuple(data["largest_tiles"])
        for key in ("mean_return_ci", "mean_return_bootstrap_ci"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)

    def format_table(self) -> str:
        if self.mean_return_ci is None:
            spread = "(one episode: no interval)"
        else:
            lo, hi = self.mean_return_ci
            spread = f"± {(hi - lo) / 2:.3f}  (95% CI [{lo:.3f}, {hi:.3f}])"
        lines = [
            f"{self.game}: {self.games} episodes, seeds {self.seed}..{self.seed + self.games - 1}",
            f"mean return {self.mean_return:.3f} {spread}",
        ]
        if self.mean_return_bootstrap_ci is not None:
            lo, hi = self.mean_return_bootstrap_ci
            lines.append(f"95% bootstrap interval of the mean [{lo:.3f}, {hi:.3f}] (10,000 resamples)")
        lines.append(f"std {self.std_return:.3f}, min {min(self.returns):.3f}, max {max(self.returns):.3f}")
        if self.max_steps is not None:
            lines.append(f"cap {self.max_steps:,} steps per episode: {self.cut_episodes} of {self.games} episodes cut "
                         "(counted with their return so far)")
        if self.protocol:
            lines.append(f"protocol: {self.protocol}")
        if self.simulations is not None:
            lines.append(f"{self.simulations} simulations per move")
        if self.largest_tiles is not None:
            shares = ", ".join(f"{tile} {share:.0%}" for tile, share in tile_shares(list(self.largest_tiles)).items())
            lines.append(f"largest tile reached: at least {shares} of the games (best {max(self.largest_tiles)})")
        return "\n".join(lines)


def result_from_json(text: str) -> EvalResult | ReturnResult:
    """Reads back either result from its `to_json()`."""
    kind = json.loads(text).get("kind")
    if kind == "two_player":
        return EvalResult.from_json(text)
    if kind == "single_player":
        return ReturnResult.from_json(text)
    raise MooziError(f"not an evaluation result: kind {kind!r}, expected two_player or single_player")


# ------------------------------------------------------------------ opponents
class _MinimaxBot(pyspiel.Bot):
    """Perfect play from a solved table; random (seeded) among equally good moves so games vary."""

    def __init__(self, solver: MinimaxSolver, seed: int):
        pyspiel.Bot.__init__(self)
        self._solver = solver
        self._rng = np.random.default_rng(seed)

    def restart_at(self, state):
        pass

    def step(self, state):
        legal = state.legal_actions()
        values = self._solver.action_values_from_state(state)[legal]
        best = [a for a, v in zip(legal, values) if v >= values.max() - 1e-6]
        return int(self._rng.choice(best))


def _too_large(game: pyspiel.Game) -> str | None:
    """Why minimax cannot solve `game` here, or None when it is small enough.

    Counts distinct non-terminal states depth-first (children made one at a time,
    so memory stays at one path) until a state or time budget runs out.
    """
    deadline = time.monotonic() + _MAX_COUNT_SECONDS
    root = game.new_initial_state()
    seen = {str(root)}
    stack = [(root, iter(root.legal_actions()))]
    while stack:
        state, actions = stack[-1]
        action = next(actions, None)
        if action is None:
            stack.pop()
            continue
        child = state.child(action)
        if child.is_terminal():
            continue
        key = str(child)
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > _MAX_SOLVE_STATES:
            return f"it is too large (over {_MAX_SOLVE_STATES} positions; minimax solves up to that many)"
        if time.monotonic() > deadline:  # a bound on the wait, so the count is only a lower bound
            return (f"counting its positions took over {_MAX_COUNT_SECONDS:g} s ({len(seen)} counted, minimax "
                    f"solves up to {_MAX_SOLVE_STATES}); on a less loaded machine it may fit")
        stack.append((child, iter(child.legal_actions())))
    return None


@functools.lru_cache(maxsize=4)
def _solved(game_string: str) -> MinimaxSolver:
    """OpenSpiel's minimax solver with its table filled; cached so both seats and repeated evals share one solve."""
    game = pyspiel.load_game(game_string)
    game_type = game.get_type()
    reason = None
    if game.num_players() != 2 or game_type.utility != pyspiel.GameType.Utility.ZERO_SUM:
        reason = "it is not a two-player zero-sum game"
    elif game_type.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC:
        reason = "it has chance moves"
    elif game_type.information != pyspiel.GameType.Information.PERFECT_INFORMATION:
        reason = "it has hidden information"
    else:
        reason = _too_large(game)
    if reason is not None:
        name = game_string.removesuffix("()")
        raise MooziError(f"the minimax opponent cannot solve {name}: {reason}; use mcts:N instead, e.g. mcts:1000")
    solver = MinimaxSolver(game_string)
    solver.solve()
    return solver


def _mcts_bot(game: pyspiel.Game, simulations: int, seed: int) -> pyspiel.Bot:
    rng = np.random.RandomState(seed)
    evaluator = mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=rng)
    try:
        return mcts.MCTSBot(game, _MCTS_UCT_C, simulations, evaluator, solve=True, random_state=rng)
    except ValueError as err:  # e.g. rewards before the end: OpenSpiel's MCTS needs terminal rewards
        raise MooziError(f"the mcts opponent cannot play {game}: {err}") from None


def _solver_bot(game: pyspiel.Game, seed: int) -> pyspiel.Bot:
    if game.get_type().short_name != "connect_four":
        name = str(game).removesuffix("()")
        raise MooziError(f"the solver opponent plays only connect_four, not {name}; use minimax or mcts:N instead")
    from moozi.evaluation.connect_four_solver import SolverBot, check_connect_four  # lazy: an optional extra

    check_connect_four(game)
    return SolverBot(seed)


def _run_bot(run_dir: str, player_id: int) -> pyspiel.Bot:
    if not pathlib.Path(run_dir).is_dir():
        raise MooziError(f"run:DIR opponent: no run directory at {run_dir!r}")
    from moozi.play import load_agent  # lazy: loading an agent imports JAX and the network

    return load_agent(run_dir).as_openspiel_bot(player_id)


def make_opponent(spec: str, game: pyspiel.Game, player_id: int, seed: int) -> pyspiel.Bot:
    """The OpenSpiel bot that `spec` names, playing as `player_id` in `game`.

    random: uniform over legal moves. minimax: perfect play (small deterministic
    games only), random among optimal moves. mcts:N: OpenSpiel's MCTS with N
    random-rollout simulations (uct_c=2, solving). solver: perfect play in
    connect_four (bitbully), random among the best moves. run:DIR: another trained run.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise MooziError(f"an opponent must be one of {OPPONENT_FORMS}; got {spec!r}")
    kind, sep, argument = spec.strip().partition(":")
    kind, argument = kind.strip().lower(), argument.strip()
    if kind == "solver" and not sep:
        return _solver_bot(game, seed)
    if kind in ("random", "minimax") and not sep:
        if kind == "random":
            return pyspiel.make_uniform_random_bot(player_id, seed)
        return _MinimaxBot(_solved(str(game)), seed)
    if kind == "mcts":
        if not argument.isdigit() or int(argument) < 1:
            raise MooziError(f"mcts:N needs a positive integer N (simulations per move, e.g. mcts:100); got {spec!r}")
        return _mcts_bot(game, int(argument), seed)
    if kind == "run":
        if not argument:
            raise MooziError(f"run:DIR needs the directory of a trained run, e.g. run:runs/ttt; got {spec!r}")
        return _run_bot(argument, player_id)
    if kind == "gnugo":
        # GNU Go is a GTP engine, not an OpenSpiel bot: moozi.evaluation.gnugo plays it through a referee.
        raise MooziError(f"{spec!r} plays whole games of go through GTP: `moozi eval RUN --opponent {spec}` "
                         "(evaluate_against_gnugo), not here")
    raise MooziError(f"unknown opponent {spec!r}; use {OPPONENT_FORMS}")


# ------------------------------------------------------------------ evaluation
def evaluation_protocol(canonical: str) -> str:
    """The published evaluation protocol a library's env follows here, to print beside its returns."""
    library = canonical.split(":", 1)[0]
    if library == "minatar":
        return "MinAtar (Young & Tian, 2019): sticky actions 0.1, difficulty ramping on, no step limit of its own"
    if library == "atari":
        return ("ALE (Machado et al., 2018): sticky actions 0.25, frame skip 4, 84x84 grey, full action set off, "
                "episodes cut at 108,000 frames")
    if library == "gymnax" and canonical.endswith("-MinAtar"):
        return "gymnax MinAtar: sticky actions 0.1"
    return ""


def _evaluate_one_player(agent, canonical, env, num_games, seed, max_steps, progress) -> ReturnResult:
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise MooziError(f"the step cap must be a positive integer, got {max_steps!r}")
    run_episode = getattr(agent, "run_episode", None)
    if max_steps is not None and run_episode is None:
        raise MooziError("this agent cannot cap its episodes (it has no run_episode)")
    returns, cut = [], 0
    tiles: list[int] | None = [] if canonical in GAMES_WITH_TILES and run_episode is not None else None
    for i in range(num_games):
        if run_episode is not None:
            outcome = run_episode(env, seed + i, max_steps)
            returns.append(float(outcome.episode_return))
            cut += bool(outcome.cut)
            if tiles is not None:
                tiles.append(largest_tile(outcome.last_obs))
        else:
            returns.append(float(agent.play_episode(env, seed + i)))
        if progress is not None:
            progress(i + 1, num_games, returns, cut)
    return ReturnResult.from_returns(game=canonical, seed=seed, returns=returns, max_steps=max_steps,
                                     cut_episodes=cut, protocol=evaluation_protocol(canonical), largest_tiles=tiles)


def print_episode_progress(done: int, total: int, returns: list[float], cut: int) -> None:
    """A one-line progress display on stderr for `moozi eval` on one-player games."""
    import sys

    end = "\n" if done == total else ""
    print(f"\r  episode {done}/{total}: return {returns[-1]:.2f}, mean so far {np.mean(returns):.3f}"
          f"{f', {cut} cut' if cut else ''}   ", end=end, file=sys.stderr, flush=True)


def random_opening(game: pyspiel.Game, plies: int, rng: np.random.RandomState) -> pyspiel.State:
    """The state after up to `plies` uniformly random moves (chance outcomes by their odds); it stops
    early rather than end the game, so the players always get a move."""
    state = game.new_initial_state()
    played = 0
    while played < plies and not state.is_terminal():
        if state.is_chance_node():
            outcomes, probabilities = zip(*state.chance_outcomes())
            state.apply_action(int(rng.choice(outcomes, p=probabilities)))
            continue
        for action in rng.permutation(state.legal_actions()):
            child = state.child(int(action))
            if not child.is_terminal():
                state = child
                break
        else:
            break
        played += 1
    return state


def _evaluate_two_player(agent, canonical: str, game: pyspiel.Game, opponent: str, num_games: int, seed: int,
                         opening_moves: int = 0):
    # Build every bot before the first game, so a bad opponent fails fast and
    # the seat of every game is fixed up front: game i has the agent at seat i % 2.
    seats = [i % 2 for i in range(num_games)]
    bots = {}
    for seat in (0, 1):
        if seat in seats:
            other = 1 - seat
            pair = [None, None]
            pair[other] = make_opponent(opponent, game, other, seed + other)  # first: specs are cheap to check
            pair[seat] = agent.as_openspiel_bot(seat)
            bots[seat] = pair
    counts = {seat: [0, 0, 0] for seat in (0, 1)}  # wins, draws, losses
    chance_rng = np.random.RandomState(seed)  # chance outcomes, shared by all games
    opening_rng = np.random.RandomState(seed + 104729)  # its own stream: openings don't shift chance outcomes
    start = game.new_initial_state()
    for i, seat in enumerate(seats):
        if opening_moves and i % 2 == 0:
            start = random_opening(game, opening_moves, opening_rng)
        returns = evaluate_bots.evaluate_bots(start.clone(), bots[seat], chance_rng)
        outcome = returns[seat] - returns[1 - seat]
        counts[seat][0 if outcome > 0 else 1 if outcome == 0 else 2] += 1
    per_seat = tuple(SeatRecord(seat, seats.count(seat), *counts[seat]) for seat in (0, 1))
    return EvalResult.from_seats(game=canonical, opponent=opponent, seed=seed, per_seat=per_seat,
                                 opening_moves=opening_moves)


# Two-player JAX-native games without an OpenSpiel twin (pgx:backgammon) are played in one batch
# (moozi/evaluation/vector_matches.py) against these opponents; a game still going after this many
# steps counts as a draw.
BATCH_OPPONENTS = {"random": "a uniformly random legal move",
                   "pipcount": "pgx:backgammon only: the greedy pip-count bot (moozi/evaluation/backgammon_bot.py)",
                   "pubeval": "pgx:backgammon only: Tesauro's public linear evaluator (moozi/evaluation/gnubg_bots.py; "
                              "the gnubg-nn package)",
                   "gnubg": "pgx:backgammon only: GNU Backgammon's neural network at 0 ply (the gnubg-nn package)"}
_BACKGAMMON_ONLY = ("pipcount", "pubeval", "gnubg")
_BATCH_MAX_STEPS = 5_000


def batch_opponent(spec: str, canonical: str, seed: int):
    """The opponent policy `spec` names (`BATCH_OPPONENTS`) for a game played in moozi's own batch."""
    kind = spec.strip().lower() if isinstance(spec, str) else spec
    if kind == "random":
        return random_opponent(seed)
    if kind == "pipcount" and canonical == "pgx:backgammon":
        import jax

        from moozi.evaluation.backgammon_bot import pip_count_policy

        choose = pip_count_policy()
        keys = iter(jax.random.split(jax.random.key(seed), _BATCH_MAX_STEPS + 1))
        # +1: the bridge's action 0 is its dummy, library action a is a + 1.
        return lambda step, vector_env, to_move: np.asarray(choose(vector_env.state, next(keys))) + 1
    if kind in ("pubeval", "gnubg") and canonical == "pgx:backgammon":
        from moozi.evaluation.gnubg_bots import GnubgOpponent

        return GnubgOpponent(kind)
    allowed = ", ".join(name for name in BATCH_OPPONENTS if name not in _BACKGAMMON_ONLY or canonical == "pgx:backgammon")
    raise MooziError(f"{canonical} is played in moozi's own batch of games, against: {allowed}; got {spec!r}")


def _evaluate_in_batch(agent, canonical: str, opponent: str, num_games: int, seed: int) -> EvalResult:
    from moozi.builders import make_vector_env

    batched_act = getattr(agent, "batched_act", None)
    if batched_act is None:
        raise MooziError(f"{canonical}: this agent cannot play a batch of games (a MuZero-family agent can)")
    env = make_vector_env(agent.config, num_games, seed)
    try:
        choose_opponent = batch_opponent(opponent, canonical, seed + 1)
        played = play_batch(batched_act, agent.variables, env, history_length=agent.config.targets.history_length,
                            obs_shape=agent.spec.obs_shape, is_two_player=True, seed=seed,
                            max_steps=_BATCH_MAX_STEPS, opponent=choose_opponent,
                            needs_env_state=agent.needs_env_state)
    finally:
        env.close()
    per_seat = []
    for seat in (0, 1):
        mine = played.outcome[played.agent_seat == seat]
        per_seat.append(SeatRecord(seat, len(mine), int(np.sum(mine > 0)), int(np.sum(mine == 0)), int(np.sum(mine < 0))))
    points = float(np.mean(played.points)) if canonical == "pgx:backgammon" else None  # gammons 2, backgammons 3
    return EvalResult.from_seats(game=canonical, opponent=opponent, seed=seed, per_seat=tuple(per_seat),
                                 unfinished=int(np.sum(~played.finished)), points_per_game=points)


def evaluate(agent, game_name: str, opponent: str, num_games: int, seed: int,
             opening_moves: int = 0, max_steps: int | None = None, progress=None) -> EvalResult | ReturnResult:
    """Plays `num_games` games and summarises them.

    Two-player OpenSpiel games: the agent plays seats 0 and 1 alternately
    against `opponent` (see `make_opponent`), each pair of games from the same
    start: the initial state, or `opening_moves` random plies into the game
    (`random_opening`). One-player games: episode i is
    `agent.run_episode(env, seed + i, max_steps)` (agents without it:
    `agent.play_episode(env, seed + i)`, uncapped), `opponent` is ignored and `opening_moves` refused;
    `progress(i, num_games, returns_so_far, cut_so_far)` is called after each.
    """
    if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 1:
        raise MooziError(f"the number of games must be a positive integer, got {num_games!r}")
    if isinstance(opening_moves, bool) or not isinstance(opening_moves, int) or opening_moves < 0:
        raise MooziError(f"the number of opening moves must be a non-negative integer, got {opening_moves!r}")
    canonical, env = make_played_env(game_name)
    try:
        if env.spec.num_players == 1:
            if opening_moves:
                raise MooziError(f"{canonical} is a one-player game: --opening-moves needs a two-player game")
            result = _evaluate_one_player(agent, canonical, env, num_games, seed, max_steps, progress)
        else:
            game = getattr(env, "game", None)
            if isinstance(game, pyspiel.Game):
                result = _evaluate_two_player(agent, canonical, game, opponent, num_games, seed, opening_moves)
            elif is_jax_native(canonical):
                if opening_moves:
                    raise MooziError(f"{canonical}: --opening-moves needs an OpenSpiel game (openspiel:<name>)")
                result = _evaluate_in_batch(agent, canonical, opponent, num_games, seed)
            else:
                raise MooziError(f"{canonical}: evaluating against an opponent needs an OpenSpiel game (openspiel:<name>)")
        return dataclasses.replace(result, simulations=getattr(agent, "simulations", None))
    finally:
        env.close()
