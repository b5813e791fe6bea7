"""Writes docs/results.md and the README's results table from the result files in bench/results/.

    python bench/results_page.py           # rewrite docs/results.md and the table in README.md
    python bench/results_page.py --check   # exit 1, naming what differs, when either is out of date

Every figure on the page comes from a file: the JSON objects the benchmarks print last, saved in
bench/results/ (its subfolders ablations/ and superseded/ are not read), and the published figures
in bench/peers/published.json. A game with no file gets no section and no README row; a file no
adapter knows stops the script, so a new kind of result gets an adapter here before it is shown.
tests/test_results_page.py runs the check.

A row is the preset as it is now unless it says otherwise (preset_notes): where its runs played with
other simulations than today's preset (`build_config(game).planner`), where a file's recorded config
differs from today's preset at a key the preset sets, and where a file predates a change to its preset
that it does not record (EARLIER_PRESET), the row's result says so.

Every file also says where its numbers came from (bench/provenance.py): `commit`, `tree_clean`,
`command`, `machine`, and for a training result each run's resolved `config`. Both modes refuse a
file without them, except those written before the rule (provenance.LEGACY_FILES, marked † on the page).

One adapter per kind of result file (the keys each one reads):

- `bench/learning.py` reports (`"benchmark": "learning"`, `matmul_gflops`, and the machine's speed
  during training as `matmul_gflops_training` where it was measured apart), one list of runs per game:
  - `tic_tac_toe`: runs of `seed`, `minutes_to_no_losses_vs_minimax` (null: not within the budget),
    `curve` [{`minutes`, `losses_vs_minimax`}], `at_target_vs_random` {`wins`, `draws`, `losses`}.
  - `connect_four`: runs of `seed`, `agent`, `marks` [{`minutes`, `updates`, `env_steps`,
    `simulations`, `mcts:1000` {`wins`, `draws`, `losses`, `games`}, `solver` {`games`, `per_seat`
    [{`wins`, `draws`, `losses`}]}, `positions` {`keeps_result` {`all`}, `random_keeps_result` {`all`}}}].
  - `go9`: runs as below.
  - `breakout`, `asterix`, `freeway`, `seaquest`, `space_invaders` (MuZero) and `GAME:ppo`,
    `GAME:impala`, `GAME:ppo-host`, `GAME:impala-host`: runs of `seed`, `marks` [{`minutes`, `updates`,
    `env_steps`, `mean_return`, `bootstrap_ci`, `episodes`, `max_steps`, optional
    `sampled_mean_return`, `sampled_bootstrap_ci`}]; optional `resumed_after_kill` at the top.
- go9, either as a `go9` run of a `bench/learning.py` report or as one object of its own, e.g.
  bench/results/2026-11-27-go9-alphazero-seed0.json:

      {"game": "go9", "agent": "alphazero", "seed": 0, "minutes": 60, "matmul_gflops": 120.5,
       "vs_random": {"wins": 38, "draws": 0, "losses": 2, "games": 40},
       "vs_gnugo_level1": {"wins": 1, "games": 10, "margins": [-12.5, 3.5, ...]}}

  Required: `game`, `agent`, `seed`, `minutes` (training minutes of the checkpoint played),
  `matmul_gflops` (here or in the report around it), `vs_random` {`wins`, `draws`, `losses`, `games`}.
  Optional: `updates`, `env_steps`, and the GNU Go match as `vs_gnugo_level1` or as `vs_gnugo` with
  its `engine` command line ({`wins`, `games`, optional `draws`, and `margins`: each game's area-score
  margin from the agent's side, positive when it won, null for a game not scored).
- The Atari hour (`"benchmark": "atari_pong_hour"`): `summary` (the run's RUN/summary.json),
  `episode_returns` [[minutes, mean return of the log window's training episodes], ...], optional
  `matmul_gflops`.
- `python -m bench` summaries (`machine`, `metrics`, `load_average_before`, `seconds`).
- `bench/anakin.py` output saved as text (.txt): its last line, the JSON object, `anakin_vs_host`,
  `anakin_vs_host_median`, `pairs` {PAIR: {`host_ms_per_batch_step`, `host_outside_acting_ms_per_batch_step`}}.
- `bench/gpu.py` (`"benchmark": "gpu"`): `device` {`kind`, `platform`, `jax_version`}, `tiny`, `dtype`,
  `matmul_gflops`, `runs` {NAME: {`env_steps_per_s`, `steady_env_steps_per_s`, `updates_per_s`,
  `steady_updates_per_s`, `compile_seconds`}}, optional `core` {`batch`, `acting_searches_per_s`,
  `train_steps_per_s`}.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import pathlib
import re
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import provenance  # noqa: E402
from moozi.evaluation.intervals import bootstrap_mean_interval, wilson_interval  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PUBLISHED = ROOT / "bench" / "peers" / "published.json"
PAGE = ROOT / "docs" / "results.md"
README = ROOT / "README.md"
TABLE_START = "<!-- results table: written by bench/results_page.py from bench/results/ -->"
TABLE_END = "<!-- end of the results table -->"

MINATAR = ("breakout", "space_invaders", "asterix", "seaquest", "freeway")
MINATAR_NAMES = {"breakout": "Breakout", "space_invaders": "Space Invaders", "asterix": "Asterix",
                 "seaquest": "Seaquest", "freeway": "Freeway"}
AGENTS = ("muzero", "ppo", "impala", "ppo-host", "impala-host")
AGENT_NAMES = {"muzero": "MuZero", "alphazero": "AlphaZero mode", "stochastic_muzero": "Stochastic MuZero",
               "ppo": "PPO", "impala": "IMPALA",
               "ppo-host": "PPO, host path", "impala-host": "IMPALA, host path"}
# connect_four's planner.play_simulations (moozi/config/presets.py): the count `load_agent` plays with.
C4_PLAY_SIMULATIONS = 100
# The preset's agent of each game (moozi/config/presets.py); the README's row shows that agent.
PRESET_AGENT = {"tic_tac_toe": "muzero", "connect_four": "muzero", "go9": "alphazero", **{g: "muzero" for g in MINATAR},
                "2048": "stochastic_muzero", "backgammon": "stochastic_muzero"}
TILES = ("256", "512", "1024", "2048")  # the 2048 tiles whose shares the page shows
# Result files measured under a preset that has changed since, written before files recorded their
# resolved config (a file that records it is compared with today's preset instead, see preset_notes):
# {file: (the preset's name on the page, what changed since, with the dates of the changes)}. The other
# rows' files without a config were checked against the history of moozi/config/presets.py: each ran the
# preset as it is now, or passed the keys it has since taken with --set (their `overrides`).
EARLIER_PRESET = {
    "2026-11-25-atari-pong-60min-seed0.json": (
        "Atari",
        "2026-12-04: the Q-range floor, the prior's guards (value weight 1, entropy bonus 0.1 with a floor) and "
        "a cosine learning-rate schedule over the run; 2026-12-05: AdamW weight decay in place of the loss's L2 term"),
}
# The investigations behind the presets' settings (docs/experiments/), linked at the page's end.
EXPERIMENTS = [
    ("What limits Asterix, Seaquest and Freeway", "experiments/2026-11-25-minatar-asterix-seaquest-freeway.md"),
    ("One MinAtar preset for every game", "experiments/2026-11-27-one-minatar-preset.md"),
    ("MuZero, PPO and IMPALA on MinAtar", "experiments/2026-11-25-minatar-agents.md"),
    ("Atari Pong, one hour on one core", "experiments/2026-11-25-atari-pong-hour.md"),
    ("Measurements without a result file", "experiments/2026-11-22-measurements-without-result-files.md"),
    ("Connect Four with a learned model: the fixes", "experiments/2026-11-23-connect-four-learned-model-fixes.md"),
    ("Connect Four presets: play-time search, schedules, unroll", "experiments/2026-11-27-connect-four-presets.md"),
    ("2048 with Stochastic MuZero", "experiments/2026-11-27-2048-stochastic-muzero.md"),
    ("Backgammon with Stochastic MuZero", "experiments/2026-11-28-backgammon-stochastic-muzero.md"),
]


@dataclasses.dataclass
class Results:
    tic_tac_toe: list = dataclasses.field(default_factory=list)  # (file, report, run)
    connect_four: list = dataclasses.field(default_factory=list)  # (file, report, run, mark)
    go9: list = dataclasses.field(default_factory=list)  # (file, report, run)
    minatar: list = dataclasses.field(default_factory=list)  # (file, report, game, agent, run, mark)
    atari_pong: list = dataclasses.field(default_factory=list)  # (file, report)
    bench_summary: list = dataclasses.field(default_factory=list)  # (file, report)
    anakin: list = dataclasses.field(default_factory=list)  # (file, report)
    gpu: list = dataclasses.field(default_factory=list)  # (file, report)
    chance: list = dataclasses.field(default_factory=list)  # (file, report, game, run): 2048, backgammon
    shipped: list = dataclasses.field(default_factory=list)  # (file, report): bench/ship_agent.py


def read_files(directory: pathlib.Path | None = None) -> list[tuple[str, dict]]:
    """(file name, JSON object) of every result file directly in `directory` (default: bench/results/)."""
    directory = RESULTS if directory is None else directory
    files = []
    for path in sorted(directory.iterdir()):
        if path.suffix == ".json":
            files.append((path.name, json.loads(path.read_text())))
        elif path.suffix == ".txt":
            # A benchmark's printed output: its table, then its JSON object on the last line.
            last = path.read_text().strip().splitlines()[-1]
            try:
                files.append((path.name, json.loads(last)))
            except json.JSONDecodeError:
                raise SystemExit(f"{path}: the last line is not a benchmark's JSON object") from None
    return files


def collect(files: list[tuple[str, dict]]) -> Results:
    results = Results()
    for name, report in files:
        if report.get("benchmark") == "atari_pong_hour":
            results.atari_pong.append((name, report))
        elif report.get("benchmark") == "anakin":
            results.anakin.append((name, report))
        elif report.get("benchmark") == "gpu":
            results.gpu.append((name, report))
        elif report.get("benchmark") == "ship_agent":
            results.shipped.append((name, report))
        elif "machine" in report and "metrics" in report:
            results.bench_summary.append((name, report))
        elif report.get("game") == "go9":
            results.go9.append((name, report, report))
        elif report.get("benchmark") == "learning":
            _collect_learning(name, report, results)
        else:
            raise SystemExit(f"bench/results/{name}: no adapter in bench/results_page.py reads this kind of file")
    return results


def _collect_learning(name: str, report: dict, results: Results) -> None:
    games = 0
    for key, runs in report.items():
        if not isinstance(runs, list) or key in ("matmul_gflops_training", "in_training_tests"):
            continue
        game, _, agent = key.partition(":")
        games += 1
        for run in runs:
            if key == "tic_tac_toe":
                results.tic_tac_toe.append((name, report, run))
            elif key == "connect_four":
                results.connect_four.extend((name, report, run, mark) for mark in run["marks"])
            elif key == "go9":
                results.go9.append((name, report, run))
            elif key in ("2048", "2048:random", "backgammon"):
                results.chance.append((name, report, key, run))
            elif game in MINATAR and (agent or "muzero") in AGENTS:
                # A run stopped before an env-step mark records the mark as not reached: nothing to show.
                results.minatar.extend((name, report, game, agent or "muzero", run, mark) for mark in run["marks"]
                                       if mark.get("reached", True))
            else:
                raise SystemExit(f"bench/results/{name}: no adapter in bench/results_page.py reads its {key!r} runs")
    if not games:
        raise SystemExit(f"bench/results/{name}: a bench/learning.py report without runs")


# --- formatting ---------------------------------------------------------------------------------

def num(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def interval(pair, digits: int = 2) -> str:
    return f"[{pair[0]:.{digits}f}, {pair[1]:.{digits}f}]" if pair else "—"


def pooled_wilson(results: list[dict], what: str, seeds: int | None = None) -> str:
    """The 95% Wilson interval of the win rate over every game of `results` together, named as such;
    `seeds`: how many distinct seeds the runs have, where a seed was run more than once."""
    wins, games = sum(r["wins"] for r in results), sum(r["games"] for r in results)
    low, high = wilson_interval(wins, games)
    over = f"{len(results)} seeds" if seeds in (None, len(results)) else f"{len(results)} runs of {seeds} seeds"
    pooled = f"{games} games pooled over {over}" if len(results) > 1 else f"{games} games"
    return f"{what}{low:.0%}-{high:.0%} (95% Wilson, {pooled})"


def seed_range(values: list[float], digits: int = 1) -> str:
    """The lowest and highest of the seeds' figures: a range, not an interval."""
    return f"range of {len(values)} seeds {num(min(values), digits)}-{num(max(values), digits)}"


