"""Games a trained agent played, kept for people to look at (`moozi report`'s report.html).

Board games: one game of the agent (seat 0) against the uniformly random player, move by move, with
the board before each move and, at the agent's moves, its root value and its top moves by visit
share. `search_figure` draws the root's children of one of those searches (prior, visit share, Q,
the chosen move) and, where the moves are the board's cells or columns, the policy and Q over the
board. One-player games: one test episode as an animated GIF (`episode_gif`).
"""

from __future__ import annotations

import dataclasses
import io
import pathlib

import numpy as np
import pyspiel

from moozi.play.boards import STONES, board_grid
from moozi.envs.base import DUMMY_ACTION
from moozi.envs.registry import make_host_env, make_played_env
from moozi.errors import MooziError



@dataclasses.dataclass
class TopMove:
    label: str
    visit_share: float
    prior: float
    q: float


@dataclasses.dataclass
class MoveRecord:
    ply: int
    player: int  # 0 or 1
    by_agent: bool
    label: str  # the move in the game's own notation
    board: list[str] | None  # the board before the move, one string per row (None: not a grid game)
    board_text: str  # str(state) before the move
    root_value: float | None = None  # the agent's v* (from the player to move)
    top_moves: list[TopMove] = dataclasses.field(default_factory=list)
    search: dict | None = None  # the root's children (numpy arrays over the env's actions) and the chosen action


@dataclasses.dataclass
class BoardReplay:
    game: str
    agent_seat: int
    opponent: str
    moves: list[MoveRecord]
    final_board: list[str] | None
    final_text: str
    returns: list[float]
    actions: list[int]  # the OpenSpiel actions played, in order (to replay the game)

    @property
    def result(self) -> str:
        mine = self.returns[self.agent_seat] - self.returns[1 - self.agent_seat]
        return "the agent won" if mine > 0 else "a draw" if mine == 0 else "the agent lost"


def play_board_game(agent, seed: int = 0, agent_seat: int = 0, top: int = 3) -> BoardReplay:
    """One game of `agent` against the uniformly random player, recorded move by move."""
    canonical, env = make_played_env(agent.config.game)
    game = getattr(env, "game", None)
    if not isinstance(game, pyspiel.Game):
        raise MooziError(f"{canonical}: a board-game replay needs an OpenSpiel game")
    agent_bot = agent.as_openspiel_bot(agent_seat)
    opponent = pyspiel.make_uniform_random_bot(1 - agent_seat, seed)
    rng = np.random.RandomState(seed)
    state = game.new_initial_state()
    moves, actions = [], []
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes())
            action = int(rng.choice(outcomes, p=probs))
            state.apply_action(action)
            actions.append(action)
            continue
        player = state.current_player()
        by_agent = player == agent_seat
        text = str(state)
        action = (agent_bot if by_agent else opponent).step(state)
        record = MoveRecord(len(moves), player, by_agent, state.action_to_string(player, action), board_grid(text), text)
        search = agent.last_search if by_agent else None
        if search is not None:
            record.root_value = float(search.root_value)
            record.search = {"prior": np.asarray(search.root.prior[1:]), "visit_share": np.asarray(search.root.visit_share[1:]),
                             "q": np.asarray(search.root.q[1:]), "chosen": int(action),
                             "legal": np.asarray(state.legal_actions_mask(player), bool)[:len(search.root.prior) - 1]}
            order = np.argsort(-record.search["visit_share"] - 1e-6 * record.search["prior"])
            record.top_moves = [TopMove(state.action_to_string(player, int(a)), float(record.search["visit_share"][a]),
                                        float(record.search["prior"][a]), float(record.search["q"][a]))
                                for a in order[:top] if record.search["legal"][a]]
        moves.append(record)
        state.apply_action(action)
        actions.append(action)
    final = str(state)
    return BoardReplay(canonical, agent_seat, "random", moves, board_grid(final), final, list(state.returns()), actions)


def move_cell(replay: BoardReplay, index: int) -> tuple[int, int] | None:
    """The board cell that move `index` filled, read off the boards before and after it (None: no single cell)."""
    before = replay.moves[index].board
    after = replay.moves[index + 1].board if index + 1 < len(replay.moves) else replay.final_board
    if before is None or after is None or len(before) != len(after):
        return None
    changed = [(r, c) for r in range(len(before)) for c in range(len(before[0])) if before[r][c] != after[r][c]
               and after[r][c] in STONES]
    return changed[0] if len(changed) == 1 else None


