"""The GTP engine (`moozi gtp`): protocol bytes, vertices, rules, scoring, and a trained go9 agent."""

import io
import subprocess
import sys

import numpy as np
import pytest
from tests.helpers.tiny_go import TINY_GO9_GROUP, tiny_go9_run

from moozi.errors import MooziError
from moozi.play.go_rules import (
    REPEATS_POSITION,
    VertexSyntaxError,
    action_to_vertex,
    area_score,
    board_array,
    format_score,
    new_go_game,
    parse_vertex,
    play_move,
    point_to_action,
)
from moozi.play.gtp import COMMANDS, GtpEngine, engine_for_agent, serve


def lowest_legal(state):
    """A deterministic stand-in for the agent: the lowest-numbered legal action (a point before the pass)."""
    return min(state.legal_actions())


def engine(board_size=9, komi=7.5, player=lowest_legal):
    return GtpEngine(board_size=board_size, komi=komi, player=player, version="0.1.0")


def session(eng, *lines):
    """Each response, in order, for commands given without ids."""
    return [eng.respond(line + "\n") for line in lines]


# ------------------------------------------------------------------ vertices
def test_every_vertex_round_trips_and_matches_openspiel_names():
    state = new_go_game(9, 7.5, 400).new_initial_state()
    for action in range(81):
        vertex = action_to_vertex(action, 9)
        assert point_to_action(parse_vertex(vertex), 9) == action
        assert point_to_action(parse_vertex(vertex.lower()), 9) == action
        assert state.action_to_string(0, action) == f"B {vertex.lower()}"
    assert action_to_vertex(81, 9) == "pass"
    assert point_to_action(parse_vertex("PASS"), 9) == 81
    assert state.action_to_string(0, 81) == "B PASS"


def test_vertices_skip_i_and_count_rows_from_the_bottom():
    assert parse_vertex("A1") == (0, 0)
    assert parse_vertex("H1") == (0, 7) and parse_vertex("J1") == (0, 8)
    assert parse_vertex("j9") == (8, 8)
    assert parse_vertex("T19") == (18, 18) and parse_vertex("Z25") == (24, 24)
    for bad in ("I5", "A0", "A26", "5A", "A", "", "AA1", "A1x", "A-1", "A١"):
        with pytest.raises(VertexSyntaxError):
            parse_vertex(bad)
    assert point_to_action((0, 9), 9) is None and point_to_action((9, 0), 9) is None

    eng = engine()
    assert session(eng, "play b A1", "play w J9") == ["= \n\n", "= \n\n"]
    rows = str(eng.state).splitlines()
    assert rows[-2] == " 1 X++++++++"  # GTP row 1 is the bottom line of OpenSpiel's board
    assert rows[-10] == " 9 ++++++++O"
    assert rows[-1] == "   ABCDEFGHJ"
    board = board_array(eng.state, 9)
    assert board[0, 0] == 1 and board[8, 8] == -1 and np.abs(board).sum() == 2