def millions(x: int) -> str:
    return f"{x / 1e6:.1f}M"


def count(x) -> str:
    return "—" if x is None else f"{x:,}"


def gflops(report: dict, run: dict | None = None) -> str:
    """The machine's matmul speed while the run trained: measured apart where the file says so."""
    run = run or {}
    training = run.get("matmul_gflops_training", report.get("matmul_gflops_training"))
    if training:
        low, high = min(training), max(training)
        return num(low, 1) if low == high else f"{num(low, 1)}-{num(high, 1)}"
    value = run.get("matmul_gflops", report.get("matmul_gflops"))
    return "not recorded" if value is None else num(value, 1)


def file_link(name: str) -> str:
    """A link to a result file; † marks one written before files recorded their commit and config."""
    mark = " †" if name in provenance.LEGACY_FILES else ""
    return f"[{name}](../bench/results/{name}){mark}"


def wdl(row: dict) -> str:
    return f"{row['wins']}-{row.get('draws', 0)}-{row['losses']}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def mark_minute(minutes: float) -> int:
    """The mark a measurement was asked for (30.19 minutes of training is the 30-minute mark)."""
    return int(round(minutes))


def file_date(name: str) -> str:
    """The date a result file's name begins with (YYYY-MM-DD), or its name where it has none."""
    match = re.match(r"\d{4}-\d{2}-\d{2}", name)
    return match.group(0) if match else name


