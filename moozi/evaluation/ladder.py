"""The Elo ladder: `moozi eval RUN --ladder`.

A run's checkpoints play each other and fixed anchors (`random`, `mcts:N`,
`minimax`) in a round robin; Bradley–Terry ratings (`moozi.evaluation.elo`) put
them all on one Elo scale with `random` at 0, with bootstrap intervals.

Fairness (ELF OpenGo, appendix A.4): the whole schedule — every pair, every
game's seats and seed — is fixed before the first game, and every scheduled
game is played and recorded. Nothing is decided by which games finish first,
which would favour players whose games are short. Each game's chance outcomes
and each anchor's own randomness come from that game's seed alone, so a game
does not depend on the games played before it. Checkpoints search greedily
(as in `moozi eval`), so two checkpoints replay the same game for a given
seating unless the game has chance moves.

Playing every pair, not only consecutive checkpoints, avoids the inflation
ELF (section 4) notes for Elo built from consecutive pairs alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import sys
from typing import Callable, Sequence

import numpy as np
import pyspiel

from moozi.evaluation.elo import bootstrap_elo, fit_elo, percentile_intervals, score_matrix
from moozi.errors import MooziError

__all__ = [
    "ANCHOR_FORMS",
    "LadderPlayer",
    "LadderResult",
    "ScheduledGame",
    "game_seed",
    "make_schedule",
    "parse_anchors",
    "play_schedule",
    "print_progress",
    "run_ladder",
    "seat_score",
    "select_checkpoints",
    "summarise",
    "write_ladder_png",
]

ANCHOR_FORMS = "random, minimax, mcts:N or solver (connect_four)"
REFERENCE = "random"  # the anchor at Elo 0
DEFAULT_ANCHORS = "random,mcts:100"
DEFAULT_GAMES_PER_PAIR = 20
DEFAULT_BOOTSTRAP = 200
# One virtual draw per pair that played: finite ratings for perfect records (see elo.py),
# worth less than one real game against the tens of games a pair plays.
PRIOR_DRAWS = 1.0


# ------------------------------------------------------------------ the schedule (pure)
@dataclasses.dataclass(frozen=True)
class ScheduledGame:
    """One game of the ladder, fixed before any game is played."""

    index: int  # position in the schedule
    seats: tuple[str, str]  # the players at seat 0 and seat 1
    seed: int  # the game's chance outcomes and the anchors' own randomness


def parse_anchors(text: str | None) -> tuple[str, ...]:
    """The anchors of `--anchors a,b,...` (None: the default), `random` always first.

    `random` is added when missing: it is the zero of the rating scale.
    """
    text = DEFAULT_ANCHORS if text is None else text
    given: list[str] = []
    for raw in text.split(","):
        spec = raw.strip().lower()
        if not spec:
            continue
        kind, sep, argument = spec.partition(":")
        valid = spec in ("random", "minimax", "solver") or (kind == "mcts" and sep and argument.isdigit() and int(argument) > 0)
        if not valid:
            raise MooziError(
                f"unknown anchor {raw.strip()!r}; anchors are {ANCHOR_FORMS} (comma-separated, e.g. random,mcts:100)"
            )
        spec = f"mcts:{int(argument)}" if kind == "mcts" else spec  # mcts:050 and mcts:50 are one player
        if spec in given:
            raise MooziError(f"anchor {spec!r} is listed twice in --anchors")
        given.append(spec)
    return (REFERENCE, *(spec for spec in given if spec != REFERENCE))


def select_checkpoints(paths: Sequence, count: int | None) -> list:
    """`count` of `paths` (oldest first) evenly spaced by position, always the first and newest; all if None."""
    paths = list(paths)
    if count is None or count >= len(paths):
        return paths
    if count == 1:
        return paths[-1:]
    positions = np.linspace(0, len(paths) - 1, count)
    # Positions at least 1 apart round to distinct integers, so no checkpoint is picked twice.
    return [paths[int(i)] for i in np.floor(positions + 0.5)]


def game_seed(seed: int, index: int) -> int:
    """The seed of game `index` of a ladder seeded `seed`: well mixed, and a function of these two alone.

    31 bits: OpenSpiel's bots take a C int seed.
    """
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0] >> 1)


def make_schedule(players: Sequence[str], games_per_pair: int, seed: int) -> tuple[ScheduledGame, ...]:
    """Every pair of `players` plays `games_per_pair` games, half with each player at seat 0.

    Pairs come in a fixed order (i < j by position in `players`), and within a
    pair the seats alternate, starting with the earlier player at seat 0.
    """
    if len(set(players)) != len(players):
        raise ValueError("player names must be distinct")
    schedule = []
    for i, a in enumerate(players):
        for b in players[i + 1 :]:
            for k in range(games_per_pair):
                index = len(schedule)
                schedule.append(ScheduledGame(index, (a, b) if k % 2 == 0 else (b, a), game_seed(seed, index)))
    return tuple(schedule)


def seat_score(returns: Sequence[float]) -> float:
    """Seat 0's score in a finished game: 1 win, 0.5 draw, 0 loss (by comparing the two returns)."""
    return 1.0 if returns[0] > returns[1] else 0.5 if returns[0] == returns[1] else 0.0


