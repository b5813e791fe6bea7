"""OpenSpiel games and their pgx twins: the same game tree under the same action ids.

AlphaZero mode needs the rules as a pure JAX function, so it plays the pgx
twin of an OpenSpiel board game; evaluation and human play still use
OpenSpiel (its bots, its board printing) and replay the OpenSpiel action
history in the twin. That needs the two libraries to agree on every action
id: `tests/envs/test_twins.py` replays random games in both and compares the legal
moves and outcomes step by step. (Where the libraries number the cells
differently, they differ by a symmetry of the board, which leaves the game
tree over action ids unchanged.)
"""

from __future__ import annotations

_PGX_TWINS = {
    "openspiel:tic_tac_toe": "pgx:tic_tac_toe",
    "openspiel:connect_four": "pgx:connect_four",
    "openspiel:go(board_size=9,komi=7.5)": "pgx:go_9x9",
}
_OPENSPIEL_TWINS = {pgx: openspiel for openspiel, pgx in _PGX_TWINS.items()}


def pgx_twin(canonical_name: str) -> str | None:
    """'openspiel:connect_four' -> 'pgx:connect_four'; None where there is no twin."""
    return _PGX_TWINS.get(canonical_name)


def openspiel_twin(canonical_name: str) -> str | None:
    """'pgx:connect_four' -> 'openspiel:connect_four'; None where there is no twin."""
    return _OPENSPIEL_TWINS.get(canonical_name)


def twins() -> dict[str, str]:
    return dict(_PGX_TWINS)