# ------------------------------------------------------------------ protocol
SCRIPT = (
    b"protocol_version\n"
    b"1 name\n"
    b"2 ver\x07sion\n"  # control characters other than HT and LF are dropped
    b"\n"
    b"   \t  \n"
    b"# a comment line\n"
    b"3 known_command genmove # a trailing comment\n"
    b"4 known_command showboard\n"
    b"list_commands\n"
    b"5 boardsize 19\n"
    b"6 boardsize 9\n"
    b"clear_board\n"
    b"7 komi 6.5\n"
    b"8 play b D5\n"
    b"9 play W\tC5\r\n"
    b"10 play black d5\n"
    b"11 play white I3\n"
    b"12 play b K1\n"
    b"13 play b\n"
    b"14 genmove w\n"
    b"15 final_score\n"
    b"16 undo\n"
    b"17 final_score\n"
    b"18 frobnicate\n"
    b"19 genmove b\n"
    b"20 komi 0.5\n"
    b"21 final_score\n"
    b"undo\n"
    b"undo\n"
    b"undo\n"
    b"22 undo\n"
    b"23 final_score\n"
    b"24 boardsize nine\n"
    b"25 komi lots\n"
    b"26 genmove red\n"
    b"27 quit\n"
    b"name\n"  # after quit: never read
)
EXPECTED = (
    b"= 2\n\n"
    b"=1 moozi\n\n"
    b"=2 0.1.0\n\n"
    b"=3 true\n\n"
    b"=4 false\n\n"
    b"= protocol_version\nname\nversion\nknown_command\nlist_commands\nboardsize\nclear_board\nkomi\n"
    b"play\ngenmove\nundo\nfinal_score\nquit\n\n"
    b"?5 unacceptable size\n\n"
    b"=6 \n\n"
    b"= \n\n"
    b"=7 \n\n"
    b"=8 \n\n"
    b"=9 \n\n"
    b"?10 illegal move\n\n"  # occupied
    b"?11 syntax error\n\n"  # there is no column I
    b"?12 illegal move\n\n"  # a vertex, but off the 9x9 board
    b"?13 syntax error\n\n"
    b"=14 A1\n\n"  # white moves twice: the engine passes for black in between
    b"=15 W+7.5\n\n"  # black D5 (1), white C5 A1 (2), the rest touches both; komi 6.5
    b"=16 \n\n"  # takes back A1 and the inserted pass
    b"=17 W+6.5\n\n"
    b"?18 unknown command\n\n"
    b"=19 A1\n\n"
    b"=20 \n\n"
    b"=21 B+0.5\n\n"  # black D5 A1, white C5; komi 0.5
    b"= \n\n"
    b"= \n\n"
    b"= \n\n"
    b"?22 cannot undo\n\n"
    b"=23 W+0.5\n\n"
    b"?24 syntax error\n\n"
    b"?25 syntax error\n\n"
    b"?26 syntax error\n\n"
    b"=27 \n\n"
)


def test_scripted_session_is_answered_byte_for_byte():
    out = io.BytesIO()
    eng = engine()
    serve(eng, io.BytesIO(SCRIPT), out)
    assert out.getvalue() == EXPECTED
    assert eng.finished


def test_list_commands_and_known_command_agree():
    eng = engine()
    listed = eng.respond("list_commands")[2:-2].split("\n")
    assert listed == list(COMMANDS)
    for name in listed:
        assert eng.respond(f"known_command {name}") == "= true\n\n"
    assert eng.respond("known_command") == "? syntax error\n\n"
    assert eng.respond("42") == "?42 syntax error\n\n"
    assert eng.respond("PLAY b d4") == "? unknown command\n\n"  # command names are case-sensitive
    assert eng.respond("play b\u00a0D4") == "? syntax error\n\n"  # only space and tab separate words
    assert eng.respond("7\tplay  \t b   D4   ") == "=7 \n\n"


# ------------------------------------------------------------------ rules
def test_suicide_is_an_illegal_move():
    eng = engine()
    # White A1 would capture nothing and have no liberty; black may fill its own point.
    assert session(eng, "play b B1", "play b A2", "play w A1") == ["= \n\n", "= \n\n", "? illegal move\n\n"]
    assert session(eng, "play b A1") == ["= \n\n"]


def test_ko_recapture_is_illegal_until_a_move_elsewhere():
    eng = engine()
    # Black D5 C4 D3 and white E5 F4 E3 surround D4 and E4; white D4, black captures it from E4.
    moves = ["b D5", "w E5", "b C4", "w F4", "b D3", "w E3", "b A9", "w D4", "b E4"]
    assert session(eng, *(f"play {m}" for m in moves)) == ["= \n\n"] * len(moves)
    assert board_array(eng.state, 9)[3, 3] == 0  # D4 captured
    assert session(eng, "play w D4") == ["? illegal move\n\n"]
    assert session(eng, "play w J9", "play b A8", "play w D4") == ["= \n\n"] * 3
    board = board_array(eng.state, 9)
    assert board[3, 3] == -1 and board[3, 4] == 0  # white took back, capturing E4


