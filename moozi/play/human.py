"""A person plays an agent in the terminal (`moozi play RUN_DIR`).

The agent moves through its OpenSpiel bot (`agent.as_openspiel_bot(player_id)`),
so this works for any two-player OpenSpiel game moozi plays. Input and output
go through `input_fn` / `output_fn`, which tests replace with scripts.
"""

from __future__ import annotations

import re
import textwrap
from typing import Callable

import numpy as np
import pyspiel

from moozi.errors import MooziError
from moozi.envs.openspiel import load_two_player_game

__all__ = ["play_human"]

_QUIT_WORDS = frozenset({"quit", "exit", "q", "resign"})
_SEAT_WORDS = {"0": 0, "1": 1, "first": 0, "second": 1}


class _Quit(Exception):
    """The person typed quit, or input ended (EOF / Ctrl-C)."""


def _normalise(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _ask(input_fn: Callable[[str], str], prompt: str) -> str:
    try:
        text = input_fn(prompt)
    except (EOFError, KeyboardInterrupt):
        raise _Quit from None
    if text.strip().lower() in _QUIT_WORDS:
        raise _Quit
    return text.strip()


def _ask_seat(input_fn, output_fn) -> int:
    while True:
        answer = _ask(input_fn, "Play as player 0 (moves first) or player 1? [0/1]: ").lower()
        if answer in _SEAT_WORDS:
            return _SEAT_WORDS[answer]
        output_fn(f"Please answer 0 or 1 (or quit), not {answer!r}.")


def _action_names(state: pyspiel.State, player: int, actions) -> dict[int, str]:
    names = {}
    for action in actions:
        try:
            names[action] = state.action_to_string(player, action)
        except pyspiel.SpielError:  # some games cannot name actions that are illegal here
            pass
    return names


def _parse_move(text: str, state: pyspiel.State, player: int, legal: dict[int, str]) -> tuple[int | None, str]:
    """(the action the person meant, or None with the reason to show them)."""
    if re.fullmatch(r"[+-]?\d+", text):
        action = int(text)
        if action in legal:
            return action, ""
        return None, f"{action} is not a legal move now; type one of the numbers listed."
    wanted = _normalise(text)
    for action, name in legal.items():
        if _normalise(name) == wanted:
            return action, ""
    every = _action_names(state, player, range(state.get_game().num_distinct_actions()))
    if any(_normalise(name) == wanted for name in every.values()):
        return None, f"{text} is not a legal move now; pick one from the list."
    return None, f"{text!r} is not a move; type a number or a name from the list (or quit)."


def _human_move(state, player, input_fn, output_fn) -> int:
    legal = _action_names(state, player, state.legal_actions())
    listing = "  ".join(f"{action}: {name}" for action, name in legal.items())
    output_fn("Legal moves:\n" + textwrap.fill(listing, width=78, initial_indent="  ", subsequent_indent="  "))
    while True:
        text = _ask(input_fn, f"Your move as player {player} (number or name, 'quit' to stop): ")
        if not text:
            output_fn("Type a move number or name from the list (or quit).")
            continue
        action, problem = _parse_move(text, state, player, legal)
        if action is not None:
            return action
        output_fn(problem)


def _outcome_line(outcome: int) -> str:
    return {1: "Game over: you win!", 0: "Game over: it's a draw.", -1: "Game over: the agent wins."}[outcome]


def play_human(
    agent,
    game_name: str,
    *,
    human_player: int | None = None,
    input_fn: Callable[[str], str] = input,
    output_fn: Callable[[str], None] = print,
    seed: int = 0,
) -> int:
    """Plays one game of `game_name` between a person and `agent`; returns +1/0/-1 for the person.

    The person picks a seat when `human_player` is None. Moves are typed as the
    action number or OpenSpiel's action name (e.g. `x(1,1)`); bad input is
    answered with a short message and a new prompt. Typing quit (or ending the
    input) resigns: the game ends cleanly and counts as a loss (-1).
    """
    game = load_two_player_game(game_name)
    if human_player is not None and human_player not in (0, 1):
        raise MooziError(f"human_player must be 0, 1 or None (ask), got {human_player!r}")
    rng = np.random.RandomState(seed)  # chance outcomes
    try:
        human = human_player if human_player is not None else _ask_seat(input_fn, output_fn)
        machine = 1 - human
        output_fn(f"You are player {human}, the agent is player {machine}. Player 0 moves first.")
        state = game.new_initial_state()
        bot = agent.as_openspiel_bot(machine)
        bot.restart_at(state)
        while not state.is_terminal():
            player = state.current_player()
            if state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes())
                action = int(rng.choice(outcomes, p=probs))
                output_fn(f"Chance: {state.action_to_string(player, action)}")
                bot.inform_action(state, player, action)
            elif player == human:
                output_fn("")
                output_fn(str(state))
                action = _human_move(state, player, input_fn, output_fn)
                bot.inform_action(state, player, action)
            else:
                action = bot.step(state)
                output_fn(f"The agent plays {state.action_to_string(player, action)} ({action}).")
            state.apply_action(action)
    except _Quit:
        output_fn("You quit.")
        output_fn(_outcome_line(-1))
        return -1
    output_fn("")
    output_fn(str(state))
    returns = state.returns()
    outcome = int(np.sign(returns[human] - returns[machine]))
    output_fn(_outcome_line(outcome))
    return outcome
