"""An agent's greedy search on the solver-labelled Connect Four positions (moozi/evaluation/positions.py).

`moozi eval RUN --positions` and the testing rollout worker's `test_solver_*`
metrics land here. Every position is searched once, greedily, and the chosen
move is scored against the labels: does it keep the game-theoretic result, is
it a best move (on the informative positions, where some move loses the
result); and does the sign of the root value match the result for the mover,
on the positions won or lost for it. That sign accuracy is the mean of the
accuracies on won and on lost positions, so an always-positive value scores 0.5. The inputs of all positions are built once (`PositionBatcher`) and
searched in a few batched calls of the acting function, never one at a time.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np

from moozi.errors import MooziError
from moozi.evaluation.intervals import wilson_interval
from moozi.evaluation.positions import PHASES, load_positions, phase_means, random_mover_baseline, stratified_subset

__all__ = [
    "CONNECT_FOUR_GAMES",
    "PositionsEvaluator",
    "PositionsResult",
    "evaluate_agent_on_positions",
    "score_moves",
    "test_positions",
]

# Env names (EnvSpec.name) whose moves are connect_four's columns: the OpenSpiel game and its pgx twin.
CONNECT_FOUR_GAMES = ("openspiel:connect_four", "pgx:connect_four")
DEFAULT_BATCH_SIZE = 200
TEST_POSITIONS = 200  # the testing rollout worker's share of the set: the same ones at every test


@dataclasses.dataclass(frozen=True)
class PositionsResult:
    """Shares of the agent's moves that keep the result / are best, per phase ("all" first),
    and how often its root value has the sign of the result."""

    game: str
    positions: dict[str, int]  # informative positions (those the move shares are over), per phase
    keeps_result: dict[str, float | None]
    best_move: dict[str, float | None]
    random_keeps_result: dict[str, float | None]  # a uniformly random mover's expected shares, exactly
    random_best_move: dict[str, float | None]
    value_sign_accuracy: float | None  # the mean of the two below that exist; None: neither
    value_sign_accuracy_won: float | None  # on positions won for the mover: the root value is > 0
    value_sign_accuracy_lost: float | None  # on positions lost for the mover: the root value is < 0
    won_positions: int
    lost_positions: int
    kind: str = "positions"
    simulations: int | None = None  # the agent's search simulations per position

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    def test_metrics(self) -> dict[str, float]:
        """The testing rollout worker's metrics (logged under role "test")."""
        keeps, n = self.keeps_result["all"], self.positions["all"]
        low, high = (None, None) if keeps is None else wilson_interval(round(keeps * n), n)
        metrics = {
            "test_solver_keeps_result": keeps,
            # 95% interval over the positions: how far two checkpoints' rates must differ to count
            "test_solver_keeps_result_ci_low": low,
            "test_solver_keeps_result_ci_high": high,
            "test_solver_best_move": self.best_move["all"],
            **{f"test_solver_keeps_result_{phase}": self.keeps_result[phase] for phase in PHASES},
            "test_value_sign_accuracy": self.value_sign_accuracy,
        }
        return {name: value for name, value in metrics.items() if value is not None}  # None: no such positions

    def format_table(self) -> str:
        def cell(value):
            return "-" if value is None else f"{value:.3f}"

        searched = "greedy search" if self.simulations is None else f"greedy search of {self.simulations} simulations"
        rows = [
            f"{self.game}: {searched} on solver-labelled positions (the move shares: on the "
            f"{self.positions['all']} where some move gives the result away)",
            f"{'phase':<8} {'positions':>9}  {'keeps result':>12} {'random':>7}  {'best move':>9} {'random':>7}",
        ]
        for phase in ("all", *PHASES):
            rows.append(
                f"{phase:<8} {self.positions[phase]:>9}  {cell(self.keeps_result[phase]):>12} "
                f"{cell(self.random_keeps_result[phase]):>7}  {cell(self.best_move[phase]):>9} "
                f"{cell(self.random_best_move[phase]):>7}"
            )
        rows.append(f"value sign accuracy {cell(self.value_sign_accuracy)}: {cell(self.value_sign_accuracy_won)} on "
                    f"{self.won_positions} positions won for the mover, {cell(self.value_sign_accuracy_lost)} on "
                    f"{self.lost_positions} lost")
        return "\n".join(rows)