# --- today's preset ---------------------------------------------------------------------------------
# A row shows the preset as it is now unless it says otherwise: what a measurement did not share with
# today's preset (moozi/config/presets.py, read through moozi.config) is named in the row.

@functools.cache
def preset_play_simulations(game: str) -> int:
    """The simulations today's preset plays with (`load_agent`): planner.play_simulations, else num_simulations."""
    from moozi.config import build_config

    planner = build_config(game).planner
    return planner.play_simulations if planner.play_simulations is not None else planner.num_simulations


@functools.cache
def _preset_values(game: str, agent: str) -> tuple[tuple[str, str], ...]:
    """(dotted key, JSON of today's resolved value) for every key today's preset sets for `agent`."""
    from moozi.config import build_config, config_to_dict, preset_overrides

    resolved = config_to_dict(build_config(game, overrides={"agent": agent}))
    return tuple((key, json.dumps(_config_value(resolved, key), sort_keys=True))
                 for key in preset_overrides(game, agent))


_ABSENT = object()


def _config_value(config: dict, key: str):
    value = config
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def config_differences(game: str, agent: str, config: dict) -> list[str]:
    """'KEY VALUE (the preset now: VALUE)' for each key of today's preset that a recorded config does
    not share ('KEY unset' where the config predates the key)."""
    differences = []
    for key, now in _preset_values(game, agent):
        value = _config_value(config, key)
        if value is _ABSENT:
            differences.append(f"{key} unset (the preset now: {now})")
        elif json.dumps(value, sort_keys=True) != now:
            differences.append(f"{key} {json.dumps(value, sort_keys=True)} (the preset now: {now})")
    return differences


def preset_notes(game: str, agent: str, entries: list[tuple[str, dict, dict, int | None]]) -> list[str]:
    """What a row's measurements did not share with today's preset of `game`, each said once.

    `entries`: (file name, report, run, simulations the run was measured at, None where not recorded).
    - simulations at play other than the preset's: 'at 12 simulations; the preset plays 25';
    - a file that records its resolved config: each key of today's preset it does not share;
    - a file in EARLIER_PRESET: 'measured under an earlier Atari preset (2026-11-25)'.
    """
    notes = []
    measured = sorted({sims for *_, sims in entries if sims is not None})
    if measured and measured != [preset_play_simulations(game)]:
        notes.append(f"at {' / '.join(str(s) for s in measured)} simulations; "
                     f"the preset plays {preset_play_simulations(game)}")
    for name, report, run, _ in entries:
        config = run.get("config", report.get("config"))
        if isinstance(config, dict):
            differences = config_differences(game, agent, config)
            if differences:
                shown = "; ".join(differences[:3]) + (f"; {len(differences) - 3} more" if len(differences) > 3 else "")
                notes.append(f"not today's preset: {shown}")
        if name in EARLIER_PRESET:
            notes.append(f"measured under an earlier {EARLIER_PRESET[name][0]} preset ({file_date(name)})")
    return list(dict.fromkeys(notes))


def with_notes(result: str, notes: list[str]) -> str:
    return "; ".join([result, *notes])


# --- sections -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Row:
    """One game's line in the summary table (the README's, and this page's first)."""
    game: str
    anchor: str
    agent: str
    result: str
    seeds: str
    interval: str
    minutes: str
    published: str


def tic_tac_toe_section(results: Results) -> tuple[list[str], Row | None]:
    runs = results.tic_tac_toe
    if not runs:
        return [], None
    lines = ["## Tic-tac-toe", "",
             "`python bench/learning.py --games tic_tac_toe`: the preset trains with a checkpoint every 15 s;",
             "the checkpoints are then played in order against `minimax` (100 games, both seats), and the row",
             "gives the training minutes of the first that lost none (compiling included), then that one's",
             "result against a random player (wins-draws-losses of 100). Losses to `minimax` at each checkpoint",
             "are listed as minutes: losses. The minutes scale with the machine's speed (matmul GFLOP/s), so the",
             "summary row gives the fastest machine's seeds and, where the files hold a slower one, the slowest's.", ""]
    rows = []
    for name, report, run in runs:
        minutes = run["minutes_to_no_losses_vs_minimax"]
        budget = max(point["minutes"] for point in run["curve"])
        vs_random = run.get("at_target_vs_random")
        curve = ", ".join(f"{p['minutes']:.2f}: {p['losses_vs_minimax']}" for p in run["curve"])
        rows.append([str(run["seed"]), num(minutes) if minutes is not None else f"none within {num(budget)}",
                     wdl(vs_random) if vs_random else "—", curve, gflops(report, run), file_link(name)])
    lines += table(["seed", "minutes to no losses vs `minimax`", "then vs random", "losses vs `minimax` by minute",
                    "matmul GFLOP/s", "file"], rows)
    # The summary row: the fastest machine's runs (one file: its seeds, on one machine), and beside them
    # the slowest machine's, since the minutes scale with the machine's speed several-fold.
    by_file: dict = {}
    for name, report, run in runs:
        by_file.setdefault(name, (report, []))[1].append(run)
    ordered = sorted(by_file.items(), key=lambda item: (_gflops_value(item[1][0], item[1][1][0]) or 0.0,
                                                         item[1][0].get("started_at", "")))
    fastest, slowest = ordered[-1], ordered[0]
    shown = [fastest] if slowest[0] == fastest[0] else [fastest, slowest]
    parts, budgets, seeds = [], [], []
    for first, (name, (report, file_runs)) in zip((True, False), shown):
        reached = sorted(run["minutes_to_no_losses_vs_minimax"] for run in file_runs
                         if run["minutes_to_no_losses_vs_minimax"] is not None)
        budget = max(max(p["minutes"] for p in run["curve"]) for run in file_runs)
        speed = f"at {gflops(report, file_runs[0])} GFLOP/s"
        within = f"({len(reached)} of {len(file_runs)} seeds within {num(budget)} min)"
        after = f"after {' / '.join(num(m) for m in reached)} min"
        if first:
            parts.append(f"loses none of 100 games to `minimax` {after} {speed} {within}" if reached else
                         f"no seed loses none of 100 games to `minimax` within {num(budget)} min {speed}")
        else:
            parts.append(f"{speed} {after} {within}" if reached else f"{speed} no seed within {num(budget)} min")
        budgets.append(num(budget, 1))
        seeds.append(str(len(file_runs)))
    notes = preset_notes("tic_tac_toe", PRESET_AGENT["tic_tac_toe"],
                         [(name, report, run, None) for name, (report, file_runs) in shown for run in file_runs])
    row = Row("Tic-tac-toe", "tic-tac-toe", "MuZero", with_notes("; ".join(parts), notes), "; ".join(seeds), "—",
              "; ".join(budgets), "—")
    return lines, row


def _gflops_value(report: dict, run: dict) -> float | None:
    """The machine's matmul speed as a number (the lowest where it was measured during training)."""
    training = run.get("matmul_gflops_training", report.get("matmul_gflops_training"))
    if training:
        return min(training)
    return run.get("matmul_gflops", report.get("matmul_gflops"))


