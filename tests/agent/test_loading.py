"""`load_agent`: greedy play by default, the training workers' sampled search with `sample=True`,
the online or the target network as the run's config says."""

import chex
import jax
import pytest

from tests.helpers.tiny_connect_four import fresh_run, fresh_variables

from moozi.agent import load_agent
from moozi.builders import env_options, env_spec
from moozi.config import load_saved_config
from moozi.core.train_step import agent_variables
from moozi.runs.checkpoint import save_checkpoint
from moozi.envs.base import DUMMY_ACTION
from moozi.envs.registry import make_host_env


@pytest.mark.parametrize("search_policy", ["gumbel_muzero", "muzero"])
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
