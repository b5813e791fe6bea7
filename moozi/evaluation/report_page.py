"""`moozi report RUN`'s page: RUN/report/report.html, one self-contained file (every picture inlined,
no script or font from the internet) that opens offline, beside the PNGs it shows.

What it shows, top to bottom: how the run ended (in words); the in-training tests and the training
return against updates, env steps or wall-clock minutes (a choice of x-axis); a game the agent played
(board games: move by move, with its root value and top moves at each of its moves) or a test episode
as an animated GIF (one-player games with picture observations); one of its searches drawn (board
games); and every other logged curve (losses, throughput, search and replay statistics).
"""

from __future__ import annotations

import base64
import html
import json
import math
import pathlib

from moozi.errors import MooziError
from moozi.runs.metrics_log import read_metrics
from moozi.runs.report import REPORT_DIR, write_report
from moozi.runs.summary import SUMMARY_FILE, describe

REPORT_PAGE = "report.html"
X_AXES = (("updates", "updates"), ("env_steps", "env steps"), ("minutes", "wall-clock minutes"))

# The main in-training test of each kind of game, with its 95% interval's keys where logged.
_TESTS = (("test_solver_keeps_result", "solver-labelled positions: the greedy move keeps the result"),
          ("test_win_rate", "win rate against the uniformly random player"),
          ("test_return", "test return"))


def write_report_page(run_dir: str | pathlib.Path, *, play: bool = True, seed: int = 0) -> pathlib.Path:
    """Writes the PNG curves (moozi.runs.report), the progress figures, a replay and report.html."""
    run_dir = pathlib.Path(run_dir)
    written = write_report(run_dir)
    out = run_dir / REPORT_DIR
    records = read_metrics(run_dir)
    config = _json(run_dir / "config.json") or {}
    sections = [_ending(run_dir)]
    progress = [_progress_figure(records, config, x, out / f"progress_{x}.png") for x, _ in X_AXES]
    sections.append(_progress_section(progress))
    if play:
        sections.append(_replay_section(run_dir, out, seed))
    sections.append("<h2>Everything logged</h2>" + "".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="{_data_uri(p)}"><figcaption>{html.escape(p.stem)}'
        "</figcaption></figure>" for p in written if p.suffix == ".png"))
    title = f"moozi report: {config.get('game', run_dir.name)} ({config.get('agent', 'muzero')})"
    page = out / REPORT_PAGE
    tmp = out / f".{REPORT_PAGE}.tmp"
    tmp.write_text(_PAGE.format(title=html.escape(title), body="\n".join(s for s in sections if s)), encoding="utf-8")
    tmp.replace(page)
    return page


def _json(path: pathlib.Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _data_uri(path: pathlib.Path) -> str:
    kind = {".png": "image/png", ".gif": "image/gif"}[path.suffix]
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _ending(run_dir: pathlib.Path) -> str:
    summary = _json(run_dir / SUMMARY_FILE)
    if summary is None:
        return "<p>No <code>summary.json</code> yet: the run has not ended (or ended before this version wrote one).</p>"
    return f"<h2>How the run ended</h2><pre>{html.escape(describe(summary))}</pre>"


# --- learning progress against three clocks ---------------------------------------------------
def _progress_figure(records: list[dict], config: dict, x: str, path: pathlib.Path) -> pathlib.Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    episodes = (config.get("train") or {}).get("test_episodes", 1)
    env_steps, rows = 0.0, []
    for record in records:  # the log's order: a test row takes the env steps of the rows before it
        env_steps = float(record.get("env_steps", env_steps))
        rows.append((record, record["step"], env_steps, float(record.get("time", math.nan)) / 60))
    position = {"updates": 1, "env_steps": 2, "minutes": 3}[x]
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    test_ax, train_ax = fig.subplots(1, 2)
    for key, title in _TESTS:
        points = [(r[position], r[0][key], _interval(r[0], key, episodes)) for r in rows if key in r[0]]
        if points:
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            low = [y - p[2][0] for y, p in zip(ys, points)]
            high = [p[2][1] - y for y, p in zip(ys, points)]
            test_ax.errorbar(xs, ys, yerr=[low, high], fmt="o-", ms=3, capsize=2, lw=1)
            test_ax.set_title(f"in-training test: {title}", fontsize=9)
            break
    else:
        test_ax.set_title("no in-training test logged", fontsize=9)
    train = [(r[position], r[0]["episode_return"]) for r in rows if "episode_return" in r[0]
             and math.isfinite(r[0]["episode_return"])]
    if train:
        train_ax.plot([p[0] for p in train], [p[1] for p in train], lw=1, color="tab:green")
    train_ax.set_title("training episodes' mean return", fontsize=9)
    for ax in (test_ax, train_ax):
        ax.set_xlabel(dict(X_AXES)[x], fontsize=9)
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=90)
    return path


def _interval(row: dict, key: str, episodes: int) -> tuple[float, float]:
    if f"{key}_ci_low" in row:
        return row[f"{key}_ci_low"], row[f"{key}_ci_high"]
    half = 1.96 * row.get(f"{key}_std", 0.0) / math.sqrt(max(episodes, 1))
    return row[key] - half, row[key] + half