def connect_four_section(results: Results) -> tuple[list[str], Row | None]:
    marks = results.connect_four
    if not marks:
        return [], None
    lines = ["## Connect Four", "",
             "`python bench/learning.py --games connect_four [--c4-agent alphazero]`: after training, the best",
             "checkpoint (what `load_agent` plays) searches with each number of play-time simulations against",
             "`mcts:1000` (OpenSpiel's MCTS with 1,000 simulations, both seats) and the perfect `solver`, and is",
             "scored on the solver-labelled positions ([board games](board_games.md)): the share of positions where",
             "its move keeps the game's result, beside a random mover's share. The preset plays with",
             f"{C4_PLAY_SIMULATIONS} simulations. Win rates with their 95% Wilson interval.", ""]
    rows = []
    for name, report, run, mark in sorted(marks, key=lambda m: (m[2]["agent"] != "muzero", m[2]["seed"], m[3]["simulations"])):
        versus = mark["mcts:1000"]
        solver = sum(seat["wins"] for seat in mark["solver"]["per_seat"])
        positions = mark["positions"]
        rows.append([AGENT_NAMES[run["agent"]], str(run["seed"]),
                     "best" if mark["mark"] == "best" else f"at {mark_minute(mark['mark'])} min",
                     num(mark["minutes"], 1), count(mark["updates"]),
                     count(mark["env_steps"]), str(mark["simulations"]),
                     f"{wdl(versus)} of {versus['games']}",
                     interval(wilson_interval(versus["wins"], versus["games"])),
                     f"{solver} of {mark['solver']['games']}",
                     f"{positions['keeps_result']['all']:.3f} ({positions['random_keeps_result']['all']:.3f})",
                     gflops(report, run), file_link(name)])
    lines += table(["agent", "seed", "checkpoint", "minutes", "updates", "env steps", "simulations at play",
                    "vs `mcts:1000` (W-D-L)", "win rate, 95%", "wins vs `solver`",
                    "positions: keeps the result (random mover)", "matmul GFLOP/s", "file"], rows)
    # The headline: the checkpoint `load_agent` plays (the best one, where a file measured it; else the
    # last minute mark) at the preset's play-time simulations, one per seed.
    played = [m for m in marks if m[3]["simulations"] == C4_PLAY_SIMULATIONS]
    per_run: dict = {}
    for m in played:
        key = (m[2]["agent"], m[2]["seed"])
        rank = (m[3]["mark"] == "best", 0 if m[3]["mark"] == "best" else m[3]["mark"])
        if key not in per_run or rank > per_run[key][0]:
            per_run[key] = (rank, m)
    played = [m for _, m in per_run.values()]
    headline = fresh_first([m for m in played if m[2]["agent"] == PRESET_AGENT["connect_four"]], lambda m: m[1])
    if not headline:
        return lines, None
    def per_seed(marks_: list) -> str:
        seeds = sorted(marks_, key=lambda m: m[2]["seed"])
        fresh = "fresh " if all(m[1].get("fresh_seed") for m in seeds) else ""
        return (f"{fresh}seed{'s' if len(seeds) > 1 else ''} {', '.join(str(m[2]['seed']) for m in seeds)}: "
                + "; ".join(f"{wdl(m[3]['mcts:1000'])}, {m[3]['positions']['keeps_result']['all']:.3f}" for m in seeds))

    games = headline[0][3]["mcts:1000"]["games"]
    result = f"W-D-L in {games} games vs `mcts:1000`, positions kept: {per_seed(headline)}"
    others = [m for m in played if m[2]["agent"] != PRESET_AGENT["connect_four"]]
    for agent in sorted({m[2]["agent"] for m in others}):
        result += f" (`--set agent={agent}`, {per_seed([m for m in others if m[2]['agent'] == agent])})"
    result = with_notes(result, preset_notes("connect_four", PRESET_AGENT["connect_four"],
                                             [(m[0], m[1], m[2], m[3]["simulations"]) for m in headline]))
    row = Row("Connect Four", "connect-four", "MuZero", result, str(len({m[2]["seed"] for m in headline})),
              pooled_wilson([m[3]["mcts:1000"] for m in headline], "win rate "),
              num(max(m[3]["minutes"] for m in headline), 1), "—")
    return lines, row


def _tile_shares(run: dict) -> list[str]:
    shares = run.get("tile_shares", {})
    return [f"{shares.get(tile, 0.0):.0%}" for tile in TILES]


def chance_sections(results: Results) -> tuple[list[str], list[Row]]:
    """2048 and backgammon (docs/stochastic.md): Stochastic MuZero, the preset's agent, beside MuZero."""
    lines, rows = [], []
    games = [entry for entry in results.chance if entry[2] in ("2048", "2048:random")]
    if games:
        lines += ["## 2048", "",
                  "`python bench/learning.py --games 2048 [--chance-random]`: each agent trains the `2048` preset (the",
                  "agent differs, and where a file's `overrides` say so the simulations: a Stochastic MuZero simulation",
                  "costs two network steps, so 12 of them cost about what MuZero's 25 do); the checkpoint `load_agent`",
                  "plays then plays 100 episodes on env seeds seed·1000 + i: the mean score with its 95% bootstrap",
                  "interval and the share of games whose largest tile reached each size. A random mover plays the",
                  "same seeds. Runs of one seed were trained side by side, one core each (`taskset`), so the matmul",
                  "speed is of one core; details in [docs/stochastic.md](stochastic.md).", ""]
        table_rows = []
        for name, report, key, run in sorted(games, key=lambda g: (g[2] != "2048", g[3].get("agent", ""), g[3]["seed"])):
            agent = "random mover" if key == "2048:random" else AGENT_NAMES[run["agent"]]
            table_rows.append([agent, str(run["seed"]), num(run.get("minutes", 0), 1) if "minutes" in run else "—",
                               count(run.get("updates")), count(run.get("env_steps")), str(run.get("simulations") or "—"),
                               f"{run['mean_return']:,.0f} {interval(run['bootstrap_ci'], 0)}", *_tile_shares(run),
                               gflops(report, run), file_link(name)])
        lines += table(["agent", "seed", "minutes", "updates", "env steps", "simulations at play", "mean score, 95%",
                        *(f"≥ {tile}" for tile in TILES), "matmul GFLOP/s", "file"], table_rows) + [""]
        preset = [g for g in games if g[2] == "2048" and g[3]["agent"] == PRESET_AGENT["2048"]]
        if preset:
            scores = [g[3]["mean_return"] for g in preset]
            others = [g for g in games if g[2] == "2048" and g[3]["agent"] != PRESET_AGENT["2048"]]
            result = f"mean score {sum(scores) / len(scores):,.0f} over 100 games, 1024 tile in " + \
                     f"{sum(g[3].get('tile_shares', {}).get('1024', 0.0) for g in preset) / len(preset):.0%}"
            if others:
                result += f" (MuZero{_simulations_apart(others, preset)}: " \
                          f"{sum(g[3]['mean_return'] for g in others) / len(others):,.0f})"
            result = with_notes(result, preset_notes("2048", PRESET_AGENT["2048"],
                                                     [(n, r, run, run.get("simulations")) for n, r, _, run in preset]))
            rows.append(Row("2048", "2048", AGENT_NAMES[PRESET_AGENT["2048"]], result, str(len(preset)),
                            _pooled_bootstrap([g[3] for g in preset], "games"), num(preset[0][3]["minutes"], 1), "—"))
    matches = [entry for entry in results.chance if entry[2] == "backgammon"]
    if matches:
        lines += ["## Backgammon", "",
                  "`python bench/learning.py --games backgammon`: each agent trains the `backgammon` preset (pgx's",
                  "backgammon, one step per die); the checkpoint `load_agent` plays then plays 100 games, both seats,",
                  "against a random mover and against `pipcount`, a greedy pip-count bot (docs/stochastic.md). Win",
                  "rates with their 95% Wilson interval.", ""]
        table_rows = []
        for name, report, _, run in sorted(matches, key=lambda g: (g[3]["agent"], g[3]["seed"])):
            table_rows.append([AGENT_NAMES[run["agent"]], str(run["seed"]), num(run["minutes"], 1),
                               count(run.get("updates")), count(run.get("env_steps")), str(run.get("simulations") or "—"),
                               *(f"{wdl(run[o])} of {run[o]['games']} {interval(run[o]['win_rate_ci'])}"
                                 for o in ("random", "pipcount")),
                               gflops(report, run), file_link(name)])
        lines += table(["agent", "seed", "minutes", "updates", "env steps", "simulations at play",
                        "vs random (W-D-L), win rate 95%", "vs `pipcount` (W-D-L), win rate 95%",
                        "matmul GFLOP/s", "file"], table_rows) + [""]
        preset = [g for g in matches if g[3]["agent"] == PRESET_AGENT["backgammon"]]
        if preset:
            runs = [g[3] for g in preset]

            def mean_rate(opponent, of=runs):
                return sum(run[opponent]["win_rate"] for run in of) / len(of)

            games = runs[0]["random"]["games"]
            result = f"{mean_rate('random'):.0%} of {games} games vs random, {mean_rate('pipcount'):.0%} vs `pipcount`"
            others = [g[3] for g in matches if g[3]["agent"] != PRESET_AGENT["backgammon"]]
            if others:
                apart = _simulations_apart([g for g in matches if g[3]["agent"] != PRESET_AGENT["backgammon"]], preset)
                result += f" (MuZero{apart}: {mean_rate('random', others):.0%} vs random)"
            result = with_notes(result, preset_notes("backgammon", PRESET_AGENT["backgammon"],
                                                     [(n, r, run, run.get("simulations")) for n, r, _, run in preset]))
            rows.append(Row("Backgammon", "backgammon", AGENT_NAMES[PRESET_AGENT["backgammon"]], result,
                            str(len(runs)), pooled_wilson([run["random"] for run in runs], "vs random "),
                            num(runs[0]["minutes"], 1), "—"))
    return lines, rows