def test_moves_repeating_a_position_are_refused_and_genmove_passes_instead():
    # On 2x2: B b1, W a1, B pass, W b2 (captures b1), B pass, W a2; then B b1 captures all three
    # white stones and recreates the position after the first move (positional superko).
    game = new_go_game(2, 0.5, 100)
    state = game.new_initial_state()
    for action in (1, 0, 4, 3, 4, 2):
        assert play_move(state, action) is None
    assert 1 in state.legal_actions()  # OpenSpiel lists it: it would end the game as a draw
    before = state.history()
    assert play_move(state, 1) == REPEATS_POSITION
    assert state.history() == before

    eng = engine(board_size=2, komi=0.5, player=lambda s: 1)
    assert session(eng, "play b B1", "play w A1", "play b pass", "play w B2", "play b pass", "play w A2") == ["= \n\n"] * 6
    assert session(eng, "play b B1") == ["? illegal move\n\n"]
    assert session(eng, "genmove b") == ["= pass\n\n"]


def test_a_player_that_fails_gets_an_error_response_and_the_board_stays():
    def occupied_d4(state):
        return 3 * 9 + 3

    def broken(state):
        raise MooziError("the agent chose an illegal action")

    eng = engine(player=occupied_d4)
    assert session(eng, "play b D4", "genmove w") == [
        "= \n\n", "? cannot generate a move: the player chose D4, illegal move\n\n"]
    assert eng.state.history() == [30]
    eng = engine(player=broken)
    assert session(eng, "genmove b") == ["? cannot generate a move: the agent chose an illegal action\n\n"]
    assert eng.state.history() == []


def test_two_moves_in_a_row_insert_a_pass_and_undo_takes_both_back():
    eng = engine()
    assert session(eng, "play b D4", "play b E5") == ["= \n\n", "= \n\n"]
    d4, e5, pass_ = 3 * 9 + 3, 4 * 9 + 4, 81
    assert eng.state.history() == [d4, pass_, e5]
    assert session(eng, "undo") == ["= \n\n"]
    assert eng.state.history() == [d4]
    assert session(eng, "play w pass", "play w C3") == ["= \n\n", "? cannot play twice in a row after a pass\n\n"]
    # A second white pass, or white's genmove, would need a black pass in between: a pass kept off OpenSpiel's board.
    assert session(eng, "play w pass", "genmove w") == ["= \n\n", "= pass\n\n"]
    assert eng.state.history() == [d4, pass_]
    assert session(eng, "undo", "undo", "play b pass") == ["= \n\n"] * 3
    assert eng.state.is_terminal()  # two passes end the game
    assert session(eng, "play w C3", "play b C3", "genmove b", "play w pass") == [
        "? the game is over\n\n", "? the game is over\n\n", "= pass\n\n", "= \n\n"]
    assert session(eng, "undo", "undo", "undo", "play b C3") == ["= \n\n"] * 4
    assert eng.state.history() == [d4, pass_, 2 * 9 + 2]


def test_komi_recreates_the_game_and_keeps_the_moves():
    eng = engine()
    session(eng, "play b E5", "play w C3")
    history = eng.state.history()
    assert session(eng, "komi -2", "final_score") == ["= \n\n", "= B+2\n\n"]  # 1 - 1 + 2
    assert eng.state.get_game().get_parameters()["komi"] == -2.0
    assert eng.state.history() == history
    assert session(eng, "komi 7", "final_score") == ["= \n\n", "= W+7\n\n"]
    assert session(eng, "komi inf", "komi nan") == ["? syntax error\n\n"] * 2
    assert session(eng, "clear_board", "final_score") == ["= \n\n", "= W+7\n\n"]  # komi survives clear_board


def _play_columns(eng, black_col, white_col):
    lines = [f"play {c} {col}{row}" for row in range(1, 10) for c, col in (("b", black_col), ("w", white_col))]
    assert set(session(eng, *lines)) == {"= \n\n"}


