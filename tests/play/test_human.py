"""Human play in the terminal, driven by scripted input against a deterministic stand-in bot."""

import pyspiel
import pytest

from moozi.errors import MooziError
from moozi.play.human import play_human


class _FirstLegalBot(pyspiel.Bot):
    """Always plays the lowest-numbered legal action; records what it was told."""

    def __init__(self, informed):
        pyspiel.Bot.__init__(self)
        self.informed = informed

    def restart_at(self, state):
        self.informed.clear()

    def inform_action(self, state, player_id, action):
        self.informed.append((player_id, action))

    def step(self, state):
        return min(state.legal_actions())


class FirstLegalAgent:
    def __init__(self):
        self.seats, self.informed = [], []

    def as_openspiel_bot(self, player_id):
        self.seats.append(player_id)
        return _FirstLegalBot(self.informed)


class Script:
    """An input_fn that answers prompts from a list, then raises EOFError like a closed terminal."""

    def __init__(self, *answers):
        self.answers, self.prompts = list(answers), []

    def __call__(self, prompt):
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)


def _run(agent, script, **kwargs):
    lines = []
    outcome = play_human(agent, "tic_tac_toe", input_fn=script, output_fn=lines.append, **kwargs)
    return outcome, "\n".join(lines), lines


def test_bad_input_reprompts_then_the_human_wins():
    # Human is x (player 0); the agent, o, always takes the lowest free square.
    # x 4, o 0, x "99"/"hello"/occupied 0/occupied "o(0,0)" then 2, o 1, x 6: diagonal 2-4-6.
    agent = FirstLegalAgent()
    script = Script("4", "99", "hello", "0", "x(0,0)", "", "X(0,2)", "6")
    outcome, text, lines = _run(agent, script, human_player=0)
    assert outcome == 1
    assert agent.seats == [1]
    assert lines[-1] == "Game over: you win!"
    assert "99 is not a legal move now; type one of the numbers listed." in lines
    assert "'hello' is not a move; type a number or a name from the list (or quit)." in lines
    assert "0 is not a legal move now; type one of the numbers listed." in lines
    assert "x(0,0) is not a legal move now; pick one from the list." in lines
    assert "Type a move number or name from the list (or quit)." in lines
    assert "The agent plays o(0,0) (0)." in lines and "The agent plays o(0,1) (1)." in lines
    assert len(script.prompts) == 8
    assert all(p == "Your move as player 0 (number or name, 'quit' to stop): " for p in script.prompts)
    # The agent's bot was told each of the human's moves, as OpenSpiel's evaluate_bots does.
    assert agent.informed == [(0, 4), (0, 2), (0, 6)]
    assert "Traceback" not in text


def test_board_and_legal_moves_are_shown():
    script = Script("4", "2", "6")
    _, text, lines = _run(FirstLegalAgent(), script, human_player=0)
    assert "...\n...\n..." in text  # the empty board, as OpenSpiel prints it
    first_listing = next(line for line in lines if line.startswith("Legal moves:"))
    assert "0: x(0,0)" in first_listing and "4: x(1,1)" in first_listing and "8: x(2,2)" in first_listing
    later_listing = [line for line in lines if line.startswith("Legal moves:")][1]
    assert "4: x(1,1)" not in later_listing and "0: x(0,0)" not in later_listing


def test_human_asked_for_a_seat_and_agent_wins():
    # Human picks player 1 after one bad answer; the agent, x, takes 0, 1, 2 while o plays 4 and 5.
    agent = FirstLegalAgent()
    script = Script("maybe", "1", "4", "o(1,2)")
    outcome, text, lines = _run(agent, script)
    assert outcome == -1
    assert agent.seats == [0]
    assert script.prompts[:2] == ["Play as player 0 (moves first) or player 1? [0/1]: "] * 2
    assert "Please answer 0 or 1 (or quit), not 'maybe'." in lines
    assert "You are player 1, the agent is player 0. Player 0 moves first." in lines
    assert lines[-1] == "Game over: the agent wins."


def test_draw_is_reported():
    # Agent x takes the lowest free square: x0 o1 x2 o4 x3 o6 x5 o8 x7, a full board with no line.
    outcome, _, lines = _run(FirstLegalAgent(), Script("1", "4", "6", "8"), human_player=1)
    assert outcome == 0
    assert lines[-1] == "Game over: it's a draw."


@pytest.mark.parametrize("answers", [("quit",), ("4", "QUIT"), ()])
def test_quit_or_end_of_input_ends_cleanly_as_a_loss(answers):
    outcome, text, lines = _run(FirstLegalAgent(), Script(*answers), human_player=0)
    assert outcome == -1
    assert lines[-2:] == ["You quit.", "Game over: the agent wins."]
    assert "Traceback" not in text


def test_quit_while_choosing_a_seat():
    outcome, _, lines = _run(FirstLegalAgent(), Script("quit"))
    assert outcome == -1 and lines[-1] == "Game over: the agent wins."


def test_bad_seat_and_non_two_player_games_are_user_errors():
    with pytest.raises(MooziError, match="human_player must be 0, 1 or None"):
        play_human(FirstLegalAgent(), "tic_tac_toe", human_player=2, input_fn=Script(), output_fn=lambda _: None)
    with pytest.raises(MooziError, match="not a two-player OpenSpiel game"):
        play_human(FirstLegalAgent(), "openspiel:catch", human_player=0, input_fn=Script(), output_fn=lambda _: None)