def _simulations_apart(others: list, preset: list) -> str:
    """' at N simulations' where the compared agent's runs searched with other counts than the preset agent's."""
    theirs = sorted({g[3].get("simulations") for g in others} - {None})
    ours = sorted({g[3].get("simulations") for g in preset} - {None})
    return f" at {' / '.join(str(s) for s in theirs)} simulations" if theirs and theirs != ours else ""


def _pooled_bootstrap(runs: list[dict], unit: str) -> str:
    """The 95% bootstrap interval of the mean over every episode of `runs` together (a range of the seeds'
    means where a file lacks its episodes' returns)."""
    if not all(run.get("returns") for run in runs):
        return seed_range([run["mean_return"] for run in runs], 0)
    returns = [r for run in runs for r in run["returns"]]
    low, high = bootstrap_mean_interval(returns)
    pooled = f"{len(returns)} {unit} pooled over {len(runs)} seeds" if len(runs) > 1 else f"{len(returns)} {unit}"
    return f"{low:,.0f}-{high:,.0f} (95% bootstrap, {pooled})"


def _gnugo(run: dict) -> tuple[str, dict] | None:
    if "vs_gnugo_level1" in run:
        return "GNU Go level 1", run["vs_gnugo_level1"]
    if "vs_gnugo" in run:
        level = re.search(r"--level (\d+)", run["vs_gnugo"].get("engine", ""))
        return ("GNU Go level " + level.group(1)) if level else "GNU Go", run["vs_gnugo"]
    return None


def _area(match: dict) -> str:
    """'own area in N of M; median margin X' where the match recorded each game's own area, else '—'."""
    areas = match.get("own_area")
    if not areas:
        return "—"
    scored = [m for m in match.get("margins", []) if m is not None]
    median = f"; median margin {statistics.median(scored):+g}" if scored else ""
    return f"own area in {sum(a > 0 for a in areas)} of {len(areas)}{median}"


def shipped_section(results: Results) -> list[str]:
    """The agents measured for shipping (bench/ship_agent.py): each opponent with the search and with
    the network alone, the solver and the labelled positions where the game has them, time per move."""
    if not results.shipped:
        return []
    lines = ["## Shipped agents", "",
             "`python bench/ship_agent.py RUN --export`: the checkpoint `load_agent` plays, measured at its play-time",
             "simulations and with the network alone (one simulation: the policy's top move), then shipped in",
             "moozi/agents/ (`moozi agents`, `moozi play GAME`). W-D-L, win rates with their 95% Wilson interval.", ""]
    rows = []
    for name, report in sorted(results.shipped, key=lambda f: f[0]):
        for opponent, r in report["with_search"].items():
            alone = report["network_alone"][opponent]
            solver = report.get("solver")
            rows.append([report["game"], AGENT_NAMES.get(report["agent"], report["agent"]),
                         num(report["checkpoint"]["minutes"], 1), count(report["checkpoint"]["updates"]),
                         f"`{opponent}`", f"{wdl(r)} {interval(r['win_rate_ci'])}",
                         f"{wdl(alone)} {interval(alone['win_rate_ci'])}",
                         f"{report['positions']['keeps_result']['all']:.3f}" if "positions" in report else "—",
                         (f"{solver['first_player']['wins']} of {solver['first_player']['games']}" if solver else "—"),
                         f"{report['seconds_per_move']:.3f} ({report['simulations']} sims)",
                         num(report["machine"]["matmul_gflops_at_start"], 1), file_link(name)])
    lines += table(["game", "agent", "minutes", "updates", "opponent", "with its search", "network alone",
                    "positions kept", "first-player wins vs solver", "s per move", "matmul GFLOP/s", "file"], rows)
    return lines + [""]