@pytest.mark.parametrize(
    "black_col, white_col, komi, expected",
    [
        # Walls on D and E: black owns A-D (36), white E-J (45).
        ("D", "E", 7.5, "W+16.5"),
        # Walls on C and E: column D touches both colours (neutral); black 27, white 45.
        ("C", "E", -18, "0"),
        ("C", "E", -20.5, "B+2.5"),
        # Walls on F and B: black F-J (36), white A-B (18), C-E touches both.
        ("F", "B", 7.5, "B+10.5"),
    ],
)
def test_final_score_is_the_area_score(black_col, white_col, komi, expected):
    eng = engine(komi=komi)
    _play_columns(eng, black_col, white_col)
    assert session(eng, "final_score") == [f"= {expected}\n\n"]


def test_final_score_of_a_lone_stone_and_of_an_empty_board():
    eng = engine()
    assert session(eng, "final_score", "play b E5", "final_score") == ["= W+7.5\n\n", "= \n\n", "= B+73.5\n\n"]


def test_area_score_sign_agrees_with_openspiel_returns():
    """On finished random games, Tromp–Taylor's sign is OpenSpiel's result (superko draws aside)."""
    rng = np.random.default_rng(0)
    for board_size, komi in ((5, 0.0), (5, 2.5), (9, 7.5)):
        game = new_go_game(board_size, komi, 2 * board_size * board_size)
        for _ in range(40):
            state = game.new_initial_state()
            while not state.is_terminal():
                legal = state.legal_actions()
                points = legal[:-1] if len(legal) > 1 and rng.random() < 0.97 else legal[-1:]
                state.apply_action(int(rng.choice(points)))
            result = state.returns()[0]
            if result == 0 and len(state.history()) < game.max_game_length():
                continue  # a repeated position: OpenSpiel's draw, not a score
            assert np.sign(area_score(board_array(state, board_size), komi)) == result


def test_format_score():
    assert [format_score(s) for s in (3.5, -0.5, 0.0, 31.0, -7.0, 0.25)] == ["B+3.5", "W+0.5", "0", "B+31", "W+7", "B+0.25"]


# ------------------------------------------------------------------ a trained agent
def test_engine_for_agent_needs_a_go_run():
    class _Spec:
        name = "openspiel:tic_tac_toe"

    class _Agent:
        spec = _Spec()

    with pytest.raises(MooziError, match="trained on OpenSpiel's go or its pgx twin"):
        engine_for_agent(_Agent())


