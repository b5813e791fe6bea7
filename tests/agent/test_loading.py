"""`load_agent`: greedy play by default, the training workers' sampled search with `sample=True`."""

import pytest

from tests.helpers.tiny_connect_four import fresh_run

from moozi.agent import load_agent
from moozi.builders import env_options
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
