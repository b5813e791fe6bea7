"""Learning curves of `bench/learning.py` runs in one PNG: return against wall-clock minutes and
against env steps, one row per game, one colour per agent.

    python bench/plot_learning.py RESULT.json [RESULT.json ...] --out bench/results/minatar.png [--table]

Each RESULT.json holds the JSON object `bench/learning.py` prints last. Lines: the in-training tests
of runs through `moozi train`'s driver (MuZero, and PPO/IMPALA on the host path: `train.test_episodes`
episodes, read from the run's metrics.jsonl); the training episodes of the Anakin PPO and IMPALA runs
(a running mean where there are more than 100 points). Points with error bars: the marks (100
episodes each, 95% bootstrap interval), and where an agent has several seeds on a game, their mean with a 95% bootstrap interval over the seeds
(black-edged diamonds). `--table` prints the same numbers as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from bench.learning import minatar_run_name  # noqa: E402

GAMES = ("breakout", "asterix", "freeway", "seaquest", "space_invaders")
# "-host": the run went through `moozi train`'s driver on MinAtar's own envs, not the gymnax twin's Anakin loop.
COLOURS = {"muzero": "tab:blue", "ppo": "tab:orange", "impala": "tab:green", "ppo-host": "tab:red",
           "impala-host": "tab:olive"}
# The MinAtar paper's DQN and AC(lambda) at 5M frames, read off its learning curves (bench/peers/published.json).
PAPER = {"breakout": (10.0, 17.6), "asterix": (17.2, 19.3), "freeway": (50.2, 47.5), "seaquest": (20.3, 15.7),
         "space_invaders": (43.0, 186.0)}


def muzero_curve(metrics_path: pathlib.Path) -> list[tuple[float, int, float]]:
    """(minutes, env steps, test return) of each in-training test of a MuZero run."""
    points, env_steps = [], 0
    for line in metrics_path.read_text().splitlines():
        row = json.loads(line)
        env_steps = int(row.get("env_steps", env_steps))
        if "test_return" in row:
            points.append((row["time"] / 60, env_steps, row["test_return"]))
    return points


def runs_of(report: dict) -> list[tuple[str, str, dict, list]]:
    """(game, agent, run, curve) for every run in one bench/learning.py report."""
    out = []
    for key, runs in report.items():
        game, _, agent = key.partition(":")
        if game not in GAMES or not isinstance(runs, list):
            continue
        for run in runs:
            agent = agent or "muzero"
            if agent == "muzero" or agent.endswith("-host"):
                metrics = pathlib.Path(report["work_dir"]) / minatar_run_name(game, run["seed"], agent) / "metrics.jsonl"
                curve = muzero_curve(metrics) if metrics.exists() else []
            else:
                curve = [tuple(p) for p in run.get("curve", [])]
            out.append((game, agent, run, curve))
    return out


def plot(reports: list[dict], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for report in reports for r in runs_of(report)]
    games = [g for g in GAMES if any(r[0] == g for r in runs)]
    fig, axes = plt.subplots(len(games), 2, figsize=(11, 3.2 * len(games)), squeeze=False)
    for row, game in enumerate(games):
        for game_, agent, run, curve in runs:
            if game_ != game:
                continue
            colour = COLOURS.get(agent, "black")
            label = f"{agent} seed {run['seed']}"
            for col, x_index in ((0, 0), (1, 1)):
                ax = axes[row][col]
                if curve:
                    xs, ys = smoothed([p[x_index] for p in curve], [p[2] for p in curve])
                    ax.plot(xs, ys, color=colour, alpha=0.5, lw=1)
                xs = [m["minutes"] if col == 0 else m["env_steps"] for m in run["marks"]]
                ys = [m["mean_return"] for m in run["marks"]]
                lows = [m["mean_return"] - (m["bootstrap_ci"] or [m["mean_return"]] * 2)[0] for m in run["marks"]]
                highs = [(m["bootstrap_ci"] or [m["mean_return"]] * 2)[1] - m["mean_return"] for m in run["marks"]]
                ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o", color=colour, capsize=3,
                            label=label if col == 0 else None)
        labelled = set()
        for agent, minutes, mean, (low, high), seeds, _ in seed_means(runs, game):
            if seeds < 2:
                continue
            for col, x in ((0, minutes[0]), (1, minutes[1])):
                label = f"{agent}, mean of {seeds} seeds" if col == 0 and agent not in labelled else None
                axes[row][col].errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="D", ms=7,
                                        color=COLOURS.get(agent, "black"), mec="black", capsize=4, label=label)
            labelled.add(agent)
        dqn, ac = PAPER[game]
        for ax in axes[row]:
            ax.axhline(dqn, color="grey", ls="--", lw=1, label="paper DQN, 5M frames")
            if ac <= 2 * max([dqn] + [m["mean_return"] for g, _, r, _ in runs if g == game for m in r["marks"]]):
                ax.axhline(ac, color="grey", ls=":", lw=1, label="paper AC(λ), 5M frames")
        axes[row][0].set_ylabel(f"{game}\nmean return")
        axes[row][0].set_xlabel("training minutes (one core)")
        axes[row][1].set_xlabel("env steps")
        axes[row][1].set_xscale("log")
        axes[row][0].legend(loc="upper left", fontsize=7, framealpha=0.9, ncol=2)
        for ax in axes[row]:
            ax.grid(alpha=0.3)
            low, high = ax.get_ylim()
            ax.set_ylim(low, low + 1.6 * (high - low))  # headroom: the legend sits above the curves
    fig.suptitle("MinAtar: lines = in-training tests (MuZero, *-host) / training episodes (PPO, IMPALA on gymnax); "
                 "points = 100-episode marks, 95% bootstrap intervals", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def smoothed(xs: list[float], ys: list[float], points: int = 100) -> tuple[list[float], list[float]]:
    """A curve of more than `points` points as the running mean of about len / points of them (the
    fast agents log thousands of noisy training-episode means; a line through all is a solid band)."""
    import numpy as np

    window = len(ys) // points
    if window < 2:
        return xs, ys
    kernel = np.ones(window) / window
    return list(np.asarray(xs)[window - 1:]), list(np.convolve(ys, kernel, mode="valid"))


def seed_means(runs, game: str):
    """(agent, (minutes, env steps), mean over seeds, 95% bootstrap interval over seeds, seeds, marks) per
    agent and mark index of `game`; a single seed's interval is its own episodes' interval."""
    import numpy as np

    out = []
    for agent in COLOURS:
        mine = [r for g, a, r, _ in runs if g == game and a == agent]
        if not mine:
            continue
        for index in range(min(len(r["marks"]) for r in mine)):
            marks = [r["marks"][index] for r in mine]
            values = np.asarray([m["mean_return"] for m in marks], float)
            if len(values) == 1:
                interval = tuple(marks[0]["bootstrap_ci"] or (values[0], values[0]))
            else:
                rng = np.random.default_rng(0)
                means = values[rng.integers(0, len(values), (10_000, len(values)))].mean(axis=1)
                interval = (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))
            at = (float(np.mean([m["minutes"] for m in marks])), float(np.mean([m["env_steps"] for m in marks])))
            out.append((agent, at, float(values.mean()), interval, len(values), marks))
    return out


def table(reports: list[dict]) -> str:
    runs = [r for report in reports for r in runs_of(report)]
    lines = ["| game | agent | minutes | seeds | mean return [95% interval] | per seed | env steps |",
             "|---|---|---|---|---|---|---|"]
    for game in GAMES:
        for agent, (minutes, steps), mean, (low, high), seeds, marks in seed_means(runs, game):
            per_seed = ", ".join(f"{m['mean_return']:.2f}" for m in marks)
            lines.append(f"| {game} | {agent} | {minutes:.1f} | {seeds} | {mean:.2f} [{low:.2f}, {high:.2f}] | "
                         f"{per_seed} | {steps / 1e6:.2f}M |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results/minatar.png"))
    parser.add_argument("--table", action="store_true", help="also print a Markdown table of the marks")
    args = parser.parse_args(argv)
    reports = []
    for path in args.results:
        text = path.read_text().strip().splitlines()
        reports.append(json.loads(text[-1]))
    plot(reports, args.out)
    if args.table:
        print(table(reports))
    print(json.dumps({"benchmark": "plot_learning", "out": str(args.out), "runs": len(reports)}))


if __name__ == "__main__":
    main()