def go9_section(results: Results) -> tuple[list[str], Row | None]:
    runs = results.go9
    if not runs:
        return [], None
    lines = ["## Go 9×9", "",
             "The go9 preset (9×9, komi 7.5) trained for the minutes given; its checkpoint then plays a random",
             "mover (both seats) and GNU Go (colours alternating, Chinese rules, `--capture-all-dead`, scored by",
             "the referee's Tromp–Taylor area count; docs/go.md). Margins are from the agent's side: positive when",
             "it won by that many points. Win rates with their 95% Wilson interval. The GNU Go games' lengths (fewest",
             "and most moves) and in how many of them the agent passed before GNU Go had passed; where recorded, in",
             "how many the agent ended with area of its own, and the median margin.", ""]
    rows = []
    for name, report, run in runs:
        vs_random = run["vs_random"]
        gnugo = _gnugo(run)
        area = "—"
        if gnugo:
            opponent, match = gnugo
            margins = ", ".join("not scored" if m is None else f"{m:+g}" for m in match.get("margins", []))
            versus = f"{opponent}: {match['wins']} of {match['games']}" + (f" ({margins})" if margins else "")
            moves = match.get("moves") or []
            length = f"{min(moves)}-{max(moves)}" if moves else "—"
            passed_first = match.get("agent_passed_first")
            conduct = f"{length}; {'—' if passed_first is None else passed_first} of {match['games']}"
            area = _area(match)
        else:
            versus = conduct = "not played"
        rows.append([AGENT_NAMES[run["agent"]], str(run["seed"]), num(run["minutes"], 1), count(run.get("updates")),
                     count(run.get("env_steps")), f"{wdl(vs_random)} of {vs_random['games']}",
                     interval(wilson_interval(vs_random["wins"], vs_random["games"])), versus, conduct, area,
                     gflops(report, run), file_link(name)])
    lines += table(["agent", "seed", "minutes", "updates", "env steps", "vs random (W-D-L)", "win rate, 95%",
                    "vs GNU Go: wins (margins)", "those games' moves; passed before GNU Go", "area and median margin",
                    "matmul GFLOP/s", "file"], rows)
    # The summary row: every run of today's preset (a recorded config that shares each key the preset
    # sets), pooled; where none records its config, the newest run of the preset's agent (files are
    # read in name order, dated first).
    agent_runs = [r for r in runs if r[2]["agent"] == PRESET_AGENT["go9"]] or runs
    todays = [r for r in agent_runs if isinstance(r[2].get("config", r[1].get("config")), dict)
              and not config_differences("go9", r[2]["agent"], r[2].get("config", r[1].get("config")))]
    chosen = todays or agent_runs[-1:]
    played = [run for _, _, run in chosen]
    games = sum(run["vs_random"]["games"] for run in played)
    wins = sum(run["vs_random"]["wins"] for run in played)
    draws = sum(run["vs_random"].get("draws", 0) for run in played)
    result = f"{wins}-{draws}-{games - wins - draws} in {games} games vs random"
    gnugo = [_gnugo(run) for run in played]
    if all(gnugo):
        pooled = {"wins": sum(m["wins"] for _, m in gnugo), "games": sum(m["games"] for _, m in gnugo),
                  "margins": [x for _, m in gnugo for x in m.get("margins", [])],
                  "own_area": [x for _, m in gnugo for x in (m.get("own_area") or [])]}
        result += f"; {gnugo[0][0]}: {pooled['wins']} wins in {pooled['games']}"
        if all(m.get("own_area") for _, m in gnugo):
            result += f", {_area(pooled)}"
    entries = [(name, report, run, run.get("simulations", run["vs_random"].get("simulations")))
               for name, report, run in chosen]
    result = with_notes(result, preset_notes("go9", played[-1]["agent"], entries))
    seeds = sorted({run["seed"] for run in played})
    low, high = min(run["minutes"] for run in played), max(run["minutes"] for run in played)
    row = Row("Go 9×9", "go-99", AGENT_NAMES[played[-1]["agent"]], result, str(len(seeds)),
              pooled_wilson([run["vs_random"] for run in played], "win rate vs random ", seeds=len(seeds)),
              num(low, 1) if num(low, 1) == num(high, 1) else f"{num(low, 1)}-{num(high, 1)}", "—")
    return lines, row


def minatar_section(results: Results, published: dict) -> tuple[list[str], list[Row]]:
    marks = results.minatar
    if not marks:
        return [], []
    paper = published["minatar"]
    episodes = " or ".join(str(e) for e in sorted({m[5]["episodes"] for m in marks}))
    lines = ["## MinAtar", "",
             "`python bench/learning.py --games GAME [--agents ppo|impala|ppo-host]`, one core per run (`taskset`),",
             "two runs side by side. At each mark the newest checkpoint (MuZero, PPO host path) or the policy then",
             f"(PPO, IMPALA on the gymnax twin) plays {episodes} episodes (sticky actions 0.1, each cut at the max steps",
             "given): the mean return with its 95% percentile-bootstrap interval over the episodes. MuZero plays",
             "greedily (\"sampled\": as in training, root noise kept), PPO and IMPALA sample their policy. Every",
             "game trains MuZero with the one MinAtar preset (moozi/config/presets.py; its runs passed the same",
             "keys by `--set` before it became the preset, candidate v24 in",
             "[One MinAtar preset](experiments/2026-11-27-one-minatar-preset.md)). Freeway's episodes last",
             "2,500 steps, so a cap of 2,000 cuts every one.", "",
             f"Published: {paper['source']}", ""]
    ppo = published.get("minatar_ppo", {})
    if ppo:
        lines += ["PPO references, at their own budgets (each game's section gives the figures; minutes of ours are",
                  "not env steps of theirs: compare at equal env steps where the table has them):", ""]
        lines += [f"- {name}: {ref['source']}; {ref['setup']}." for name, ref in ppo.items()]
        lines += ["- ours: MinAtar's own envs (sticky actions 0.1, the minimal action set), MuZero played greedily, each",
                  "  evaluation episode cut at the max steps given in its row.", ""]
    summary_rows = []
    for game in MINATAR:
        game_marks = [m for m in marks if m[2] == game]
        if not game_marks:
            continue
        figures = paper["games"][game]
        published_text = " / ".join(f"{k} {v:g}" for k, v in figures.items())
        lines += [f"### {MINATAR_NAMES[game]}", "", f"Published at 5M frames: {published_text}.", ""]
        refs = [f"{name} {ref['games'][game]} at {millions(ref['env_steps'])} env steps" for name, ref in ppo.items()
                if game in ref["games"]]
        if refs:
            lines += [f"PPO: {'; '.join(refs)} (setups above).", ""]
        rows = []
        order = sorted(game_marks, key=lambda m: (AGENTS.index(m[3]), m[4]["seed"], m[5]["minutes"]))
        for name, report, _, agent, run, mark in order:
            sampled = "—"
            if "sampled_mean_return" in mark:
                sampled = f"{num(mark['sampled_mean_return'])} {interval(mark.get('sampled_bootstrap_ci'))}"
            notes = "resumed after a kill" if report.get("resumed_after_kill") else ""
            minutes = num(mark["minutes"], 1) + (" (best)" if mark.get("mark") == "best" else
                                                 f" (at {millions(mark['env_step_mark'])} steps)" if "env_step_mark" in mark else "")
            rows.append([AGENT_NAMES[agent], str(run["seed"]), minutes, count(mark.get("updates")),
                         millions(mark["env_steps"]), f"**{num(mark['mean_return'])}**", interval(mark["bootstrap_ci"]),
                         sampled, str(mark["max_steps"]), gflops(report, run), file_link(name) + (f" ({notes})" if notes else "")])
        lines += table(["agent", "seed", "minutes", "updates", "env steps", "mean return", "95% interval",
                        "sampled", "max steps", "matmul GFLOP/s", "file"], rows)
        seeded = _over_seeds(game_marks)
        if seeded:
            lines += ["", "Over seeds (the mean of the seeds' marks; their range, the lowest and highest seed). \"best\" is the",
                      "checkpoint `load_agent` and `moozi eval` play, the best of the run's in-training tests; the",
                      "summary row keeps to the last minute mark, the newest checkpoint then:", ""]
            lines += table(["agent", "mark", "seeds", "mean", "range of the seeds"],
                           [[AGENT_NAMES[agent], minute if isinstance(minute, str) else f"{minute} min", str(len(values)),
                             f"**{num(statistics.mean(values))}**", interval((min(values), max(values)))]
                            for (agent, minute), values in seeded.items()])
        lines.append("")
        summary_rows.append(_minatar_row(game, game_marks, published_text))
    lines += ["![MinAtar: MuZero, PPO and IMPALA against wall-clock minutes and env steps]"
              "(../bench/results/2026-11-25-minatar-agents.png)", "",
              "The figure: `python bench/plot_learning.py` over the result files of 2026-11-25 and 2026-11-26; its",
              "MuZero curves are the per-game presets' runs that the one preset replaced (bench/results/superseded/).", ""]
    return lines, [r for r in summary_rows if r]


