"""The bundled Connect Four positions, each labelled by the solver: what every move is worth.

`data/connect_four_positions.json` is made by `bench/make_connect_four_positions.py`
(its header says how). Reading it needs no solver. A mover is measured on it by
the share of its moves that keep the game-theoretic result and that have the
best score, overall and per phase of the game (see PHASES), on the positions
where some move loses the result (`informative`). Positions lost for the mover
are never informative (every move keeps the loss); the set holds some anyway,
so that the sign of a value estimate is checked on losses as well as wins.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib

import numpy as np

from moozi.errors import MooziError

__all__ = [
    "DEFAULT_PATH",
    "FORMAT",
    "PHASES",
    "LabelledPosition",
    "PositionSet",
    "load_positions",
    "phase_means",
    "phase_of",
    "random_mover_baseline",
    "stratified_subset",
]

DEFAULT_PATH = pathlib.Path(__file__).with_name("data") / "connect_four_positions.json"
FORMAT = "moozi-connect-four-positions/1"
PHASES = {"early": (0, 13), "middle": (14, 27), "late": (28, 41)}  # inclusive ply ranges
COLUMNS = 7


def phase_of(ply: int) -> str:
    for name, (low, high) in PHASES.items():
        if low <= ply <= high:
            return name
    raise ValueError(f"ply {ply} is outside a connect_four game (0..41)")


@dataclasses.dataclass(frozen=True)
class LabelledPosition:
    """One position and the solver's verdict on each move, from the view of the player to move."""

    moves: tuple[int, ...]  # columns played from the empty board
    scores: tuple[int | None, ...]  # [7] the solver score of each column; None where it is full
    best_moves: tuple[int, ...]  # the columns with the highest score
    keeping_moves: tuple[int, ...]  # the columns whose result (sign of the score) is the best one's
    value: int  # the result for the player to move: +1 win, 0 draw, -1 loss
    source: str  # which kind of play reached it

    @property
    def ply(self) -> int:
        return len(self.moves)

    @property
    def to_play(self) -> int:
        return self.ply % 2  # OpenSpiel's player id: 0 moves first

    @property
    def phase(self) -> str:
        return phase_of(self.ply)

    @property
    def legal_moves(self) -> tuple[int, ...]:
        return tuple(c for c, s in enumerate(self.scores) if s is not None)

    @property
    def informative(self) -> bool:
        """Some legal move gives the result away, so the mover's choice can be scored."""
        return len(self.keeping_moves) < len(self.legal_moves)

    def to_dict(self) -> dict:
        return {
            "moves": list(self.moves),
            "ply": self.ply,
            "phase": self.phase,
            "to_play": self.to_play,
            "scores": list(self.scores),
            "best_moves": list(self.best_moves),
            "keeping_moves": list(self.keeping_moves),
            "value": self.value,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "LabelledPosition":
        position = cls(
            moves=tuple(int(m) for m in data["moves"]),
            scores=tuple(None if s is None else int(s) for s in data["scores"]),
            best_moves=tuple(int(m) for m in data["best_moves"]),
            keeping_moves=tuple(int(m) for m in data["keeping_moves"]),
            value=int(data["value"]),
            source=str(data["source"]),
        )
        legal = set(position.legal_moves)
        if (
            len(position.scores) != COLUMNS
            or not legal
            or not set(position.best_moves) <= set(position.keeping_moves) <= legal
            or position.value not in (-1, 0, 1)
        ):
            raise ValueError(f"inconsistent labels for moves {list(position.moves)}")
        return position


@dataclasses.dataclass(frozen=True)
class PositionSet:
    header: dict
    positions: tuple[LabelledPosition, ...]

    def to_json(self) -> str:
        """The header indented, then one position per line: diffs and greps stay readable."""
        lines = ",\n".join(json.dumps(p.to_dict(), separators=(",", ":")) for p in self.positions)
        header = json.dumps(self.header, indent=2).replace("\n", "\n  ")
        return f'{{\n  "format": "{FORMAT}",\n  "header": {header},\n  "positions": [\n{lines}\n  ]\n}}\n'


def load_positions(path: str | pathlib.Path | None = None) -> PositionSet:
    """The labelled positions at `path` (default: the bundled set)."""
    path = DEFAULT_PATH if path is None else pathlib.Path(path)
    return _load(str(path.resolve()))


@functools.lru_cache(maxsize=4)
def _load(path: str) -> PositionSet:
    try:
        data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise MooziError(f"cannot read the labelled positions {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise MooziError(f"{path} is not valid JSON: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MooziError(f"{path} is not a labelled position file (format {FORMAT})")
    try:
        positions = tuple(LabelledPosition.from_dict(p) for p in data["positions"])
    except (KeyError, TypeError, ValueError) as e:
        raise MooziError(f"{path} has a damaged position: {' '.join(str(e).split())}") from None
    return PositionSet(header=dict(data.get("header", {})), positions=positions)


def phase_means(positions, values) -> dict[str, float | None]:
    """{"all", "early", "middle", "late"}: the mean of `values` [N] over those positions (None: none)."""
    values = np.asarray(values, np.float64)
    phases = np.asarray([p.phase for p in positions])
    out = {"all": float(values.mean()) if len(values) else None}
    for name in PHASES:
        chosen = values[phases == name]
        out[name] = float(chosen.mean()) if len(chosen) else None
    return out


def random_mover_baseline(positions) -> dict[str, dict[str, float | None]]:
    """What a uniformly random mover scores, exactly: per position the share of its legal moves
    that keep the result (or are best), averaged like `phase_means` over the informative ones."""
    positions = [p for p in positions if p.informative]
    keeps = [len(p.keeping_moves) / len(p.legal_moves) for p in positions]
    best = [len(p.best_moves) / len(p.legal_moves) for p in positions]
    return {"keeps_result": phase_means(positions, keeps), "best_move": phase_means(positions, best)}


def stratified_subset(positions, size: int, seed: int = 0) -> tuple[LabelledPosition, ...]:
    """A fixed sample of about `size` positions, split evenly over the phases (all when fewer)."""
    positions = tuple(positions)
    if size >= len(positions):
        return positions
    rng = np.random.default_rng(seed)
    chosen = []
    for i, name in enumerate(PHASES):
        indices = [k for k, p in enumerate(positions) if p.phase == name]
        share = size // len(PHASES) + (1 if i < size % len(PHASES) else 0)
        chosen += rng.permutation(indices)[:share].tolist()
    return tuple(positions[k] for k in sorted(chosen))
