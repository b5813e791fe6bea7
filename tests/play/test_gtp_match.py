"""bench/gtp_match.py: the referee against scripted engines, GNU Go when installed, and `moozi gtp`."""

import io
import json
import os
import pathlib
import shlex
import subprocess
import sys

import pytest
from tests.helpers.tiny_go import TINY_GO9_GROUP, tiny_go9_run

from bench.gtp_match import run_match
from moozi.play.go_rules import parse_score

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "helpers" / "scripted_gtp_engine.py"
GNUGO = "/usr/games/gnugo"
GNUGO_COMMAND = f"{GNUGO} --mode gtp --boardsize 9 --level 1 --chinese-rules"
needs_gnugo = pytest.mark.skipif(not os.path.exists(GNUGO), reason="GNU Go is not installed (apt-get install gnugo)")


def scripted(*args):
    return " ".join(shlex.quote(a) for a in (sys.executable, str(SCRIPTED), *args))


def match(a, b, games=1, timeout=60, **kwargs):
    out = io.StringIO()
    report = run_match({"A": a, "B": b}, games, timeout=timeout, out=out, **kwargs)
    return report, out.getvalue().splitlines()


def test_two_passers_alternate_colours_and_white_wins_on_komi(tmp_path):
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    report, lines = match(scripted("--log", str(log_a)), scripted("--log", str(log_b)), games=2)
    assert report["wins"] == {"A": 1, "B": 1} and report["draws"] == 0
    assert [(r["black"], r["white"], r["winner"], r["score"], r["moves"], r["reason"]) for r in report["results"]] == [
        ("A", "B", "B", "W+7.5", 2, "two passes"),
        ("B", "A", "A", "W+7.5", 2, "two passes"),
    ]
    assert [r["first_pass"] for r in report["results"]] == [{"A": 1, "B": 2}, {"B": 1, "A": 2}]
    assert [r["forced_passes"] for r in report["results"]] == [0, 0]
    assert lines == [
        "game 1: A black, B white: B wins W+7.5 after 2 moves (two passes)",
        "game 2: A white, B black: A wins W+7.5 after 2 moves (two passes)",
    ]
    setup = ["boardsize 9", "komi 7.5", "clear_board"]
    # Each engine is asked once whether it knows the scoring commands (these scripted ones do not).
    assert log_a.read_text().splitlines() == [
        "known_command set_random_seed", *setup, "genmove b", "known_command final_score", "play w pass",
        "known_command final_status_list", *setup, "play b pass", "genmove w", "quit",
    ]
    assert log_b.read_text().splitlines() == [
        "known_command set_random_seed", *setup, "play b pass", "known_command final_score", "genmove w",
        "known_command final_status_list", *setup, "genmove b", "play w pass", "quit",
    ]
    first = report["results"][0]
    assert first["at_first_pass"] == {"A": {"move": 1, "score": "W+7.5", "final_scores": {}},
                                      "B": {"move": 2, "score": "W+7.5", "final_scores": {}}}
    assert first["final_scores"] == {} and first["dead_stones"] == {}


def test_the_referee_scores_its_own_board():
    # Black E5 then passes; white passes twice: black owns all 81 points.
    report, _ = match(scripted("E5"), scripted())
    assert report["results"][0]["score"] == "B+73.5" and report["wins"] == {"A": 1, "B": 0}
    assert report["results"][0]["first_pass"] == {"A": 3, "B": 2}  # B E5, W pass, B pass
    # Same with komi 81: a draw.
    report, lines = match(scripted("e5"), scripted(), komi=81)
    assert report["draws"] == 1 and report["results"][0]["score"] == "0"
    assert lines == ["game 1: A black, B white: draw 0 after 3 moves (two passes)"]


@pytest.mark.parametrize(
    "a_args, b_args, winner, reason",
    [
        (["E5", "E5"], [], "B", "A played E5: illegal move"),  # occupied
        (["Z99"], [], "B", "A answered genmove with 'Z99'"),
        (["K5"], [], "B", "A answered genmove with 'K5'"),  # off the 9x9 board
        (["D4", "resign"], [], "B", "A resigned"),
        (["EXIT"], [], "B", "A failed at genmove: the engine exited"),
        (["D4"], ["--refuse-play"], "A", "B refused the legal move b D4: illegal move"),
    ],
)
def test_an_engine_that_breaks_the_rules_loses(a_args, b_args, winner, reason):
    report, _ = match(scripted(*a_args), scripted(*b_args))
    result = report["results"][0]
    assert (result["winner"], result["reason"], result["score"]) == (winner, reason, None)


