"""`load_agent`: greedy play by default, the training workers' sampled search with `sample=True`,
the online or the target network as the run's config says, the play-time simulations."""

import chex
import jax
import numpy as np
import pyspiel
import pytest

from tests.helpers.tiny_connect_four import fresh_run, fresh_variables

from moozi.play import load_agent
from moozi.builders import env_options, env_spec
from moozi.config import load_saved_config
from moozi.core.train_step import agent_variables
from moozi.runs.checkpoint import save_checkpoint
from moozi.envs.base import DUMMY_ACTION
from moozi.envs.registry import make_host_env
from moozi.errors import MooziError


@pytest.mark.parametrize("search_policy", ["gumbel_muzero", "muzero"])
@pytest.mark.slow
def test_sampled_play_varies_where_greedy_repeats_one_move(tmp_path, search_policy):
    # Untrained parameters on real MinAtar Breakout: the greedy search answers the same position
    # the same way every time; the sampled one (Gumbel noise, or Dirichlet noise and visit-count
    # sampling) answers it differently.
    run = fresh_run(tmp_path / "run", "breakout", **{"planner.search_policy": search_policy})
    moves = {}
    for sample in (False, True):
        agent = load_agent(run, sample=sample)
        assert agent.sample is sample
        step = make_host_env(agent.config.game, **env_options(agent.config)).reset(seed=0)
        moves[sample] = {agent.act(agent.new_history(), step, DUMMY_ACTION)[1] for _ in range(24)}
    assert len(moves[False]) == 1
    assert len(moves[True]) > 1
    assert all(step.legal_actions[a] for a in moves[True])


@pytest.mark.parametrize("agent_network", ["online", "target"])
@pytest.mark.slow
def test_the_agent_plays_the_network_its_config_names(tmp_path, agent_network):
    # A checkpoint whose target network differs from the online one (as after a moving average):
    # `train.agent_network` decides which of the two `load_agent` (and so `moozi eval`) plays.
    run = fresh_run(tmp_path / "run", "breakout", **{"train.agent_network": agent_network})
    config = load_saved_config(run / "config.json")
    state, _ = fresh_variables(config)
    state = state.replace(target_params=jax.tree.map(lambda x: x + 1.0, state.params))
    save_checkpoint(run, 1, train_state=state, arrays={}, meta={"game": env_spec(config).name})
    agent = load_agent(run, checkpoint="latest")
    chex.assert_trees_all_equal(agent.variables, agent_variables(state, agent_network))
    other = "online" if agent_network == "target" else "target"
    with pytest.raises(AssertionError):
        chex.assert_trees_all_equal(agent.variables["params"], agent_variables(state, other)["params"])


def test_play_time_simulations_come_from_the_run_unless_asked_for(tmp_path):
    # The run trains with 4 simulations (TINY) and plays with planner.play_simulations = 12; a
    # sampled agent acts as the training workers do; `simulations=N` asks for N either way.
    run = fresh_run(tmp_path / "run", "connect_four", **{"planner.play_simulations": 12})
    assert load_agent(run).simulations == 12
    assert load_agent(run).planner.gumbel_scale == 0.0  # still greedy
    assert load_agent(run, sample=True).simulations == 4
    assert load_agent(run, simulations=6).simulations == 6
    assert load_agent(run, sample=True, simulations=6).simulations == 6
    unset = fresh_run(tmp_path / "unset", "connect_four")
    assert load_agent(unset).simulations == 4  # no play-time count: the training one


@pytest.mark.parametrize("simulations", [0, -3, 2.5, True])
def test_simulations_must_be_a_positive_integer(tmp_path, simulations):
    run = fresh_run(tmp_path / "run", "connect_four")
    with pytest.raises(MooziError, match="simulations must be a positive integer"):
        load_agent(run, simulations=simulations)


@pytest.mark.slow
def test_the_search_spends_exactly_the_simulations_asked_for(tmp_path):
    # PUCT's root visit counts are the simulations themselves: every share is a multiple of 1/N.
    run = fresh_run(tmp_path / "run", "connect_four", **{"planner.search_policy": "muzero"})
    step = make_host_env("connect_four").reset(seed=0)
    for n in (3, 10):
        agent = load_agent(run, simulations=n)
        agent.act(agent.new_history(), step, DUMMY_ACTION)
        visits = agent.last_search.root.visit_share * n
        np.testing.assert_allclose(visits, np.round(visits), atol=1e-4)
        assert round(float(visits.sum())) == n


@pytest.mark.slow
def test_a_forced_win_found_with_n_simulations_stays_found_with_4n(tmp_path):
    # AlphaZero mode with untrained parameters: whatever the search finds, the rules found. x to
    # move in  o . x x . . o  (bottom row): column 4 makes an open three that o cannot block at
    # both ends, the only move that wins. 128 simulations find it (64 did not, with these
    # parameters), and so do 512: more search only looks deeper.
    run = fresh_run(tmp_path / "run", "connect_four", agent="alphazero",
                    **{"planner.search_policy": "gumbel_muzero", "planner.max_num_considered_actions": 7})
    state = pyspiel.load_game("connect_four").new_initial_state()
    for column in (2, 0, 3, 6):
        state.apply_action(column)
    columns = {n: load_agent(run, simulations=n).as_openspiel_bot(0).step(state) for n in (128, 512)}
    assert columns == {128: 4, 512: 4}
