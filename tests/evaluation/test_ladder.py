"""The Elo ladder: a schedule fixed up front and balanced over seats, anchors, results, and `moozi eval --ladder`."""

import collections
import json

import pyspiel
import pytest
from tests.helpers.tiny import run_driver, tiny_config

from moozi.cli import main
from moozi.errors import MooziError
from moozi.evaluation import make_opponent
from moozi.evaluation.ladder import (
    LadderPlayer,
    LadderResult,
    game_seed,
    make_schedule,
    parse_anchors,
    play_schedule,
    seat_score,
    select_checkpoints,
    summarise,
    write_ladder_png,
)

TTT = pyspiel.load_game("tic_tac_toe")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ options
@pytest.mark.parametrize(
    "text, anchors",
    [
        (None, ("random", "mcts:100")),
        ("mcts:50", ("random", "mcts:50")),
        ("minimax, random", ("random", "minimax")),
        ("random", ("random",)),
        ("MCTS:020,mcts:4", ("random", "mcts:20", "mcts:4")),
        ("solver,mcts:100", ("random", "solver", "mcts:100")),
    ],
)
def test_anchors_always_include_random_first(text, anchors):
    assert parse_anchors(text) == anchors


@pytest.mark.parametrize(
    "text, message",
    [
        ("bogus", "unknown anchor 'bogus'; anchors are random, minimax, mcts:N or solver"),
        ("mcts:0", "unknown anchor 'mcts:0'"),
        ("mcts:x", "unknown anchor"),
        ("mcts", "unknown anchor"),
        ("run:runs/x", "unknown anchor"),
        ("mcts:10,mcts:010", "listed twice"),
    ],
)
def test_bad_anchors_say_what_is_allowed(text, message):
    with pytest.raises(MooziError, match=message):
        parse_anchors(text)


@pytest.mark.parametrize(
    "count, chosen",
    [
        (None, list(range(10))), (10, list(range(10))), (12, list(range(10))),
        (1, [9]), (2, [0, 9]), (3, [0, 5, 9]), (4, [0, 3, 6, 9]),
    ],
)
def test_checkpoint_selection_is_evenly_spaced_and_keeps_the_newest(count, chosen):
    assert select_checkpoints(list(range(10)), count) == chosen


def test_checkpoint_selection_never_repeats_one():
    for n in range(1, 30):
        for k in range(1, n + 1):
            chosen = select_checkpoints(list(range(n)), k)
            assert len(chosen) == k and len(set(chosen)) == k and chosen[-1] == n - 1 and chosen == sorted(chosen)


# ------------------------------------------------------------------ the schedule
def test_schedule_covers_every_pair_with_balanced_seats():
    players = ["ckpt-a", "ckpt-b", "random", "mcts:5"]
    schedule = make_schedule(players, 6, seed=3)
    assert len(schedule) == 6 * 6  # 6 pairs x 6 games
    assert [g.index for g in schedule] == list(range(36))
    per_pair = collections.Counter(frozenset(g.seats) for g in schedule)
    assert len(per_pair) == 6 and set(per_pair.values()) == {6}
    seat0 = collections.Counter(g.seats for g in schedule)
    assert all(count == 3 for count in seat0.values()) and len(seat0) == 12  # both seatings of every pair, 3 each
    assert schedule[0].seats == ("ckpt-a", "ckpt-b")
    assert schedule[1].seats == ("ckpt-b", "ckpt-a")


def test_schedule_is_fixed_by_its_inputs_and_seeds_come_from_positions():
    players = ["x", "y", "z"]
    schedule = make_schedule(players, 4, seed=11)
    assert make_schedule(players, 4, seed=11) == schedule
    assert [g.seed for g in schedule] == [game_seed(11, i) for i in range(12)]
    assert len({g.seed for g in schedule}) == 12 and all(0 <= g.seed < 2**31 for g in schedule)
    other = make_schedule(players, 4, seed=12)
    assert [g.seats for g in other] == [g.seats for g in schedule]
    assert not {g.seed for g in other} & {g.seed for g in schedule}
    with pytest.raises(ValueError, match="distinct"):
        make_schedule(["x", "x"], 2, seed=0)


def test_seat_score_compares_returns():
    assert [seat_score(r) for r in [(1, -1), (0, 0), (-1, 1), (0.5, 0.5), (3, 2)]] == [1.0, 0.5, 0.0, 0.5, 1.0]


# ------------------------------------------------------------------ playing anchors
def _anchor_bot(name, seat, seed):
    return make_opponent(name, TTT, seat, seed)


def test_each_game_depends_on_its_own_seed_only():
    schedule = make_schedule(["random", "mcts:3"], 8, seed=0)
    forward = play_schedule(TTT, schedule, _anchor_bot)
    backward = play_schedule(TTT, schedule[::-1], _anchor_bot)[::-1]
    assert forward == backward  # the same games, whatever was played before them
    assert len(set(forward)) > 1  # and the seeds do make them differ


def test_every_scheduled_game_is_played_and_reported_in_order():
    schedule = make_schedule(["random", "minimax"], 6, seed=1)
    seen = []
    returns = play_schedule(TTT, schedule, _anchor_bot, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 6) for i in range(1, 7)]
    assert len(returns) == 6
    for game, (r0, r1) in zip(schedule, returns):
        minimax_seat = game.seats.index("minimax")
        assert (r0, r1)[minimax_seat] >= 0  # minimax never loses