def _over_seeds(game_marks: list) -> dict:
    """{(agent, mark minute or "best"): [each seed's mean return]} where two or more seeds reached the mark."""
    by_mark: dict = {}
    for _, _, _, agent, run, mark in game_marks:
        key = ("best" if mark.get("mark") == "best" else f"{millions(mark['env_step_mark'])} steps"
               if "env_step_mark" in mark else mark_minute(mark["minutes"]))
        by_mark.setdefault((agent, key), {})[run["seed"]] = mark["mean_return"]
    ordered = sorted(by_mark.items(), key=lambda item: (AGENTS.index(item[0][0]), isinstance(item[0][1], str),
                                                        str(item[0][1]) if isinstance(item[0][1], str) else item[0][1]))
    return {key: list(seeds.values()) for key, seeds in ordered if len(seeds) >= 2}


def fresh_first(entries: list, report_of) -> list:
    """The entries from fresh seeds (`bench/learning.py --fresh-seed`: seeds that chose no preset setting)
    where there are any, else all: a headline is not measured on the runs that chose its preset."""
    fresh = [e for e in entries if report_of(e).get("fresh_seed")]
    return fresh or entries


def _minute_marks(game_marks: list) -> list:
    """The marks taken at a minute, without the runs' best checkpoints (which stopped at any minute) and
    the env-step marks."""
    return [m for m in game_marks if m[5].get("mark") != "best" and "env_step_mark" not in m[5]]


def _minatar_row(game: str, game_marks: list, published_text: str) -> Row | None:
    preset = fresh_first([m for m in _minute_marks(game_marks) if m[3] == PRESET_AGENT[game]], lambda m: m[1])
    if not preset:
        return None
    last = max(mark_minute(m[5]["minutes"]) for m in preset)
    at_last = [m for m in preset if mark_minute(m[5]["minutes"]) == last]
    values = [m[5]["mean_return"] for m in at_last]
    if len(at_last) == 1:
        mark = at_last[0][5]
        result = f"mean return {num(values[0], 1)}"
        spread = f"{interval(mark['bootstrap_ci'], 1)} (95% bootstrap, {mark.get('episodes', 100)} episodes)"
    else:
        result = f"mean return {num(statistics.mean(values), 1)}"
        spread = seed_range(values)
    if all(m[1].get("fresh_seed") for m in at_last):
        result += f" (fresh seed{'s' if len(at_last) > 1 else ''})"
    result = with_notes(result, preset_notes(game, PRESET_AGENT[game], [(m[0], m[1], m[4], None) for m in at_last]))
    return Row(f"MinAtar {MINATAR_NAMES[game]}", MINATAR_NAMES[game].lower().replace(" ", "-"),
               AGENT_NAMES[PRESET_AGENT[game]], result, str(len(at_last)), spread, str(last),
               published_text + " (5M frames)")


def atari_pong_section(results: Results, published: dict) -> tuple[list[str], Row | None]:
    if not results.atari_pong:
        return [], None
    reference = published["atari_pong"]
    lines = ["## Atari Pong", "",
             "`moozi train atari:Pong --max-minutes 60` with the defaults (the Atari preset of the file's date), one",
             "core (`taskset`) beside other runs. The run's in-training test (every 1,000 updates) was not reached, so",
             "the figure is the training episodes' mean return over the last 20 minutes (the mean of the log windows'",
             f"means). {reference['source']}: random play {reference['random']:g}, the worst score -21.", ""]
    earlier = [name for name, _ in results.atari_pong if name in EARLIER_PRESET]
    for name in earlier:
        label, changes = EARLIER_PRESET[name]
        none_today = len(earlier) == len(results.atari_pong)
        lines += [f"Measured under an earlier {label} preset ({file_date(name)}, [{name}](../bench/results/{name})):",
                  f"the preset has changed since ({changes})."
                  + (" No result file holds a run of today's preset." if none_today else ""), ""]
    rows, row = [], None
    for name, report in results.atari_pong:
        summary, windows = report["summary"], report["episode_returns"]
        end = windows[-1][0]
        last = [value for minutes, value in windows if minutes > end - 20]
        mean = statistics.mean(last)
        minutes = summary["elapsed_seconds"] / 60
        seed = re.search(r"-seed(\d+)", name)
        rows.append([seed.group(1) if seed else "—", num(minutes, 1), count(summary["updates"]), count(summary["env_steps"]),
                     count(summary["episodes"]), str(summary["tests"]), f"**{num(mean)}** ({len(last)} windows)",
                     gflops(report), file_link(name)])
        result = with_notes(f"training episodes {num(mean, 1)} (last 20 min)",
                            preset_notes("atari:Pong", "muzero", [(name, report, summary, None)]))
        row = Row("Atari Pong", "atari-pong", "MuZero", result, "1", "—",
                  num(minutes, 1), f"random play {reference['random']:g}")
    lines += table(["seed", "minutes", "updates", "env steps", "episodes", "tests", "training return, last 20 min",
                    "matmul GFLOP/s", "file"], rows)
    return lines + [""], row