# --------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class LadderPlayer:
    name: str  # the checkpoint's directory name (ckpt-0000000120) or the anchor spec
    kind: str  # "checkpoint" or "anchor"
    checkpoint: str | None = None  # path of the checkpoint directory
    updates: int | None = None  # the run's counters when the checkpoint was written
    env_steps: int | None = None
    elapsed_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class LadderResult:
    game: str
    run_dir: str
    seed: int
    games_per_pair: int
    bootstrap_samples: int
    prior_draws: float
    players: tuple[LadderPlayer, ...]
    ratings: tuple[float, ...]  # [P] Elo, random = 0
    intervals: tuple[tuple[float, float], ...]  # [P] 95% bootstrap percentile intervals
    games_played: tuple[int, ...]  # [P]
    points: tuple[float, ...]  # [P] wins + draws / 2
    schedule: tuple[ScheduledGame, ...]
    returns: tuple[tuple[float, float], ...]  # [G] each scheduled game's returns, seat 0 first
    kind: str = "ladder"

    def to_json(self) -> str:
        players = [
            {
                **dataclasses.asdict(p),
                "rating": self.ratings[i],
                "interval": list(self.intervals[i]),
                "games": self.games_played[i],
                "points": self.points[i],
            }
            for i, p in enumerate(self.players)
        ]
        document = {
            "kind": self.kind,
            "game": self.game,
            "run_dir": self.run_dir,
            "seed": self.seed,
            "games_per_pair": self.games_per_pair,
            "bootstrap_samples": self.bootstrap_samples,
            "prior_draws": self.prior_draws,
            "reference": REFERENCE,
            "players": players,
            "schedule": [{"index": g.index, "seats": list(g.seats), "seed": g.seed} for g in self.schedule],
            "results": [
                {"index": g.index, "returns": list(r), "seat0_score": seat_score(r)}
                for g, r in zip(self.schedule, self.returns)
            ],
        }
        return json.dumps(document, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "LadderResult":
        data = json.loads(text)
        if data.get("kind") != "ladder":
            raise MooziError(f"not a ladder result: kind {data.get('kind')!r}")
        fields = {f.name for f in dataclasses.fields(LadderPlayer)}
        rows = data["players"]
        return cls(
            game=data["game"],
            run_dir=data["run_dir"],
            seed=data["seed"],
            games_per_pair=data["games_per_pair"],
            bootstrap_samples=data["bootstrap_samples"],
            prior_draws=data["prior_draws"],
            players=tuple(LadderPlayer(**{k: v for k, v in row.items() if k in fields}) for row in rows),
            ratings=tuple(row["rating"] for row in rows),
            intervals=tuple(tuple(row["interval"]) for row in rows),
            games_played=tuple(row["games"] for row in rows),
            points=tuple(row["points"] for row in rows),
            schedule=tuple(ScheduledGame(g["index"], tuple(g["seats"]), g["seed"]) for g in data["schedule"]),
            returns=tuple(tuple(r["returns"]) for r in data["results"]),
        )

    def format_table(self) -> str:
        pairs = len(self.schedule) // self.games_per_pair
        lines = [
            f"{self.game} ladder: {len(self.players)} players, {pairs} pairs x {self.games_per_pair} games"
            f" = {len(self.schedule)} games, seed {self.seed}",
            f"Elo with {REFERENCE} = 0; 95% intervals from {self.bootstrap_samples} bootstrap samples",
            f"{'rank':>4}  {'player':<18} {'updates':>8} {'Elo':>8}  {'95% interval':<18} {'games':>5} {'score':>6}",
        ]
        order = sorted(range(len(self.players)), key=lambda i: -self.ratings[i])
        for rank, i in enumerate(order, 1):
            p, (lo, hi) = self.players[i], self.intervals[i]
            updates = "-" if p.updates is None else str(p.updates)
            score = self.points[i] / self.games_played[i] if self.games_played[i] else math.nan
            lines.append(
                f"{rank:>4}  {p.name:<18} {updates:>8} {self.ratings[i]:>8.1f}  {f'[{lo:.1f}, {hi:.1f}]':<18}"
                f" {self.games_played[i]:>5} {score:>6.3f}"
            )
        return "\n".join(lines)


def summarise(
    *,
    game: str,
    run_dir: str,
    seed: int,
    games_per_pair: int,
    bootstrap: int,
    players: Sequence[LadderPlayer],
    schedule: Sequence[ScheduledGame],
    returns: Sequence[tuple[float, float]],
) -> LadderResult:
    """Fits the ratings and intervals of a played schedule (pure: the same inputs give the same result)."""
    if len(returns) != len(schedule):
        raise ValueError("every scheduled game needs its result")
    index = {p.name: i for i, p in enumerate(players)}
    first = np.array([index[g.seats[0]] for g in schedule])
    second = np.array([index[g.seats[1]] for g in schedule])
    score = np.array([seat_score(r) for r in returns])
    reference = index[REFERENCE]
    scores = score_matrix(len(players), first, second, score)
    ratings = fit_elo(scores, anchor=reference, prior_draws=PRIOR_DRAWS)
    samples = bootstrap_elo(
        len(players), first, second, score, samples=bootstrap, seed=seed, anchor=reference, prior_draws=PRIOR_DRAWS
    )
    intervals = percentile_intervals(samples)
    games_played = np.bincount(first, minlength=len(players)) + np.bincount(second, minlength=len(players))
    return LadderResult(
        game=game,
        run_dir=run_dir,
        seed=seed,
        games_per_pair=games_per_pair,
        bootstrap_samples=bootstrap,
        prior_draws=PRIOR_DRAWS,
        players=tuple(players),
        ratings=tuple(float(r) for r in ratings),
        intervals=tuple((float(lo), float(hi)) for lo, hi in intervals),
        games_played=tuple(int(n) for n in games_played),
        points=tuple(float(s) for s in scores.sum(axis=1)),
        schedule=tuple(schedule),
        returns=tuple((float(a), float(b)) for a, b in returns),
    )


# ------------------------------------------------------------------ playing (the shell)
BotFactory = Callable[[str, int, int], pyspiel.Bot]  # (player name, seat, game seed) -> bot


def play_schedule(
    game: pyspiel.Game,
    schedule: Sequence[ScheduledGame],
    bot_for: BotFactory,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[float, float]]:
    """Plays every scheduled game, in order, and returns each one's (seat 0, seat 1) returns."""
    from open_spiel.python.algorithms import evaluate_bots

    results = []
    for done, scheduled in enumerate(schedule, 1):
        bots = [bot_for(name, seat, scheduled.seed) for seat, name in enumerate(scheduled.seats)]
        chance = np.random.RandomState(scheduled.seed)
        returns = evaluate_bots.evaluate_bots(game.new_initial_state(), bots, chance)
        results.append((float(returns[0]), float(returns[1])))
        if progress is not None:
            progress(done, len(schedule))
    return results


def print_progress(done: int, total: int) -> None:
    """Games played so far, on stderr: one updating line on a terminal, about ten lines in a log."""
    if sys.stderr.isatty():
        print(f"\rladder: {done}/{total} games", end="\n" if done == total else "", file=sys.stderr, flush=True)
    elif done == total or done % max(1, total // 10) == 0:
        print(f"ladder: {done}/{total} games", file=sys.stderr, flush=True)


def _checkpoint_player(path: pathlib.Path) -> LadderPlayer:
    from moozi.runs.checkpoint import META_FILE, META_STEP

    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise MooziError(f"cannot read {path / META_FILE}: {e}") from None
    counters = meta.get("counters", {})
    return LadderPlayer(
        name=path.name,
        kind="checkpoint",
        checkpoint=str(path),
        updates=int(counters.get("updates", meta.get(META_STEP, 0))),
        env_steps=counters.get("env_steps"),
        elapsed_seconds=counters.get("elapsed_seconds"),
    )


def _check_options(games_per_pair, bootstrap, checkpoints, seed) -> None:
    def positive_int(value):
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    if not positive_int(games_per_pair) or games_per_pair % 2:
        raise MooziError(
            f"--games must be a positive even number for the ladder (each pair plays both seats equally);"
            f" got {games_per_pair}"
        )
    if not positive_int(bootstrap):
        raise MooziError(f"--bootstrap must be a positive integer (resamples for the intervals); got {bootstrap}")
    if checkpoints is not None and not positive_int(checkpoints):
        raise MooziError(f"--checkpoints must be a positive integer; got {checkpoints}")
    if not isinstance(seed, int) or seed < 0:
        raise MooziError(f"--seed must be a non-negative integer for the ladder; got {seed}")


def run_ladder(
    run_dir: str | pathlib.Path,
    *,
    anchors: str | Sequence[str] | None = None,
    checkpoints: int | None = None,
    games_per_pair: int = DEFAULT_GAMES_PER_PAIR,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> LadderResult:
    """Plays the run's checkpoints (all, or `checkpoints` evenly spaced) and `anchors` in a round robin; fits Elo.

    `anchors`: specs or the `--anchors` text (None: random,mcts:100); random is always one.
    """
    from moozi.play import load_agent
    from moozi.runs.checkpoint import complete_checkpoints
    from moozi.config import load_saved_config
    from moozi.evaluation.matches import load_two_player_game, make_opponent

    _check_options(games_per_pair, bootstrap, checkpoints, seed)
    anchors = parse_anchors(anchors if anchors is None or isinstance(anchors, str) else ",".join(anchors))
    run_dir = pathlib.Path(run_dir)
    if not (run_dir / "config.json").exists():
        raise MooziError(f"{run_dir} is not a moozi run directory (no config.json)")
    config = load_saved_config(run_dir / "config.json")
    game = load_two_player_game(config.game)
    paths = select_checkpoints(complete_checkpoints(run_dir), checkpoints)
    if not paths:
        raise MooziError(f"{run_dir} has no complete checkpoint yet")
    for spec in anchors:  # before any agent is loaded: e.g. minimax cannot solve large games
        make_opponent(spec, game, 0, 0)

    players = [_checkpoint_player(p) for p in paths] + [LadderPlayer(spec, "anchor") for spec in anchors]
    schedule = make_schedule([p.name for p in players], games_per_pair, seed)
    agents = {p.name: load_agent(run_dir, checkpoint=p.checkpoint) for p in players if p.kind == "checkpoint"}
    agent_bots: dict[tuple[str, int], pyspiel.Bot] = {}

    def bot_for(name: str, seat: int, seed_of_game: int) -> pyspiel.Bot:
        if name in agents:  # agent bots are stateless between games (they rebuild history from the state)
            if (name, seat) not in agent_bots:
                agent_bots[name, seat] = agents[name].as_openspiel_bot(seat)
            return agent_bots[name, seat]
        return make_opponent(name, game, seat, seed_of_game)

    returns = play_schedule(game, schedule, bot_for, progress)
    return summarise(
        game=next(iter(agents.values())).spec.name,
        run_dir=str(run_dir),
        seed=seed,
        games_per_pair=games_per_pair,
        bootstrap=bootstrap,
        players=players,
        schedule=schedule,
        returns=returns,
    )


# --------------------------------------------------------------------- the plot
def write_ladder_png(result: LadderResult, path: str | pathlib.Path) -> pathlib.Path:
    """Checkpoint ratings with their intervals against training updates; anchors as horizontal lines."""
    # Figure + the Agg canvas directly, as moozi.runs.report does: no pyplot global state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ratings, intervals = np.asarray(result.ratings), np.asarray(result.intervals).reshape(-1, 2)
    ckpts = [i for i, p in enumerate(result.players) if p.kind == "checkpoint"]
    if ckpts:
        x = [result.players[i].updates for i in ckpts]
        y = ratings[ckpts]
        error = np.stack([y - intervals[ckpts, 0], intervals[ckpts, 1] - y]).clip(min=0)
        ax.errorbar(x, y, yerr=error, marker="o", capsize=3, linewidth=1.2, color="black", label="checkpoints")
    colours = iter(["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"] * 10)
    for i, p in enumerate(result.players):
        if p.kind != "anchor":
            continue
        colour = next(colours)
        ax.axhline(ratings[i], linestyle="--", linewidth=1, color=colour, label=f"{p.name} ({ratings[i]:.0f})")
        if intervals[i, 1] > intervals[i, 0]:
            ax.axhspan(intervals[i, 0], intervals[i, 1], color=colour, alpha=0.1)
    ax.set_xlabel("training updates")
    ax.set_ylabel(f"Elo ({REFERENCE} = 0)")
    ax.set_title(f"{result.game}: {result.games_per_pair} games per pair, 95% bootstrap intervals", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path = pathlib.Path(path)
    fig.savefig(path, dpi=100, format="png")
    return path
