"""play_batch's bookkeeping on a real OpenSpiel game whose every move is known in advance."""

import numpy as np

from moozi.builders import make_vector_env
from moozi.config import build_config
from moozi.core.acting import ActingOutput
from moozi.evaluation.vector_matches import play_batch


def _lowest_legal_move(step):
    return np.argmax(np.asarray(step.legal_actions), axis=-1).astype(np.int32)


def test_the_first_player_wins_when_both_play_their_lowest_legal_move():
    # Both sides take the lowest free cell: X 0, O 1, X 2, O 3, X 4, O 5, X 6, and X's 2-4-6
    # diagonal wins on the seventh move. The agent holds seat i % 2 in game i, so it wins the
    # even games and loses the odd ones, each with one point. (The step arrays of a VectorEnv are
    # rewritten in place by the next step: this once counted every result for the other player.)
    config = build_config("tic_tac_toe")
    env = make_vector_env(config, 6, seed=0)

    def act(variables, history, step, last_action, env_state, key):
        return history, ActingOutput(_lowest_legal_move(step), None, None, None, None)

    try:
        played = play_batch(act, None, env, history_length=1, obs_shape=env.spec.obs_shape, is_two_player=True,
                            seed=0, max_steps=20, opponent=lambda step, env, to_move: _lowest_legal_move(step))
    finally:
        env.close()
    np.testing.assert_array_equal(played.agent_seat, [0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(played.finished, True)
    np.testing.assert_array_equal(played.outcome, [1, -1, 1, -1, 1, -1])
    np.testing.assert_array_equal(played.points, [1, -1, 1, -1, 1, -1])
