"""docs/results.md and the README's results table are what bench/results/ gives, and the docs' links resolve.

No training: the page is rebuilt from the stored result files in well under a second.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re

import pytest

from bench import results_page

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*/*.md"))]


def _published() -> dict:
    return json.loads(results_page.PUBLISHED.read_text())


def test_the_results_page_and_the_readme_table_are_what_the_result_files_give(capsys):
    # Fails when a figure on either has no file or differs from its file: run
    # `python bench/results_page.py` after adding or changing a result file.
    assert results_page.main(["--check"]) == 0, capsys.readouterr()


def test_a_changed_figure_changes_the_page():
    files = results_page.read_files()
    page, table = results_page.build(files, _published())
    changed = copy.deepcopy(files)
    name, report = next((n, r) for n, r in changed if "freeway" in r)
    minute_marks = [m for m in report["freeway"][0]["marks"] if m.get("mark") != "best"]  # the table's
    minute_marks[-1]["mean_return"] = 1.5
    new_page, new_table = results_page.build(changed, _published())
    assert "**1.50**" in new_page and "**1.50**" not in page

    def freeway_row(rows):
        return next(line for line in rows if line.startswith("| MinAtar Freeway |"))

    assert freeway_row(new_table) != freeway_row(table)  # one seed's figure, or the mean over the seeds'
    assert ("mean return 1.5 " in freeway_row(new_table)) == ("| 1 |" in freeway_row(table))


GO9_FLAT = {"game": "go9", "agent": "alphazero", "seed": 0, "minutes": 60, "matmul_gflops": 120.5,
            "vs_random": {"wins": 38, "draws": 0, "losses": 2, "games": 40},
            "vs_gnugo_level1": {"wins": 1, "games": 10, "margins": [-12.5, 3.5, None]}}


def test_a_go9_file_adds_its_section_and_its_row_and_without_one_there_is_neither():
    files = [(name, data) for name, data in results_page.read_files() if "go9" not in name]
    page, table = results_page.build(files, _published())
    assert "Go 9×9" not in page and "Go 9×9" not in "\n".join(table)
    page, table = results_page.build([*files, ("2026-11-27-go9-alphazero-seed0.json", GO9_FLAT)], _published())
    assert "## Go 9×9" in page
    assert "| 38-0-2 of 40 |" in page and "GNU Go level 1: 1 of 10 (-12.5, +3.5, not scored) | —; — of 10 |" in page
    row = next(line for line in table if line.startswith("| Go 9×9 |"))
    assert "AlphaZero mode" in row and "38-0-2 in 40 games vs random; GNU Go level 1: 1 wins in 10" in row
    assert "(docs/results.md#go-99)" in row


def test_a_go9_run_in_a_learning_report_reads_the_same():
    report = {"benchmark": "learning", "matmul_gflops": 99.0,
              "go9": [{**{k: v for k, v in GO9_FLAT.items() if k not in ("vs_gnugo_level1", "matmul_gflops")},
                       "vs_gnugo": {"engine": "/usr/games/gnugo --mode gtp --level 1",
                                    "wins": 1, "draws": 0, "games": 10, "margins": [-12.5, 3.5, None],
                                    "moves": [80, 61, 120], "agent_passed_first": 1}}]}
    page, _ = results_page.build([*results_page.read_files(), ("go9.json", report)], _published())
    assert "GNU Go level 1: 1 of 10 (-12.5, +3.5, not scored) | 61-120; 1 of 10 | — | 99.0 |" in page


def test_a_go9_file_with_areas_names_them_and_the_newest_run_leads_the_row():
    files = [(name, data) for name, data in results_page.read_files() if "go9" not in name]
    newer = {**GO9_FLAT, "seed": 3, "vs_gnugo_level1": {"wins": 2, "games": 4, "margins": [-30.5, 4.5, -12.5, 20.5],
                                                        "own_area": [12, 30, 0, 41], "moves": [90, 100, 110, 120],
                                                        "agent_passed_first": 0}}
    page, table = results_page.build([*files, ("2026-11-27-go9-alphazero-seed0.json", GO9_FLAT),
                                      ("2026-12-06-go9-alphazero-seed3.json", newer)], _published())
    assert "| 90-120; 0 of 4 | own area in 3 of 4; median margin -4 |" in page
    row = next(line for line in table if line.startswith("| Go 9×9 |"))
    assert "GNU Go level 1: 2 wins in 4, own area in 3 of 4; median margin -4" in row


def test_a_result_file_without_its_commit_is_refused(tmp_path, monkeypatch, capsys):
    from bench import provenance

    traced = [(name, report) for name, report in results_page.read_files()
              if name not in provenance.LEGACY_FILES and report.get("benchmark") == "go_strength"]
    assert traced, "bench/results/ holds a go_strength file that records its provenance"
    name, report = traced[0]
    assert provenance.problems(name, report) == []
    assert report["config"]["game"] == "pgx:go_9x9" and report["command"].split()[1] == "bench/go_strength.py"
    stripped = {key: value for key, value in report.items() if key != "commit"}
    (tmp_path / name).write_text(json.dumps(stripped))
    monkeypatch.setattr(results_page, "RESULTS", tmp_path)
    assert results_page.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert f"bench/results/{name}: does not record commit" in err
    # The writer refuses it too, and so a file without its config.
    assert results_page.main([]) == 1
    (tmp_path / name).write_text(json.dumps({key: value for key, value in report.items() if key != "config"}))
    assert results_page.main(["--check"]) == 1
    assert "does not record the resolved config" in capsys.readouterr().err


def test_legacy_files_are_marked_on_the_page():
    from bench import provenance

    page = results_page.PAGE.read_text()
    legacy = sorted(provenance.LEGACY_FILES)
    assert "[2026-11-29-connect_four-muzero-seed0.json](../bench/results/2026-11-29-connect_four-muzero-seed0.json) †" in page
    assert "[2026-12-06-go9-alphazero-signals-seed0.json](../bench/results/2026-12-06-go9-alphazero-signals-seed0.json) |" in page
    assert all((results_page.RESULTS / name).exists() for name in legacy), "a legacy name without its file"


def test_a_file_no_adapter_reads_is_refused():
    with pytest.raises(SystemExit, match="no adapter"):
        results_page.build([("2026-11-28-something.json", {"benchmark": "something"})], _published())
    with pytest.raises(SystemExit, match="no adapter"):
        results_page.build([("x.json", {"benchmark": "learning", "pong": [{"seed": 0}]})], _published())


def _slug(heading: str) -> str:
    # GitHub's anchors: lower case, punctuation dropped, spaces to hyphens.
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _outside_code(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def _anchors(path: pathlib.Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _outside_code(path.read_text()):
        if match := re.match(r"#{1,6}\s+(.*)", line):
            slug = _slug(match.group(1))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(doc):
    broken = []
    for line in _outside_code(doc.read_text()):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path_part, _, anchor = target.partition("#")
            path = (doc.parent / path_part).resolve() if path_part else doc
            if not path.is_file():
                broken.append(target)
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: links to nothing: {broken}"


def test_the_readme_stays_short():
    text = (ROOT / "README.md").read_text()
    assert len(text.split()) <= 1500
    assert max(len(line) for line in text.splitlines()) <= 400


def test_the_product_text_names_no_issues_or_sessions():
    pattern = re.compile(r"issue [0-9]|this session|session [0-9]", re.IGNORECASE)
    paths = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "moozi").rglob("*.py")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in paths for i, line in enumerate(p.read_text().splitlines(), 1)
            if pattern.search(line)]
    assert not hits


def test_the_connect_four_row_shows_the_presets_agent_and_play_simulations():
    from moozi.config.presets import preset_overrides

    assert preset_overrides("connect_four")["planner.play_simulations"] == results_page.C4_PLAY_SIMULATIONS
    for game, agent in results_page.PRESET_AGENT.items():
        assert preset_overrides(game).get("agent", "muzero") == agent, game


def _connect_four_report(agent: str, seed: int, wins: int, keeps: float) -> tuple[str, dict]:
    mark = {"mark": "best", "checkpoint": "best-0000001000", "minutes": 59.5, "updates": 1_000, "env_steps": 64_000,
            "simulations": results_page.C4_PLAY_SIMULATIONS,
            "mcts:1000": {"wins": wins, "draws": 0, "losses": 40 - wins, "games": 40},
            "solver": {"games": 10, "per_seat": [{"wins": 0}, {"wins": 0}]},
            "positions": {"keeps_result": {"all": keeps}, "random_keeps_result": {"all": 0.417}}}
    run = {"seed": seed, "agent": agent, "marks": [mark]}
    return (f"2026-11-28-connect_four-{agent}-seed{seed}.json",
            {"benchmark": "learning", "matmul_gflops": 400.0, "connect_four": [run]})


def test_the_connect_four_row_gives_every_seed_of_each_agent():
    files = [(name, data) for name, data in results_page.read_files() if "connect_four" not in name]
    files += [_connect_four_report("muzero", 0, 20, 0.8), _connect_four_report("muzero", 1, 36, 0.9),
              _connect_four_report("alphazero", 3, 38, 0.925)]
    _, table = results_page.build(files, _published())
    row = next(line for line in table if line.startswith("| Connect Four |"))
    assert "seeds 0, 1: 20-0-20, 0.800; 36-0-4, 0.900" in row
    assert "(`--set agent=alphazero`, seed 3: 38-0-2, 0.925)" in row
    # The interval pools the seeds' games: 56 wins of 80, not the lowest and highest seed's bounds.
    low, high = results_page.wilson_interval(56, 80)
    assert f"| 2 | win rate {low:.0%}-{high:.0%} (95% Wilson, 80 games pooled over 2 seeds) |" in row


def test_fresh_seeds_lead_the_connect_four_and_minatar_rows_where_there_are_any():
    files = [(name, data) for name, data in results_page.read_files()
             if "connect_four" not in name and "breakout" not in data]
    tuning = [_connect_four_report("muzero", 0, 20, 0.8), _connect_four_report("muzero", 1, 36, 0.9)]
    fresh_name, fresh = _connect_four_report("muzero", 10, 38, 0.95)
    fresh = {**fresh, "fresh_seed": True}
    mark = {"updates": 40_000, "env_steps": 10_000_000, "bootstrap_ci": [6.0, 8.0], "episodes": 100, "max_steps": 2_000}
    breakout = {"benchmark": "learning", "matmul_gflops": 400.0, "breakout": [
        {"game": "breakout", "seed": seed, "marks": [{**mark, "minutes": 60.1, "mean_return": value}]}
        for seed, value in ((0, 90.0), (1, 80.0))]}
    fresh_breakout = {"benchmark": "learning", "matmul_gflops": 400.0, "fresh_seed": True, "breakout": [
        {"game": "breakout", "seed": 10, "marks": [{**mark, "minutes": 60.1, "mean_return": 50.0}]}]}
    _, table = results_page.build([*files, *tuning, ("x-breakout.json", breakout)], _published())
    assert "seeds 0, 1: 20-0-20" in _summary_row(table, "Connect Four")  # no fresh seed: every seed
    assert "mean return 85.0" in _summary_row(table, "MinAtar Breakout")
    page, table = results_page.build([*files, *tuning, (fresh_name, fresh), ("x-breakout.json", breakout),
                                      ("y-breakout.json", fresh_breakout)], _published())
    row = _summary_row(table, "Connect Four")
    assert "fresh seed 10: 38-0-2, 0.950" in row and "seeds 0, 1" not in row and "| 1 |" in row
    assert "mean return 50.0 (fresh seed)" in _summary_row(table, "MinAtar Breakout")
    assert "| MuZero | 0 | best |" in page  # the tuning runs stay on the page


def test_a_range_of_seeds_is_named_a_range_and_pooled_returns_give_a_bootstrap():
    assert results_page.seed_range([65.4, 121.2, 88.0]) == "range of 3 seeds 65.4-121.2"
    runs = [{"mean_return": 2.0, "returns": [1.0, 3.0]}, {"mean_return": 5.0, "returns": [4.0, 6.0]}]
    low, high = results_page.bootstrap_mean_interval([1.0, 3.0, 4.0, 6.0])
    assert results_page._pooled_bootstrap(runs, "games") == f"{low:,.0f}-{high:,.0f} (95% bootstrap, 4 games pooled over 2 seeds)"
    # A file without its episodes' returns: the seeds' range, named as one.
    assert results_page._pooled_bootstrap([{"mean_return": 2.0}, {"mean_return": 5.0}], "games") == "range of 2 seeds 2-5"


def _chance_report() -> dict:
    def match(wins, losses):
        games = wins + losses
        return {"win_rate": wins / games, "win_rate_ci": list(results_page.wilson_interval(wins, games)), "wins": wins,
                "draws": 0, "losses": losses, "games": games, "per_seat": []}

    run = {"seed": 0, "minutes": 60.2, "updates": 5_000, "env_steps": 700_000, "simulations": 25}
    return {"benchmark": "learning", "matmul_gflops": 115.0,
            "2048": [{**run, "agent": "stochastic_muzero", "mean_return": 6_123.4, "bootstrap_ci": [5_500.0, 6_700.0],
                      "tile_shares": {"256": 0.99, "512": 0.8, "1024": 0.31}},
                     {**run, "agent": "muzero", "mean_return": 4_000.0, "bootstrap_ci": [3_600.0, 4_400.0],
                      "tile_shares": {"256": 0.9, "512": 0.45, "1024": 0.04}}],
            # Backgammon's runs at the preset's play simulations (other counts get a note: see the 2048 test).
            "backgammon": [{**run, "simulations": results_page.preset_play_simulations("backgammon"),
                            "agent": "stochastic_muzero", "random": match(93, 7), "pipcount": match(41, 59)},
                           {**run, "simulations": results_page.preset_play_simulations("backgammon"),
                            "agent": "muzero", "random": match(61, 39), "pipcount": match(9, 91)}]}


def test_chance_games_add_their_sections_and_rows():
    # The made-up report alone among the chance games (the committed ones would enter the averages).
    files = [f for f in results_page.read_files() if "2048" not in f[1] and "backgammon" not in f[1]]
    page, table = results_page.build([*files, ("x-chance.json", _chance_report())], _published())
    assert "## 2048" in page and "## Backgammon" in page
    readme = "\n".join(table)
    assert "| 2048 | Stochastic MuZero | mean score 6,123 over 100 games, 1024 tile in 31% (MuZero: 4,000) |" in readme
    assert "| Backgammon | Stochastic MuZero | 93% of 100 games vs random, 41% vs `pipcount` (MuZero: 61% vs random) |" \
        in readme
    assert "| 6,123 [5500, 6700] | 99% | 80% | 31% | 0% |" in page
    assert "93-0-7 of 100" in page and "41-0-59 of 100" in page and "61-0-39 of 100" in page


def test_a_minatar_best_mark_shows_as_best_with_its_own_seed_mean_and_stays_out_of_the_row():
    files = [(name, data) for name, data in results_page.read_files() if "breakout" not in data]
    mark = {"updates": 40_000, "env_steps": 10_000_000, "mean_return": 7.0, "bootstrap_ci": [6.0, 8.0],
            "episodes": 100, "max_steps": 2_000}
    runs = [{"game": "breakout", "seed": seed, "marks": [{**mark, "minutes": 60.1, "mean_return": value},
                                                          {**mark, "mark": "best", "minutes": 41.3, "mean_return": 99.0}]}
            for seed, value in ((0, 12.0), (1, 14.0))]
    page, table = results_page.build([*files, ("x-breakout.json", {"benchmark": "learning", "matmul_gflops": 400.0,
                                                                  "breakout": runs})], _published())
    assert "| MuZero | 0 | 41.3 (best) |" in page and "**99.00**" in page
    assert "| MuZero | 60 min | 2 | **13.00** |" in page  # the seeds' 60-minute marks only
    assert "| MuZero | best | 2 | **99.00** | [99.00, 99.00] |" in page  # the seeds' best checkpoints apart
    assert page.index("| MuZero | 60 min | 2 |") < page.index("| MuZero | best | 2 |")
    row = next(line for line in table if line.startswith("| MinAtar Breakout |"))
    assert "mean return 13.0" in row and "| 60 |" in row


def test_a_minatar_env_step_mark_shows_at_its_budget_apart_from_the_minutes_and_an_unreached_one_not_at_all():
    files = [(name, data) for name, data in results_page.read_files() if "breakout" not in data]
    mark = {"updates": 40_000, "env_steps": 10_000_000, "mean_return": 7.0, "bootstrap_ci": [6.0, 8.0],
            "episodes": 100, "max_steps": 2_000}
    runs = [{"game": "breakout", "seed": seed,
             "marks": [{**mark, "minutes": 60.1, "mean_return": value},
                       {**mark, "env_step_mark": 5_000_000, "env_steps": 5_000_448, "minutes": 24.2, "mean_return": 3.0},
                       {"env_step_mark": 30_000_000, "reached": False}]}
            for seed, value in ((0, 12.0), (1, 14.0))]
    page, table = results_page.build([*files, ("x-breakout.json", {"benchmark": "learning", "matmul_gflops": 400.0,
                                                                  "breakout": runs})], _published())
    assert "| MuZero | 0 | 24.2 (at 5.0M steps) |" in page and "30.0M" not in page
    assert "| MuZero | 5.0M steps | 2 | **3.00** |" in page
    assert "| MuZero | 60 min | 2 | **13.00** |" in page
    row = next(line for line in table if line.startswith("| MinAtar Breakout |"))
    assert "mean return 13.0" in row and "| 60 |" in row  # the summary keeps to the minute marks


def _summary_row(table: list[str], game: str) -> str:
    return next(line for line in table if line.startswith(f"| {game} |"))


def test_the_result_column_claims_no_preset_and_the_preset_plays_what_build_config_says():
    _, table = results_page.build(results_page.read_files(), _published())
    assert table[1].startswith("| game | agent | result | seeds |")
    assert "(the preset's)" not in results_page.README.read_text() + results_page.PAGE.read_text()
    from moozi.config import build_config

    planner = build_config("2048").planner
    assert results_page.preset_play_simulations("2048") == (planner.play_simulations or planner.num_simulations)
    assert results_page.preset_play_simulations("connect_four") == results_page.C4_PLAY_SIMULATIONS


def test_a_2048_run_at_other_simulations_than_the_presets_says_so():
    files = [f for f in results_page.read_files() if "2048" not in f[1] and "backgammon" not in f[1]]
    preset = results_page.preset_play_simulations("2048")
    _, table = results_page.build([*files, ("x-chance.json", _chance_report())], _published())
    assert "the preset plays" not in _summary_row(table, "2048")  # every run at the preset's simulations
    report = _chance_report()
    report["2048"][0]["simulations"] = 12
    _, table = results_page.build([*files, ("x-chance.json", report)], _published())
    row = _summary_row(table, "2048")
    assert f"(MuZero at 25 simulations: 4,000); at 12 simulations; the preset plays {preset} |" in row
    # The committed files: Stochastic MuZero played at 12 (their overrides), the preset at 25.
    _, table = results_page.build(results_page.read_files(), _published())
    if preset != 12:
        assert f"at 12 simulations; the preset plays {preset}" in _summary_row(table, "2048")


def test_the_atari_row_and_section_say_they_were_measured_under_an_earlier_preset():
    page, table = results_page.build(results_page.read_files(), _published())
    name = "2026-11-25-atari-pong-60min-seed0.json"
    assert name in results_page.EARLIER_PRESET
    assert "; measured under an earlier Atari preset (2026-11-25) |" in _summary_row(table, "Atari Pong")
    section = page[page.index("## Atari Pong"):page.index("## ", page.index("## Atari Pong") + 3)]
    assert "Measured under an earlier Atari preset (2026-11-25" in section
    # A file of today's preset gets no such label (and the section no longer claims none exists).
    files = [(n if n != name else "2026-12-07-atari-pong-60min-seed0.json", r) for n, r in results_page.read_files()]
    page, table = results_page.build(files, _published())
    assert "earlier" not in _summary_row(table, "Atari Pong") and "earlier Atari preset" not in page


def test_every_file_named_under_an_earlier_preset_exists_and_records_no_config():
    # A file that records its resolved config is compared with today's preset instead (config_differences).
    from bench import provenance

    for name in results_page.EARLIER_PRESET:
        assert (results_page.RESULTS / name).exists(), name
        assert name in provenance.LEGACY_FILES, name


def test_a_recorded_config_that_differs_from_todays_preset_is_named_in_the_row():
    files = [(n, r) for n, r in results_page.read_files() if "go9" not in n]
    newest = "2026-12-06-go9-alphazero-signals-seed0.json"
    report = json.loads((results_page.RESULTS / newest).read_text())
    _, table = results_page.build([*files, (newest, report)], _published())
    assert "not today's preset" not in _summary_row(table, "Go 9×9")  # the preset as it is now
    changed = copy.deepcopy(report)
    changed["config"]["planner"]["full_search_share"] = 1.0
    del changed["config"]["env"]["go_features"]
    _, table = results_page.build([*files, (newest, changed)], _published())
    row = _summary_row(table, "Go 9×9")
    assert "; not today's preset: " in row
    assert "env.go_features unset (the preset now: true)" in row
    assert "planner.full_search_share 1.0 (the preset now: 0.5)" in row


def _tic_tac_toe_report(gflops: float, minutes: list, started_at: str) -> dict:
    runs = [{"seed": seed, "minutes_to_no_losses_vs_minimax": m,
             "curve": [{"minutes": m if m is not None else 3.1, "losses_vs_minimax": 0 if m is not None else 4}],
             **({"at_target_vs_random": {"wins": 95, "draws": 5, "losses": 0}} if m is not None else {})}
            for seed, m in enumerate(minutes)]
    return {"benchmark": "learning", "matmul_gflops": gflops, "started_at": started_at, "tic_tac_toe": runs}


def test_the_tic_tac_toe_row_gives_the_slowest_machine_beside_the_fastest():
    files = [f for f in results_page.read_files() if "tic_tac_toe" not in f[1]]
    fast = ("a-fast.json", _tic_tac_toe_report(490.0, [0.5, 0.75], "2026-11-29T00:00:00+0000"))
    middle = ("b-middle.json", _tic_tac_toe_report(200.0, [1.0, 1.5], "2026-11-30T00:00:00+0000"))
    slow = ("c-slow.json", _tic_tac_toe_report(118.0, [None, 2.5], "2026-11-28T00:00:00+0000"))
    _, table = results_page.build([*files, fast, middle, slow], _published())
    row = _summary_row(table, "Tic-tac-toe")
    assert ("| loses none of 100 games to `minimax` after 0.50 / 0.75 min at 490.0 GFLOP/s (2 of 2 seeds within"
            " 0.75 min); at 118.0 GFLOP/s after 2.50 min (1 of 2 seeds within 3.10 min) | 2; 2 |") in row
    assert "200.0" not in row
    _, table = results_page.build([*files, ("c-slow.json", _tic_tac_toe_report(118.0, [None, None], "x"))],
                                  _published())
    row = _summary_row(table, "Tic-tac-toe")  # one machine: its result alone, with its speed
    assert "| no seed loses none of 100 games to `minimax` within 3.10 min at 118.0 GFLOP/s | 2 |" in row
    # The committed files: the fastest and the slowest machine both shown.
    _, table = results_page.build(results_page.read_files(), _published())
    speeds = re.findall(r"at ([\d.,]+) GFLOP/s", _summary_row(table, "Tic-tac-toe"))
    assert len(speeds) == 2 and float(speeds[0].replace(",", "")) > float(speeds[1].replace(",", ""))


def test_the_readmes_suite_timings_each_have_a_record():
    # Every m:ss the README's Tests section cites is in CONTRIBUTING.md (whose table names the result
    # files), or says beside it that no file records it.
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Tests"):readme.index("\n## ", readme.index("## Tests") + 1)]
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    timings = re.findall(r"\b(\d{1,2}:\d{2})\b(?!\s*\(not recorded in a result file\))", section)
    assert timings
    assert [t for t in timings if t not in contributing] == []


def test_the_go_row_pools_every_seed_of_today_s_preset():
    import copy as copy_

    files = results_page.read_files()
    name, report = next((n, r) for n, r in files if n == "2026-12-06-go9-alphazero-signals-seed0.json")
    seed1 = copy_.deepcopy(report)
    seed1["seed"] = seed1["config"]["seed"] = 1
    seed1["minutes"] = 60.2
    match = seed1["vs_gnugo_level1"]
    match["wins"], match["own_area"] = 3, [0] * 10 + [5] * 10
    match["margins"] = [-30.0] * 20
    others = [(n, r) for n, r in files if r.get("game") != "go9" or n == name]  # seed 0 alone of today's
    _, table = results_page.build(others + [("2026-12-07-go9-alphazero-signals-seed1.json", seed1)], _published())
    row = next(line for line in table if line.startswith("| Go 9×9 |"))
    first = report["vs_gnugo_level1"]
    wins = first["wins"] + 3
    area = sum(a > 0 for a in first["own_area"]) + 10
    import statistics as stats

    median = stats.median([m for m in first["margins"] if m is not None] + [-30.0] * 20)
    assert f"80-0-0 in 80 games vs random; GNU Go level 1: {wins} wins in 40, own area in {area} of 40; median margin {median:+g}" in row
    assert "| 2 | win rate vs random" in row and "(95% Wilson, 80 games pooled over 2 seeds)" in row
    assert "| 59.4-60.2 |" in row
    # A seed run twice counts once among the seeds, and the pooled interval says so.
    _, table = results_page.build(others + [("2026-12-07-go9-alphazero-signals-seed1.json", seed1),
                                            ("2026-12-08-go9-alphazero-seed1-again.json", copy_.deepcopy(seed1))],
                                  _published())
    row = next(line for line in table if line.startswith("| Go 9×9 |"))
    assert "| 2 | win rate vs random" in row and "(95% Wilson, 120 games pooled over 3 runs of 2 seeds)" in row