class PositionsEvaluator:
    """Searches fixed positions with any parameters: `evaluate(variables, key) -> PositionsResult`.

    `act` is the jitted acting function of `config` (make_acting with the greedy planner);
    positions go through it `batch_size` at a time, the last batch padded, so it compiles once.
    """

    def __init__(self, config, spec, act, positions, *, batch_size: int = DEFAULT_BATCH_SIZE):
        from moozi.evaluation.position_batch import PositionBatcher

        if spec.name not in CONNECT_FOUR_GAMES:
            raise MooziError(f"the labelled positions are connect_four positions; this agent plays {spec.name}")
        self.game = spec.name
        self.positions = tuple(positions)
        if not self.positions:
            raise MooziError("no positions to evaluate")
        self._act = act
        from moozi.builders import searches_env_state

        self._with_env_state = searches_env_state(config)
        batcher = PositionBatcher(spec.name, config.targets.history_length)
        self._batches = []  # (inputs of `batch_size` positions, how many of them are real)
        for start in range(0, len(self.positions), batch_size):
            moves = [p.moves for p in self.positions[start : start + batch_size]]
            real = len(moves)
            moves += [moves[0]] * (batch_size - real)
            self._batches.append((batcher(moves), real))

    def search(self, variables, key) -> tuple[np.ndarray, np.ndarray]:
        """(columns chosen [N], root values for the mover [N]) of one greedy search per position."""
        columns, values = [], []
        for batch, real in self._batches:
            key, sub = jax.random.split(key)
            env_state = batch.env_state if self._with_env_state else None
            _, out = self._act(variables, batch.history, batch.step, batch.last_action, env_state, sub)
            columns.append(np.asarray(out.action)[:real] - 1)
            values.append(np.asarray(out.root_value)[:real])
        return np.concatenate(columns), np.concatenate(values)

    def evaluate(self, variables, key) -> PositionsResult:
        columns, values = self.search(variables, key)
        return score_moves(self.game, self.positions, columns, values)


def score_moves(game: str, positions, columns, values) -> PositionsResult:
    """The result of playing `columns` [N] with root values `values` [N] on `positions`."""
    scored = [(p, int(c)) for p, c in zip(positions, columns) if p.informative]
    movers = [p for p, _ in scored]
    keeps = [c in p.keeping_moves for p, c in scored]
    best = [c in p.best_moves for p, c in scored]
    signs = {result: [np.sign(v) == result for p, v in zip(positions, values) if p.value == result] for result in (1, -1)}
    accuracy = {result: float(np.mean(right)) if right else None for result, right in signs.items()}
    present = [a for a in accuracy.values() if a is not None]
    baseline = random_mover_baseline(movers)
    counts = {"all": len(movers), **{phase: sum(p.phase == phase for p in movers) for phase in PHASES}}
    return PositionsResult(
        game=game,
        positions=counts,
        keeps_result=phase_means(movers, keeps),
        best_move=phase_means(movers, best),
        random_keeps_result=baseline["keeps_result"],
        random_best_move=baseline["best_move"],
        value_sign_accuracy=float(np.mean(present)) if present else None,
        value_sign_accuracy_won=accuracy[1],
        value_sign_accuracy_lost=accuracy[-1],
        won_positions=len(signs[1]),
        lost_positions=len(signs[-1]),
    )


def test_positions():
    """The testing rollout worker's fixed subset, stratified by phase."""
    return stratified_subset(load_positions().positions, TEST_POSITIONS)


def evaluate_agent_on_positions(agent, *, path=None, batch_size: int = DEFAULT_BATCH_SIZE, seed: int = 0) -> PositionsResult:
    """`moozi eval RUN --positions`: a loaded agent (moozi.load_agent) on every labelled position."""
    from moozi.core.planner import greedy_planner_config
    from moozi.builders import make_acting

    if agent.spec.name not in CONNECT_FOUR_GAMES:
        raise MooziError(f"--positions measures connect_four runs against solver labels; this run plays {agent.spec.name}")
    if agent.simulations is None:
        raise MooziError(f"--positions measures a searching agent's moves; this run's agent is {agent.config.agent}")
    # The agent's own search (its play-time simulations), greedy.
    act = make_acting(agent.config, agent.spec, greedy_planner_config(agent.planner))
    positions = load_positions(path).positions
    evaluator = PositionsEvaluator(agent.config, agent.spec, act, positions, batch_size=min(batch_size, len(positions)))
    result = evaluator.evaluate(agent.variables, jax.random.key(seed))
    return dataclasses.replace(result, simulations=agent.simulations)
