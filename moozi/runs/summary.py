"""How a `moozi train` run ended: `RUN/summary.json` for programs, a few lines of words for people.

The driver hands `write_summary` one flat dict (the counters, the last logged metrics, the stop
reason, the checkpoint and the facts of `Driver._summary_facts`); `describe` turns the same dict
into what a person reads at the end of a run: what was trained, for how long, how strong the
last test says it is (and against what), where the checkpoints are and what to run next.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import uuid
from typing import Any

SUMMARY_FILE = "summary.json"

_STOP_REASONS = {
    "max_minutes": "the time limit (--max-minutes)",
    "max_env_steps": "the env-step limit (--max-env-steps)",
}


def _stop_phrase(reason: str) -> str:
    if reason.startswith("signal "):
        return f"{reason[len('signal '):]} (the last checkpoint was written)"
    return _STOP_REASONS.get(reason, reason)


def write_summary(run_dir: str | os.PathLike, summary: dict[str, Any]) -> pathlib.Path:
    """Writes RUN/summary.json atomically (a crash mid-write leaves the previous one whole)."""
    run_dir = pathlib.Path(run_dir)
    final = run_dir / SUMMARY_FILE
    tmp = run_dir / f".{SUMMARY_FILE}.{uuid.uuid4().hex[:8]}.tmp"
    text = json.dumps(_plain(summary), indent=2, sort_keys=True, default=str) + "\n"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final


def _plain(value: Any) -> Any:
    """JSON-safe copy: numpy scalars become Python numbers, NaN and infinities become None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def describe(summary: dict[str, Any]) -> str:
    """The end-of-train summary in words (what `moozi train` prints unless --json)."""
    run_dir = summary.get("run_dir", "RUN")
    game = summary.get("game", summary.get("game_arg", "?"))
    agent = summary.get("agent", "?")
    minutes = float(summary.get("elapsed_seconds", 0.0)) / 60
    reason = summary.get("stop_reason")
    lines = [
        f"Trained {game} with {agent} for {_minutes(minutes)}"
        + (f", stopped by {_stop_phrase(reason)}." if reason else "."),
        f"  {int(summary.get('updates', 0)):,} updates, {int(summary.get('env_steps', 0)):,} env steps, "
        f"{int(summary.get('episodes', 0)):,} episodes.",
        f"  Last test: {describe_test(summary)}",
    ]
    if summary.get("best_checkpoint"):
        lines.append(f"  Best checkpoint:   {summary['best_checkpoint']}")
    if summary.get("checkpoint"):
        lines.append(f"  Latest checkpoint: {summary['checkpoint']}")
    lines.append("Next:")
    if summary.get("two_player") and _played_in_batch(game):
        # No OpenSpiel game behind it (pgx:backgammon): evaluation's own opponents, no human play.
        opponent = "pipcount" if game == "pgx:backgammon" else "random"
        commands = [(f"moozi eval {run_dir} --opponent {opponent} --games 100", f"strength against {opponent}")]
    elif summary.get("two_player"):
        commands = [(f"moozi eval {run_dir} --opponent mcts:100 --games 100", "strength against a search opponent"),
                    (f"moozi play {run_dir}", "play it yourself")]
    else:
        commands = [(f"moozi eval {run_dir} --episodes 100 --max-steps 2000", "mean return with an interval"),
                    (f"moozi play {run_dir}", "watch it play")]
    commands += [(f"moozi report {run_dir}", "learning curves, a game it played, its search"),
                 (f"moozi train {summary.get('game_arg', game)} --run-dir {run_dir} --resume", "train on")]
    width = max(len(command) for command, _ in commands)
    lines += [f"  {command.ljust(width)}   # {what}" for command, what in commands]
    return "\n".join(lines)


def _played_in_batch(game: str) -> bool:
    """A two-player JAX-native game without an OpenSpiel twin: `moozi eval` plays it in a batch."""
    from moozi.envs.twins import openspiel_twin

    return game.startswith("pgx:") and openspiel_twin(game) is None


def describe_test(summary: dict[str, Any]) -> str:
    """The last in-training test in one phrase, saying what it was measured against."""
    test = summary.get("last_test")
    if not test:
        return "none yet (no test ran before the run stopped; see train.test_every_updates)."
    at = f" at update {int(test['update']):,}" if "update" in test else ""
    episodes = summary.get("test_episodes")
    if "test_solver_keeps_result" in test:
        keeps = test["test_solver_keeps_result"]
        low, high = test.get("test_solver_keeps_result_ci_low"), test.get("test_solver_keeps_result_ci_high")
        return (f"keeps the solver's result in {100 * keeps:.0f}% of the labelled positions"
                f"{_interval(low, high, percent=True)}{at}.")
    if "test_win_rate" in test:
        win, draw, loss = (test.get(k, 0.0) for k in ("test_win_rate", "test_draw_rate", "test_loss_rate"))
        low, high = test.get("test_win_rate_ci_low"), test.get("test_win_rate_ci_high")
        games = f"{episodes} games" if episodes else "games"
        return (f"against the uniformly random player over {games}: won {100 * win:.0f}%"
                f"{_interval(low, high, percent=True)}, drew {100 * draw:.0f}%, lost {100 * loss:.0f}%{at}.")
    if "test_return" in test:
        mean = test["test_return"]
        cap = summary.get("test_max_steps")
        count = f"{episodes} episodes" if episodes else "episodes"
        capped = f", each capped at {cap} steps" if cap else ""
        cut = int(test.get("test_cut_episodes", 0) or 0)
        cut_note = f" ({cut} reached the cap)" if cut else ""
        return f"mean return {mean:.2f} over {count}{capped}{cut_note}{at}."
    return "ran, but logged no return or win rate."


def _interval(low: Any, high: Any, *, percent: bool) -> str:
    if low is None or high is None:
        return ""
    if percent:
        return f" (95% interval {100 * low:.0f}-{100 * high:.0f}%)"
    return f" (95% interval {low:.2f}-{high:.2f})"


def _minutes(minutes: float) -> str:
    if minutes < 1:
        return f"{60 * minutes:.0f} s"
    if minutes < 120:
        return f"{minutes:.1f} min"
    return f"{minutes / 60:.1f} h"
