"""Board games as pictures: the grid of a game's text diagram (OpenSpiel's `str(state)`), drawn as SVG,
and which move fills which cell (for boards a person clicks on). Used by `moozi report`'s replays and
`moozi play --web`."""

from __future__ import annotations

STONES = {"x": 0, "X": 0, "b": 0, "B": 0, "o": 1, "O": 1, "w": 1, "W": 1}  # first player 0, second 1
EMPTY = set(".+-")


def board_grid(state_text: str) -> list[str] | None:
    """The rows of a board game's text diagram (OpenSpiel's `str(state)`): lines that hold only stones
    (x/o, X/O, B/W) and empty points (. + -), with any row label stripped; None when there are none."""
    rows = []
    for line in state_text.splitlines():
        body = line.strip().lstrip("0123456789").strip().replace(" ", "")
        if len(body) >= 3 and all(c in STONES or c in EMPTY for c in body):
            rows.append(body)
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    return rows


def board_svg(rows: list[str], size: int = 28, highlight: tuple[int, int] | None = None) -> str:
    """An SVG picture of a board: black stones for the first player (x, X, B), white for the second."""
    h, w = len(rows), len(rows[0])
    parts = [f'<svg width="{w * size}" height="{h * size}" '
             f'viewBox="0 0 {w * size} {h * size}" role="img">',
             f'<rect width="{w * size}" height="{h * size}" fill="#dcb35c"/>']
    for r in range(h):
        for c in range(w):
            x, y = c * size, r * size
            parts.append(f'<rect x="{x}" y="{y}" width="{size}" height="{size}" fill="none" stroke="#7a5a1e" stroke-width="1"/>')
            stone = STONES.get(rows[r][c])
            if stone is not None:
                fill, edge = ("#111", "#000") if stone == 0 else ("#f4f4f4", "#333")
                parts.append(f'<circle cx="{x + size / 2}" cy="{y + size / 2}" r="{size * 0.42}" fill="{fill}" stroke="{edge}"/>')
            if highlight == (r, c):
                parts.append(f'<rect x="{x + 2}" y="{y + 2}" width="{size - 4}" height="{size - 4}" fill="none" '
                             'stroke="#d62728" stroke-width="3"/>')
    parts.append("</svg>")
    return "".join(parts)


def cell_actions(state) -> tuple[dict[tuple[int, int], int], dict[int, int], dict[int, str]]:
    """How a person's click becomes a move at `state`: ({cell: action} for moves that put a stone on that
    cell, {column: action} where exactly one legal move fills a cell of that column (Connect Four), and
    {action: name} of the legal moves that fill no cell (go's pass))."""
    before = board_grid(str(state))
    cells, columns, others = {}, {}, {}
    by_column: dict[int, list[int]] = {}
    player = state.current_player()
    for action in state.legal_actions():
        child = state.child(action)
        after = board_grid(str(child))
        changed = [] if before is None or after is None else [
            (r, c) for r in range(len(before)) for c in range(len(before[0]))
            if before[r][c] != after[r][c] and after[r][c] in STONES and before[r][c] not in STONES]
        if len(changed) == 1:
            cells[changed[0]] = action
            by_column.setdefault(changed[0][1], []).append(action)
        else:
            others[action] = state.action_to_string(player, action)
    columns = {c: actions[0] for c, actions in by_column.items() if len(actions) == 1}
    return cells, columns, others