def test_cli_gtp_reports_a_missing_run_in_one_line():
    result = subprocess.run([sys.executable, "-m", "moozi.cli", "gtp", "/nonexistent/run"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(
        "moozi: error: /nonexistent/run is not a moozi run directory (no config.json) and no shipped agent has that name")
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@pytest.mark.slow
def test_moozi_gtp_plays_legal_moves_for_a_trained_go9_run(tmp_path_factory):
    # MuZero's run; AlphaZero's plays through `moozi gtp` in the test below (one engine process each).
    run_dir = tiny_go9_run(tmp_path_factory, "muzero")
    script = (
        "protocol_version\n1 boardsize 13\n2 boardsize 9\nclear_board\n"
        "3 genmove b\n4 genmove w\n5 genmove b\n6 genmove w\n7 final_score\n8 quit\nname\n"
    )
    result = subprocess.run([sys.executable, "-m", "moozi.cli", "gtp", str(run_dir)], input=script.encode(),
                            capture_output=True, timeout=540)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    *responses, tail = result.stdout.decode().split("\n\n")
    assert tail == ""
    assert len(responses) == 10, responses
    assert responses[:4] == ["= 2", "?1 unacceptable size", "=2 ", "= "]
    assert responses[9] == "=8 "
    # Referee: the generated moves are legal, in turn, and the score is the area score of the result.
    state = new_go_game(9, 7.5, 400).new_initial_state()
    for number, response in zip((3, 4, 5, 6), responses[4:8]):
        marker, vertex = response.split(" ")
        assert marker == f"={number}"
        assert play_move(state, point_to_action(parse_vertex(vertex), 9)) is None, response
    assert responses[8] == f"=7 {format_score(area_score(board_array(state, 9), 7.5))}"


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@pytest.mark.slow
def test_agent_player_joins_a_game_in_progress(tmp_path_factory):
    from moozi.play import load_agent

    eng = engine_for_agent(load_agent(tiny_go9_run(tmp_path_factory)))
    assert (eng.board_size, eng.komi) == (9, 7.5)
    assert session(eng, "play b E5", "play w C3", "play b G7") == ["= \n\n"] * 3
    black, white = session(eng, "genmove b", "genmove w")  # black again: a white pass goes in between
    moves = []
    for reply in (black, white):
        assert reply.startswith("= ") and reply.endswith("\n\n"), reply
        moves.append(point_to_action(parse_vertex(reply[2:-2]), 9))
    e5, c3, g7, pass_ = 40, 20, 60, 81
    assert eng.state.history() == [e5, c3, g7, pass_, *moves]


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@pytest.mark.slow
def test_moozi_gtp_moves_equal_the_openspiel_bots(tmp_path_factory):
    """The same agent through `moozi gtp` (a subprocess, GTP vertices, `komi`) and through
    `load_agent(...).as_openspiel_bot` on the OpenSpiel game the engine plays: the same moves; and the
    engine's answers to a GTP controller's usual commands around them, scored with the komi it was given."""
    from moozi.play import load_agent

    run_dir = tiny_go9_run(tmp_path_factory, "alphazero")
    script = ("protocol_version\n1 boardsize 13\n2 boardsize 9\nclear_board\nkomi 6.5\nplay b C3\nplay w G7\n"
              "3 genmove b\n4 genmove w\n5 genmove b\n6 final_score\n7 quit\n")
    result = subprocess.run([sys.executable, "-m", "moozi.cli", "gtp", str(run_dir)], input=script.encode(),
                            capture_output=True, timeout=540)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    *responses, tail = result.stdout.decode().split("\n\n")
    assert tail == "" and len(responses) == 12, responses
    assert responses[:7] == ["= 2", "?1 unacceptable size", "=2 ", "= ", "= ", "= ", "= "]
    assert [r.split(" ")[0] for r in responses[7:10]] == ["=3", "=4", "=5"] and responses[11] == "=7 "
    gtp_moves = [point_to_action(parse_vertex(r.split(" ")[1]), 9) for r in responses[7:10]]

    agent = load_agent(run_dir)
    bots = [agent.as_openspiel_bot(player) for player in (0, 1)]
    state = new_go_game(9, 6.5, 810).new_initial_state()  # the engine's game: komi 6.5, 10 * N * N plies
    c3, g7 = 2 * 9 + 2, 6 * 9 + 6
    for action in (c3, g7):
        state.apply_action(action)
    bot_moves = []
    for _ in range(3):
        bot_moves.append(bots[state.current_player()].step(state))
        state.apply_action(bot_moves[-1])
    assert gtp_moves == bot_moves
    # The moves are legal in turn (the bots' game applied them), and the score is that game's area score.
    assert responses[10] == f"=6 {format_score(area_score(board_array(state, 9), 6.5))}"


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@pytest.mark.slow
def test_a_game_past_pgx_s_default_length_still_gets_a_move(tmp_path_factory):
    from moozi.play import load_agent

    eng = engine_for_agent(load_agent(tiny_go9_run(tmp_path_factory, "alphazero")))
    rng = np.random.default_rng(0)
    while len(eng.state.history()) < 170:  # past the 162 plies at which pgx's go_9x9 stops by default
        stones = [a for a in eng.state.legal_actions() if a != 81 and play_move(eng.state.clone(), a) is None]
        action = int(rng.choice(stones)) if stones else 81
        colour = "b" if eng.state.current_player() == 0 else "w"
        assert eng.respond(f"play {colour} {action_to_vertex(action, 9)}\n") == "= \n\n"
    colour = "b" if eng.state.current_player() == 0 else "w"
    reply = eng.respond(f"genmove {colour}\n")
    assert reply.startswith("= ") and reply != "= pass\n\n", reply
    assert len(eng.state.history()) == 171