def test_a_repeated_position_is_a_draw():
    # 2x2: B b1, W a1, B pass, W b2 (captures b1), B pass, W a2, B b1 (captures all, as after move 1).
    report, _ = match(scripted("B1", "pass", "pass", "B1"), scripted("A1", "B2", "A2"), board_size=2, komi=0.5)
    result = report["results"][0]
    assert (result["winner"], result["moves"], result["score"]) == (None, 7, None)
    assert result["reason"] == "A's B1 repeats an earlier position (a draw, as in OpenSpiel)"
    assert report["draws"] == 1


def test_a_crashed_engine_is_restarted_for_the_next_game():
    report, _ = match(scripted("EXIT"), scripted(), games=2)
    # Not restarted, A would fail game 2's setup ("the engine is not running"); restarted, it gets
    # as far as its first genmove again.
    assert [r["reason"] for r in report["results"]] == ["A failed at genmove: the engine exited"] * 2
    assert report["wins"] == {"A": 0, "B": 2}


def test_the_move_cap_ends_the_game():
    report, _ = match(scripted("A1", "B1", "C1"), scripted("A9", "B9", "C9"), max_moves=5)
    result = report["results"][0]
    # Black A1 B1 C1, white A9 B9: 3 - 2 stones, the rest touches both; komi 7.5.
    assert (result["moves"], result["reason"], result["score"]) == (5, "move cap (5)", "W+6.5")


def test_command_line_prints_json_on_the_last_line():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gtp_match.py"), "--games", "2", "--komi", "0.5", scripted("E5"), scripted()],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    report = json.loads(lines[-1])
    assert report["games"] == 2 and report["wins"] == {"A": 2, "B": 0} and report["draws"] == 0
    assert report["engines"]["A"].endswith("E5") and report["komi"] == 0.5
    assert lines[0] == "game 1: A black, B white: A wins B+80.5 after 3 moves (two passes)"
    assert lines[1] == "game 2: A white, B black: A wins W+0.5 after 2 moves (two passes)"


@needs_gnugo
@pytest.mark.slow
def test_gnugo_against_gnugo():
    report, lines = match(GNUGO_COMMAND, GNUGO_COMMAND + " --capture-all-dead", games=2)
    assert report["wins"]["A"] + report["wins"]["B"] + report["draws"] == 2
    for result in report["results"]:
        assert result["reason"] in ("two passes", "A resigned", "B resigned"), result
        assert result["moves"] > 10
    assert len(lines) == 2


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@needs_gnugo
@pytest.mark.slow
def test_moozi_gtp_against_gnugo(tmp_path_factory):
    run_dir = tiny_go9_run(tmp_path_factory)
    ours = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "moozi.cli", "gtp", str(run_dir)))
    # The first genmove includes JAX's start-up and compiling: a generous timeout.
    report, lines = match(ours, GNUGO_COMMAND, games=2, max_moves=60, timeout=400)
    assert report["wins"]["A"] + report["wins"]["B"] + report["draws"] == 2
    for result in report["results"]:
        # Our engine only ever answers legal moves; the game ends by the rules, not by an engine failure.
        assert result["reason"] in ("two passes", "move cap (60)", "B resigned"), result
    assert len(lines) == 2


@needs_gnugo
def test_gnugo_gives_its_own_count_at_its_first_pass_and_at_the_end():
    # A scripted black plays E5 and D4, then passes; GNU Go plays on until the move cap.
    report, _ = match(scripted("E5", "D4"), GNUGO_COMMAND + " --capture-all-dead", max_moves=10)
    result = report["results"][0]
    assert result["reason"] == "move cap (10)" and result["at_first_pass"]["B"] is None
    at_pass = result["at_first_pass"]["A"]
    assert at_pass["move"] == 5 and set(at_pass["final_scores"]) == {"B"}
    parse_score(at_pass["final_scores"]["B"])  # a score, whatever GNU Go makes of the position
    assert set(result["final_scores"]) == {"B"} and parse_score(result["final_scores"]["B"]) < 0
    # GNU Go's dead-stone analysis: black's two stones, surrounded by then, are dead.
    assert set(result["dead_stones"]["B"]) <= {"E5", "D4"}


def test_a_pass_with_no_legal_stone_is_not_a_chosen_pass():
    from bench.gtp_match import GameResult, first_passes

    record = ["B E5", "W D4", "B pass", "W pass"]
    assert first_passes(GameResult("A", "B", "A", "B+1", 4, "two passes", record)) == {"A": 3, "B": 4}
    # Black's pass at move 3 was its only legal move: white's at 4 is the first one chosen.
    assert first_passes(GameResult("A", "B", "A", "B+1", 4, "two passes", record, forced=[3])) == {"A": None, "B": 4}
