"""bench/backgammon_probe.py plays each way of choosing a move, both seats, on an untrained agent."""

import pytest

from bench.backgammon_probe import WAYS, main, probe
from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
from moozi.config import build_config
from moozi.core.train_step import agent_variables, init_train_state
from moozi.play.trained_agent import Agent


@pytest.mark.slow  # ~25 s: tracing pgx's backgammon step vmapped over every checker move, and the bot's
def test_every_way_plays_from_both_seats_against_both_opponents():
    config = build_config("backgammon", overrides={"planner.num_simulations": "2", "network.mlp_hidden_sizes": "16",
                                                   "network.mlp_hidden_state_size": "8", "network.head_hidden": "8"})
    spec = env_spec(config)
    network = build_network(config, spec)
    state = init_train_state(network, config.optimizer, seed_key(0, 0), example_stacked_obs(config, spec))
    # The searches are load_agent's (played by evaluate's tests, the greedy choice by test_planner's).
    ways = [way for way in WAYS if not way.startswith("search")]
    # 40 steps of each game: whole games of an untrained agent take minutes here (a few hundred steps).
    rows = probe(Agent(config, agent_variables(state, "online")), games=2, ways=ways, max_steps=40)
    assert [(r["way"], r["opponent"]) for r in rows] == [(w, o) for w in ways for o in ("random", "pipcount")]
    for row in rows:
        assert row["finished"] == 0 and row["wins"] == sum(row["wins_by_seat"]) == 0  # unfinished: not won
        assert all(0 <= w <= 1 for w in row["wins_by_seat"])
        low, high = row["win_rate_ci95"]
        assert 0.0 <= low <= row["wins"] / 2 <= high <= 1.0


def test_unknown_ways_are_named(capsys):
    with pytest.raises(SystemExit):
        main(["some-run", "--ways", "search,rollout"])
    assert "--ways: unknown rollout; known: search, search_visits, prior, afterstate, next_position" in capsys.readouterr().err