def _progress_section(paths: list[pathlib.Path]) -> str:
    buttons = "".join(
        f'<label><input type="radio" name="xaxis" value="{x}"{" checked" if i == 0 else ""} '
        f'onchange="showAxis(this.value)"> {label}</label> ' for i, (x, label) in enumerate(X_AXES))
    images = "".join(
        f'<img class="progress" id="progress_{x}" alt="learning progress against {label}" src="{_data_uri(p)}"'
        f'{"" if i == 0 else " hidden"}>' for i, ((x, label), p) in enumerate(zip(X_AXES, paths)))
    return (f"<h2>Learning</h2><p>x-axis: {buttons}</p>{images}<p class=note>Tests with their 95% intervals "
            "(Wilson for rates, normal for mean returns over the test's episodes).</p>")


# --- a game the agent played ------------------------------------------------------------------
def _replay_section(run_dir: pathlib.Path, out: pathlib.Path, seed: int) -> str:
    from moozi.play import load_agent

    try:
        agent = load_agent(run_dir)
    except MooziError as e:
        return f"<h2>A game it played</h2><p>No replay: {html.escape(str(e))}</p>"
    if agent.spec.is_two_player:
        return _board_replay(agent, out, seed)
    return _episode_replay(agent, out, seed)


def _board_replay(agent, out: pathlib.Path, seed: int) -> str:
    from moozi.play.boards import board_svg
    from moozi.evaluation.replays import move_cell, play_board_game, search_figure

    replay = play_board_game(agent, seed=seed)
    (out / "replay.json").write_text(json.dumps({"game": replay.game, "agent_seat": replay.agent_seat,
                                                 "opponent": replay.opponent, "actions": replay.actions,
                                                 "returns": replay.returns}) + "\n", encoding="utf-8")
    rows = []
    for i, move in enumerate(replay.moves):
        picture = (board_svg(move.board, highlight=None) if move.board is not None
                   else f"<pre>{html.escape(move.board_text)}</pre>")
        who = "agent" if move.by_agent else replay.opponent
        thought = ""
        if move.root_value is not None:
            top = ", ".join(f"{html.escape(t.label)} {100 * t.visit_share:.0f}%" for t in move.top_moves)
            thought = f"value {move.root_value:+.2f}; top moves by visit share: {top}"
        rows.append(f"<tr><td>{picture}</td><td>ply {move.ply}: <b>{html.escape(who)}</b> (player {move.player}) "
                    f"plays <b>{html.escape(move.label)}</b><br><span class=note>{thought}</span></td></tr>")
    last = len(replay.moves) - 1
    final = (board_svg(replay.final_board, highlight=move_cell(replay, last)) if replay.final_board is not None
             else f"<pre>{html.escape(replay.final_text)}</pre>")
    rows.append(f"<tr><td>{final}</td><td>final position: {html.escape(replay.result)} "
                f"(returns {replay.returns})</td></tr>")
    searched = [m for m in replay.moves if m.search is not None]
    search_html = ""
    if searched:
        import pyspiel

        game = pyspiel.load_game(replay.game.split(":", 1)[1])
        labels = [game.action_to_string(searched[0].player, a) for a in range(game.num_distinct_actions())]
        figure = search_figure(searched[0], labels, out / "search.png")
        search_html = (f"<h2>The search at one position</h2><p>The agent's first move of the game above: each legal "
                       f"move's prior, share of the root's visits and Q; the chosen move shaded.</p>"
                       f'<img alt="the root\'s children of one search" src="{_data_uri(figure)}">')
    return (f"<h2>A game it played</h2><p>{html.escape(replay.game)}: the agent (player {replay.agent_seat}, greedy "
            f"search) against the uniformly random player: {html.escape(replay.result)} in {len(replay.moves)} moves."
            f"</p><table class=replay>{''.join(rows)}</table>{search_html}")


def _episode_replay(agent, out: pathlib.Path, seed: int) -> str:
    from moozi.evaluation.replays import episode_gif

    h, w = agent.spec.obs_shape[:2]
    if min(h, w) < 4:
        return ("<h2>A test episode</h2><p>No picture: this game's observations are a vector, not a screen "
                "(see the test returns above).</p>")
    gif = out / "episode.gif"
    episode = episode_gif(agent, gif, seed=seed)
    cut = " (cut there)" if episode["cut"] else ""
    return (f"<h2>A test episode</h2><p>Return {episode['episode_return']:.1f} in {episode['steps']} steps{cut}, "
            f"the agent's greedy play (sampled for PPO and IMPALA).</p>"
            f'<img class=episode alt="a test episode, animated" src="{_data_uri(gif)}">')


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
img {{ max-width: 100%; }} img.episode {{ image-rendering: pixelated; width: 360px; }}
figure {{ margin: 1em 0; }} figcaption, .note {{ color: #666; font-size: 0.9em; }}
table.replay td {{ vertical-align: middle; padding: 4px 12px; border-bottom: 1px solid #eee; }}
pre {{ background: #f6f6f6; padding: 0.8em; overflow-x: auto; }}
</style>
<script>
function showAxis(x) {{
  for (const img of document.querySelectorAll("img.progress")) img.hidden = img.id !== "progress_" + x;
}}
</script></head>
<body><h1>{title}</h1>
{body}
</body></html>
"""
