"""bench/episode_end.py: the discounted return each stored step then got, by hand."""

from __future__ import annotations

import importlib

import numpy as np

episode_end = importlib.import_module("bench.episode_end")


def test_discounted_returns_stay_inside_each_episode():
    # Two episodes in consecutive slots (T = 3 with rewards 0, 1, 2; T = 2 with 0, 5), then an empty slot.
    reward = np.array([0.0, 1.0, 2.0, 0.0, 5.0, 7.0], np.float32)
    step_index = np.array([0, 1, 2, 0, 1, 0])
    episode_length = np.array([3, 3, 3, 2, 2, 0])
    returns = episode_end.discounted_returns(reward, step_index, episode_length, discount=0.5)
    np.testing.assert_allclose(returns, [1.0 + 0.5 * 2.0, 2.0, 0.0, 5.0, 0.0, 0.0])