def _anchor_ladder(games_per_pair=8, bootstrap=50):
    players = [LadderPlayer(name, "anchor") for name in ("random", "mcts:40", "minimax")]
    schedule = make_schedule([p.name for p in players], games_per_pair, seed=2)
    returns = play_schedule(TTT, schedule, _anchor_bot)
    return summarise(
        game="openspiel:tic_tac_toe", run_dir="-", seed=2, games_per_pair=games_per_pair, bootstrap=bootstrap,
        players=players, schedule=schedule, returns=returns,
    )


def test_anchor_ladder_orders_random_mcts_minimax(tmp_path):
    result = _anchor_ladder()
    random, mcts40, minimax = result.ratings
    assert random == 0.0 and result.intervals[0] == (0.0, 0.0)
    assert 0 < mcts40 < minimax
    assert result.games_played == (16, 16, 16)
    assert sum(result.points) == len(result.schedule)  # one point per game, split on draws
    for rating, (lo, hi) in zip(result.ratings, result.intervals):
        assert lo <= rating <= hi

    assert LadderResult.from_json(result.to_json()) == result
    document = json.loads(result.to_json())
    assert document["kind"] == "ladder" and document["reference"] == "random"
    assert [r["index"] for r in document["results"]] == list(range(24))
    assert document["schedule"][0] == {"index": 0, "seats": ["random", "mcts:40"], "seed": game_seed(2, 0)}
    assert document["players"][2]["name"] == "minimax" and document["players"][2]["games"] == 16

    table = result.format_table()
    assert table.splitlines()[3].split()[:2] == ["1", "minimax"]
    assert "3 pairs x 8 games = 24 games" in table

    png = write_ladder_png(result, tmp_path / "ladder.png")
    assert png.read_bytes()[:8] == PNG_SIGNATURE


# ------------------------------------------------------------------ the command line
def _eval(capsys, *args):
    try:
        code = main(["eval", *map(str, args)])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ladder", "--anchors", "bogus"], "unknown anchor 'bogus'"),
        (["--ladder", "--games", "3"], "--games must be a positive even number"),
        (["--ladder", "--games", "0"], "--games must be a positive even number"),
        (["--ladder", "--bootstrap", "0"], "--bootstrap must be a positive integer"),
        (["--ladder", "--checkpoints", "0"], "--checkpoints must be a positive integer"),
        (["--ladder", "--seed", "-1"], "--seed must be a non-negative integer"),
        (["--ladder", "--checkpoints", "x"], "invalid int value"),
        (["--anchors", "mcts:5"], "--anchors is a ladder option: add --ladder"),
        (["--ladder"], "not a moozi run directory"),
    ],
)
def test_bad_ladder_options_are_one_line_errors(tmp_path, capsys, args, message):
    code, out, err = _eval(capsys, tmp_path / "no-run", *args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no-run").exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tic-tac-toe run with checkpoints at updates 0, 2 and 4.

    A checkpoint after every iteration; training starts at the third (the first two share updates 0).
    """
    run_dir = tmp_path_factory.mktemp("ladder") / "run"
    config = tiny_config(**{
        "train.max_env_steps": 96, "replay.min_fill": 20,
        "train.checkpoint_every_minutes": 1e-6, "train.keep_checkpoints": 3,
    })
    run_driver(config, run_dir)
    return run_dir


@pytest.mark.slow
def test_cli_ladder_end_to_end(tiny_run, tmp_path, capsys):
    code, out, err = _eval(
        capsys, tiny_run, "--ladder", "--anchors", "mcts:2", "--games", "2", "--bootstrap", "20"
    )
    assert code == 0, err
    document = json.loads((tiny_run / "ladder.json").read_text())
    assert (tiny_run / "ladder.png").read_bytes()[:8] == PNG_SIGNATURE
    names = [p["name"] for p in document["players"]]
    assert names == ["ckpt-0000000000", "ckpt-0000000002", "ckpt-0000000004", "random", "mcts:2"]
    assert [p["updates"] for p in document["players"][:3]] == [0, 2, 4]
    assert [p["games"] for p in document["players"]] == [8] * 5  # 4 opponents x 2 games
    assert len(document["schedule"]) == len(document["results"]) == 10 * 2
    assert document["players"][3]["rating"] == 0.0
    assert all(p["interval"][0] <= p["rating"] <= p["interval"][1] for p in document["players"])
    assert f"written {tiny_run / 'ladder.json'}" in out and "ckpt-0000000004" in out

    # --checkpoints picks the oldest and the newest; --json moves both outputs.
    target = tmp_path / "elsewhere" / "mine.json"
    code, out, err = _eval(
        capsys, tiny_run, "--ladder", "--checkpoints", "2", "--anchors", "random",
        "--games", "2", "--bootstrap", "10", "--json", target,
    )
    assert code == 0, err
    document = json.loads(target.read_text())
    assert [p["name"] for p in document["players"]] == ["ckpt-0000000000", "ckpt-0000000004", "random"]
    assert target.with_suffix(".png").read_bytes()[:8] == PNG_SIGNATURE