def search_figure(record: MoveRecord, labels: list[str], path: pathlib.Path) -> pathlib.Path:
    """A PNG of one search: the legal moves' prior, visit share and Q (bars), the chosen move marked; and,
    where the moves are the board's cells (or its columns), the visit share and Q over the board."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    search = record.search
    legal = np.flatnonzero(search["legal"])
    grid = _action_grid(len(search["legal"]), record.board)
    fig, axes = plt.subplots(1, 3 if grid else 1, figsize=(13 if grid else 7, 3.6), squeeze=False)
    ax = axes[0][0]
    x = np.arange(len(legal))
    ax.bar(x - 0.2, search["prior"][legal], 0.4, label="prior", color="tab:gray")
    ax.bar(x + 0.2, search["visit_share"][legal], 0.4, label="visit share", color="tab:blue")
    ax.set_xticks(x, [labels[a] for a in legal], rotation=90 if len(legal) > 12 else 0, fontsize=7 if len(legal) > 12 else 9)
    ax.set_ylabel("probability")
    twin = ax.twinx()
    twin.plot(x, search["q"][legal], "o", color="tab:orange", label="Q")
    twin.set_ylabel("Q (player to move)")
    chosen = int(np.flatnonzero(legal == search["chosen"])[0]) if search["chosen"] in legal else None
    if chosen is not None:
        ax.axvspan(chosen - 0.5, chosen + 0.5, color="tab:red", alpha=0.15, label="chosen")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"ply {record.ply}: root value {record.root_value:+.2f}, chose {record.label}", fontsize=10)
    if grid:
        h, w = grid
        for k, (name, values, cmap) in enumerate((("visit share", search["visit_share"], "Blues"), ("Q", search["q"], "RdYlGn"))):
            board = np.full(h * w, np.nan)
            n = min(h * w, len(values))
            board[:n] = np.where(search["legal"][:n], values[:n], np.nan)
            image = axes[0][k + 1].imshow(board.reshape(h, w), cmap=cmap)
            axes[0][k + 1].set_title(f"{name} over the board", fontsize=10)
            axes[0][k + 1].set_xticks([]), axes[0][k + 1].set_yticks([])
            fig.colorbar(image, ax=axes[0][k + 1], fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _action_grid(num_actions: int, board: list[str] | None) -> tuple[int, int] | None:
    """(rows, columns) when action a is cell a of the board (pass allowed last), or a column of it."""
    if board is None:
        return None
    h, w = len(board), len(board[0])
    if num_actions in (h * w, h * w + 1):
        return h, w
    if num_actions == w:
        return 1, w
    return None


def episode_gif(agent, path: pathlib.Path, seed: int = 0, max_steps: int = 500, scale: int = 12) -> dict:
    """Plays one greedy test episode of a one-player game (cut after `max_steps`) and writes it as an
    animated GIF; returns its return, steps and whether it was cut."""
    from PIL import Image

    env = make_host_env(agent.config.game)
    history = agent.new_history()
    step = env.reset(seed=seed)
    frames, total, last_action, steps = [_frame(step.obs, scale)], 0.0, DUMMY_ACTION, 0
    while not step.is_last and steps < max_steps:
        history, action, _ = agent.act(history, step, last_action)
        step = env.step(action, False)
        total += float(step.reward)
        last_action, steps = action, steps + 1
        frames.append(_frame(step.obs, scale))
    env.close()
    images = [Image.fromarray(f) for f in frames]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=80, loop=0, optimize=True)
    path.write_bytes(buffer.getvalue())
    return {"episode_return": total, "steps": steps, "cut": not bool(step.is_last)}


# One colour per object channel (MinAtar's planes: paddle, ball, trail, bricks, ...).
_PALETTE = np.asarray([(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
                       (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212)], np.uint8)


def _frame(obs, scale: int) -> np.ndarray:
    """An RGB image of an observation: grey frames as they are, object planes one colour each."""
    obs = np.asarray(obs, np.float32)
    if obs.ndim == 3 and obs.shape[-1] in (1, 3, 4) and min(obs.shape[:2]) >= 32:
        image = obs[..., -1] if obs.shape[-1] != 3 else obs.mean(-1)  # the newest grey frame
        rgb = np.repeat((np.clip(image, 0, 1) * 255).astype(np.uint8)[..., None], 3, axis=-1)
        return rgb
    planes = obs.reshape(obs.shape[0], obs.shape[1], -1)
    rgb = np.zeros((*planes.shape[:2], 3), np.uint8)
    for c in range(planes.shape[-1]):
        rgb[planes[..., c] > 0.5] = _PALETTE[c % len(_PALETTE)]
    return np.kron(rgb, np.ones((scale, scale, 1), np.uint8))
