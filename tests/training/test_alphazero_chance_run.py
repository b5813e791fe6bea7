"""`moozi train 2048 --set agent=alphazero --set planner.chance_search=exact`, tiny: AlphaZero mode with
chance nodes (moozi/core/alphazero_chance.py) through the driver, the Anakin self-play and the test."""

import dataclasses

import pytest
from tests.helpers.tiny import TINY, run_driver

from moozi.config import build_config, load_saved_config


@pytest.mark.slow  # ~40 CPU-seconds, much of it compiling
def test_a_tiny_2048_run_searches_with_chance_nodes(tmp_path):
    overrides = {**TINY, "agent": "alphazero", "planner.chance_search": "exact", "env.num_envs": "4",
                 "train.rollout_steps": "25", "train.test_every_updates": "4", "train.test_max_steps": "30",
                 "train.test_episodes": "2", "replay.min_fill": "50"}
    config = build_config("2048", overrides=overrides)  # 2048 games last 100-250 moves: 250 per env
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, max_env_steps=1000))
    summary = run_driver(config, tmp_path / "run")
    assert summary["env_steps"] == 1000 and summary["updates"] > 0 and summary["tests"] >= 1
    saved = load_saved_config(tmp_path / "run" / "config.json")
    assert (saved.agent, saved.game, saved.planner.chance_search) == ("alphazero", "pgx:2048", "exact")
    # `moozi eval RUN` plays it: the agent searches from the JAX state the host env holds.
    from moozi.evaluation import evaluate
    from moozi.play import load_agent

    agent = load_agent(tmp_path / "run")
    assert agent.needs_env_state
    result = evaluate(agent, agent.config.game, "random", 2, seed=0, max_steps=20)
    assert result.games == 2 and all(r >= 0 for r in result.returns)


@pytest.mark.slow  # ~60 CPU-seconds: 1,200 steps of search, 20 updates, 5 tests and two games of eval
def test_a_tiny_backgammon_run_searches_with_chance_nodes(tmp_path, monkeypatch):
    # `moozi train backgammon --set agent=alphazero --set planner.chance_search=exact`, tiny: the rolls
    # are chance nodes (21 outcomes where the turn passes, one within a turn).
    # Only finished games reach the replay, and random-ish backgammon games last 120-650 moves: 600 per env.
    overrides = {**TINY, "agent": "alphazero", "planner.chance_search": "exact", "env.num_envs": "2",
                 "train.rollout_steps": "50", "train.test_every_updates": "4", "train.test_max_steps": "30",
                 "train.test_episodes": "2", "replay.min_fill": "50"}
    config = build_config("backgammon", overrides=overrides)
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, max_env_steps=1200))
    summary = run_driver(config, tmp_path / "run")
    assert summary["env_steps"] == 1200 and summary["updates"] > 0 and summary["tests"] >= 1
    saved = load_saved_config(tmp_path / "run" / "config.json")
    assert (saved.agent, saved.game, saved.planner.chance_search) == ("alphazero", "pgx:backgammon", "exact")
    # `moozi eval RUN` plays it: a two-player JAX game without an OpenSpiel twin is played in moozi's own
    # batch (moozi/evaluation/vector_matches.py), the search handed the batch's pgx states.
    # Games cut after 60 moves (a cut game counts as a draw): the search over the batch's states is
    # what is tested, and a near-random agent's whole games last hundreds of moves.
    from moozi.evaluation import evaluate, matches
    from moozi.play import load_agent

    monkeypatch.setattr(matches, "_BATCH_MAX_STEPS", 60)
    agent = load_agent(tmp_path / "run")
    assert agent.needs_env_state
    result = evaluate(agent, agent.config.game, "random", 2, seed=0)
    assert result.games == 2 and result.wins + result.draws + result.losses == 2
