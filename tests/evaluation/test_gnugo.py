"""`moozi eval RUN --opponent gnugo[:LEVEL]`: a go agent against GNU Go through GTP (moozi/evaluation/gnugo.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyspiel
import pytest
from tests.helpers.tiny_go import TINY_GO9_GROUP, tiny_go9_run

from moozi.errors import MooziError
from moozi.evaluation.gnugo import GNUGO, evaluate_against_gnugo, game_from_result, gnugo_level
from moozi.evaluation.matches import make_opponent
from moozi.play.gtp_referee import GameResult

needs_gnugo = pytest.mark.skipif(not os.path.exists(GNUGO), reason="GNU Go is not installed (apt-get install gnugo)")


def test_gnugo_specs():
    assert [gnugo_level(s) for s in ("gnugo", "GnuGo", "gnugo:0", "gnugo:10", "random", "mcts:5")] == [1, 1, 0, 10, None, None]
    for bad in ("gnugo:11", "gnugo:x", "gnugo:"):
        with pytest.raises(MooziError, match="GNU Go's level, an integer from 0 to 10"):
            gnugo_level(bad)
    game = pyspiel.load_game("go(board_size=9,komi=7.5)")
    with pytest.raises(MooziError, match="plays whole games of go through GTP"):
        make_opponent("gnugo", game, 0, 0)
    with pytest.raises(MooziError, match=r"unknown opponent 'gnu'; .* gnugo\[:LEVEL\]"):
        make_opponent("gnu", game, 0, 0)


class _Spec:
    def __init__(self, name):
        self.name = name


class _Agent:
    def __init__(self, name):
        self.spec = _Spec(name)


def test_clear_errors_for_a_game_other_than_go_and_a_missing_gnugo():
    with pytest.raises(MooziError, match="--opponent gnugo plays go; this run plays openspiel:tic_tac_toe"):
        evaluate_against_gnugo(_Agent("openspiel:tic_tac_toe"), 2, 0)
    with pytest.raises(MooziError, match=r"GNU Go is not installed \(/nonexistent/gnugo is missing\): it is Debian's "
                                         r"gnugo package, `apt-get install gnugo`"):
        evaluate_against_gnugo(_Agent("pgx:go_9x9"), 2, 0, binary="/nonexistent/gnugo")


def test_a_game_from_the_agents_side():
    # 5x5 board: the agent (white) has C3 and D3, GNU Go (black) B3 and E5, both of which GNU Go calls dead.
    board = np.zeros((5, 5), np.int8)
    board[2, 2] = board[2, 3] = -1
    board[2, 1] = board[4, 4] = 1
    record = ["B B3", "W C3", "B E5", "W D3", "B pass", "W pass"]
    r = GameResult("gnugo", "agent", "gnugo", "B+1.5", 6, "two passes", record,
                   at_first_pass={"gnugo": {"move": 5, "score": "B+1.5", "final_scores": {"gnugo": "W+0.5"}}, "agent": None},
                   final_scores={"gnugo": "W+0.5", "agent": "B+1.5"}, dead_stones={"gnugo": ["B3", "E5"]}, board=board)
    g = game_from_result(r)
    assert (g.agent_colour, g.outcome, g.moves, g.first_pass) == ("white", "loss", 6, "gnugo")
    assert (g.margin_tromp_taylor, g.margin_gnugo) == (-1.5, 0.5)
    assert g.at_gnugo_pass == {"move": 5, "margin_tromp_taylor": -1.5, "margin_gnugo": 0.5}
    # As the board stands the one empty region reaches both colours: white has its 2 stones. With the
    # dead black stones gone the whole board is white's.
    assert g.agent_area_tromp_taylor == 2 and g.agent_area_gnugo == 25


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@needs_gnugo
@pytest.mark.slow
def test_a_tiny_go9_agent_against_gnugo(tmp_path_factory):
    from moozi.play import load_agent

    agent = load_agent(tiny_go9_run(tmp_path_factory, "alphazero"))
    lines = []
    result = evaluate_against_gnugo(agent, 2, seed=3, max_moves=40, log=lines.append)
    assert [g.agent_colour for g in result.games] == ["black", "white"]
    assert [(s.player, s.games) for s in result.result.per_seat] == [(0, 1), (1, 1)]
    assert result.result.opponent == "gnugo:1" and result.result.games == 2 and len(lines) == 2
    for g in result.games:
        assert g.reason in ("two passes", "move cap (40)", "gnugo resigned"), g
        assert g.margin_gnugo is not None and g.margin_tromp_taylor is not None
        assert g.agent_area_gnugo is not None and g.agent_area_tromp_taylor >= 0
        assert g.moves == len(g.record)
    data = json.loads(result.to_json())
    assert data["per_game"][0]["agent_colour"] == "black" and data["level"] == 1
    assert set(data["summary"]) >= {"median_margin_tromp_taylor", "median_margin_gnugo", "games_with_own_area_tromp_taylor"}
    assert "as player 0" in result.format_table() and "median TT" in result.format_table()