def _leaves(prefix: str, value) -> list[tuple[str, float]]:
    if isinstance(value, dict):
        return [leaf for key, inner in value.items() for leaf in _leaves(f"{prefix} {key}".strip(), inner)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [(prefix, value)]
    return []


def speed_section(results: Results) -> list[str]:
    if not results.bench_summary and not results.anakin and not results.gpu:
        return []
    lines = ["## Speed", "",
             "`python -m bench --quick`, `bench/anakin.py` and `bench/gpu.py` (docs/gpu.md); bench/README.md defines",
             "each metric. Ratios measured inside one run (ours over a reference) hold on a loaded machine; absolute",
             "rates do not.", ""]
    machines, rows = [], []
    for name, report in results.bench_summary:
        machine = report["machine"]
        speed = report["benchmarks"]["selfplay"]["result"]["compute_efficiency"]["matmul_flops_per_s"] / 1e9
        machines.append([file_link(name), f"{machine['cpu_count']} CPUs ({machine['cpu_model']}), JAX {machine['jax_version']}",
                         f"{report['load_average_before']:.2f}", num(speed, 1)])
        metrics = {k: v for k, v in report["metrics"].items() if k != "targets_met"}
        rows += [[f"`{metric}`", f"{value:.4g}", name] for metric, value in _leaves("", metrics)]
    for name, report in results.anakin:
        machines.append([file_link(name), f"{report['cpu_count']} CPUs", f"{report['load_average_1min']:.2f}", gflops(report)])
        for pair, detail in report["pairs"].items():
            rows.append([f"`anakin_vs_host {pair}` (best round; median)",
                         f"{detail['anakin_vs_host']:.4g}; {detail['anakin_vs_host_median']:.4g}", name])
            rows.append([f"`host_outside_acting_ms_per_batch_step {pair}` of `host_ms_per_batch_step`",
                         f"{detail['host_outside_acting_ms_per_batch_step']:.3g} of {detail['host_ms_per_batch_step']:.3g}", name])
    for name, report in results.gpu:
        device = report["device"]
        size = "tiny sizes" if report["tiny"] else "full sizes"
        machines.append([file_link(name), f"{device['kind']} ({device['platform']}), JAX {device['jax_version']}, "
                         f"{size}, {report['dtype']}", "not recorded", num(report["matmul_gflops"], 1)])
        for run_name, run in report["runs"].items():
            for what in ("env_steps", "updates"):
                steady = run[f"steady_{what}_per_s"]
                rows.append([f"`gpu.py {run_name} {what}_per_s` (whole run; steady)",
                             f"{run[f'{what}_per_s']:.4g}; {'—' if steady is None else f'{steady:.4g}'}", name])
            rows.append([f"`gpu.py {run_name} compile_seconds`", f"{run['compile_seconds']:.3g}", name])
        if "core" in report:
            core = report["core"]
            rows.append([f"`gpu.py core acting_searches_per_s` (B = {core['batch']})",
                         f"{core['acting_searches_per_s']:.4g}", name])
            rows.append([f"`gpu.py core train_steps_per_s` (B = {core['batch']})", f"{core['train_steps_per_s']:.4g}", name])
    lines += table(["file", "machine", "load average", "matmul GFLOP/s"], machines) + [""]
    lines += table(["metric", "value", "file"], rows)
    return lines + [""]


def summary_table(rows: list[Row], link_prefix: str) -> list[str]:
    return table(["game", "agent", "result", "seeds", "interval", "minutes", "published", "details"],
                 [[r.game, r.agent, r.result, r.seeds, r.interval, r.minutes, r.published,
                   f"[details]({link_prefix}#{r.anchor})"] for r in rows])


def build(files: list[tuple[str, dict]], published: dict) -> tuple[str, list[str]]:
    """(docs/results.md, the README's table lines) from the result files and the published figures."""
    results = collect(files)
    sections, rows = [], []
    for lines, row in (tic_tac_toe_section(results), connect_four_section(results), go9_section(results)):
        sections += lines + ([""] if lines else [])
        rows += [row] if row else []
    chance_lines, chance_rows = chance_sections(results)
    sections += chance_lines
    rows += chance_rows
    minatar_lines, minatar_rows = minatar_section(results, published)
    sections += minatar_lines
    rows += minatar_rows
    pong_lines, pong_row = atari_pong_section(results, published)
    sections += pong_lines
    rows += [pong_row] if pong_row else []
    sections += shipped_section(results)
    sections += speed_section(results)
    investigations = ["## Investigations", "",
                      "How the presets' settings were chosen, with the runs that were not adopted "
                      "(bench/results/ablations/, bench/results/superseded/):", ""]
    investigations += [f"- [{title}]({path})" for title, path in EXPERIMENTS]
    page = ["# Results", "",
            "<!-- Written by bench/results_page.py from bench/results/: edit the files or the script, not this page. -->", "",
            "Every figure here is read from a result file in bench/results/ (linked in each row) or, for published",
            "figures, bench/peers/published.json. `python bench/results_page.py` rewrites this page and the README's",
            "table; `tests/test_results_page.py` fails when they differ from the files.", "",
            "- **result**: each game's preset as it is now (moozi/config/presets.py), unless the row says what",
            "  differed: simulations at play other than the preset's, a key the file's recorded config does not share",
            "  with today's preset, or a preset that has changed since the file was written.",
            "- **minutes**: wall-clock training time at the mark, compiling included.",
            "- **†**: a file written before result files recorded the commit, the command and the resolved",
            "  config; the code is that of main on the file's date. Every newer file records all three, and",
            "  `python bench/results_page.py --check` refuses one that does not (bench/provenance.py).",
            "- **matmul GFLOP/s**: a float32 2048×2048 matmul timed by the benchmark on its machine, under the load",
            "  it then had. The machines differed several-fold; compare minutes only between rows of similar speed.",
            "- **intervals**: each says what it is. Within one run, a win rate's 95% Wilson interval and a mean",
            "  return's 95% percentile bootstrap over its episodes (10,000 resamples). Over seeds whose games or",
            "  episodes are pooled, the same interval over all of them together (it speaks for the games, not for",
            "  how much a new seed may differ). Otherwise a **range of N seeds**: the lowest and highest seed's",
            "  figure, which is not a confidence interval (the range of three seeds holds the median over all",
            "  seeds only 75% of the time: 1 - 2 × 0.5³).", "",
            "## Summary", ""]
    page += summary_table(rows, "") + [""] + sections + investigations
    readme_table = [TABLE_START] + summary_table(rows, "docs/results.md") + [TABLE_END]
    return "\n".join(page).rstrip("\n") + "\n", readme_table


def _with_table(readme: str, table_lines: list[str]) -> str:
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md: the results table's markers are missing ({TABLE_START} ... {TABLE_END})")
    return readme[:start] + "\n".join(table_lines) + readme[end + len(TABLE_END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when docs/results.md or the README's table is out of date")
    args = parser.parse_args(argv)
    files = read_files()
    untraceable = [problem for name, report in files for problem in provenance.problems(name, report)]
    if untraceable:
        print("\n".join(untraceable), file=sys.stderr)
        print("a result file must record where its numbers came from (bench/provenance.py)", file=sys.stderr)
        return 1
    page, table_lines = build(files, json.loads(PUBLISHED.read_text()))
    readme_now = README.read_text()
    readme = _with_table(readme_now, table_lines)
    wanted = {PAGE: page, README: readme}
    if args.check:
        stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
        for path in stale:
            now = path.read_text().splitlines() if path.exists() else []
            diff = difflib.unified_diff(now, wanted[path].splitlines(), str(path.relative_to(ROOT)),
                                        "from bench/results/", lineterm="", n=0)
            print("\n".join(list(diff)[:40]))
        if stale:
            print("out of date: " + ", ".join(str(p.relative_to(ROOT)) for p in stale)
                  + "; run python bench/results_page.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in wanted.items():
        path.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)} and the table in {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
