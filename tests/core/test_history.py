"""History stacking (thesis 5.2.6) and the batched history state used by acting."""

import chex
import jax.numpy as jnp
import numpy as np
from absl.testing import parameterized

from moozi.envs.base import DUMMY_ACTION
from moozi.core.history import HistoryState, history_input, init_history, push_history, stack_history

A = 3  # augmented actions: dummy + 2
OBS_SHAPE = (1, 2, 1)  # H=1, W=2, C=1


def _frame(value: float) -> np.ndarray:
    """A tiny frame whose two pixels are (value, value + 0.5)."""
    return np.array([[[value], [value + 0.5]]], np.float32)  # [1, 2, 1]


class StackHistoryTest(parameterized.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_channel_layout_frames_then_action_planes(self):
        # L = 2 frames of shape (1, 2, 2) and actions (1, 2).
        frames = np.array(
            [[[[1.0, 2.0], [3.0, 4.0]]], [[[5.0, 6.0], [7.0, 8.0]]]], np.float32
        )  # [L=2, H=1, W=2, C=2]
        actions = np.array([1, 2], np.int32)
        out = self.variant(stack_history, static_argnums=2)(frames, actions, A)
        # Channels: frame0 (2), frame1 (2), one_hot(1)/3, one_hot(2)/3.
        third = 1.0 / 3.0
        expected_pixel0 = [1.0, 2.0, 5.0, 6.0, 0.0, third, 0.0, 0.0, 0.0, third]
        expected_pixel1 = [3.0, 4.0, 7.0, 8.0, 0.0, third, 0.0, 0.0, 0.0, third]
        np.testing.assert_allclose(np.asarray(out), np.array([[expected_pixel0, expected_pixel1]]), rtol=1e-6)
        self.assertEqual(out.dtype, jnp.float32)


class HistoryStateTest(parameterized.TestCase):
    def test_init_is_zero_frames_and_dummy_actions(self):
        state = init_history(batch_size=2, history_length=3, obs_shape=OBS_SHAPE)
        self.assertIsInstance(state, HistoryState)
        self.assertEqual(state.frames.shape, (2, 3, *OBS_SHAPE))
        self.assertEqual(state.frames.dtype, jnp.float32)
        self.assertEqual(state.actions.shape, (2, 3))
        self.assertEqual(state.actions.dtype, jnp.int32)
        np.testing.assert_array_equal(np.asarray(state.frames), 0.0)
        np.testing.assert_array_equal(np.asarray(state.actions), DUMMY_ACTION)

    @chex.variants(with_jit=True, without_jit=True)
    def test_push_appends_obs_and_action_that_led_to_it(self):
        push = self.variant(push_history)
        state = init_history(batch_size=1, history_length=3, obs_shape=OBS_SHAPE)
        # t = 0: the first step; its last_action (2) belongs to nothing and is replaced by the dummy.
        state = push(state, _frame(10.0)[None], np.array([True]), np.array([2], np.int32))
        np.testing.assert_array_equal(np.asarray(state.actions), [[0, 0, 0]])
        np.testing.assert_array_equal(np.asarray(state.frames)[0], np.stack([np.zeros(OBS_SHAPE), np.zeros(OBS_SHAPE), _frame(10.0)]))
        # t = 1 after action 1; t = 2 after action 2; t = 3 after action 1 (o_0 drops out).
        for value, action in ((20.0, 1), (30.0, 2), (40.0, 1)):
            state = push(state, _frame(value)[None], np.array([False]), np.array([action], np.int32))
        np.testing.assert_array_equal(np.asarray(state.frames)[0], np.stack([_frame(20.0), _frame(30.0), _frame(40.0)]))
        # At t = 3 the actions are a_0..a_2 = 1, 2, 1 (a_{t-L}..a_{t-1}).
        np.testing.assert_array_equal(np.asarray(state.actions), [[1, 2, 1]])

        stacked = np.asarray(history_input(state, A))  # [1, 1, 2, 3*(1+3)]
        self.assertEqual(stacked.shape, (1, 1, 2, 12))
        third = 1.0 / 3.0
        np.testing.assert_allclose(
            stacked[0, 0, 0], [20.0, 30.0, 40.0, 0.0, third, 0.0, 0.0, 0.0, third, 0.0, third, 0.0], rtol=1e-6
        )
        np.testing.assert_allclose(stacked[0, 0, 1, :3], [20.5, 30.5, 40.5], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_history_input_before_t0_is_zero_frames_and_dummy_planes(self):
        state = push_history(
            init_history(1, 2, OBS_SHAPE), _frame(1.0)[None], np.array([True]), np.array([1], np.int32)
        )
        stacked = np.asarray(self.variant(history_input, static_argnums=1)(state, A))
        third = 1.0 / 3.0
        # frames: zero, o_0; actions: dummy, dummy.
        np.testing.assert_allclose(stacked[0, 0, 0], [0.0, 1.0, third, 0.0, 0.0, third, 0.0, 0.0], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_is_first_resets_only_its_row(self):
        push = self.variant(push_history)
        state = init_history(batch_size=2, history_length=2, obs_shape=OBS_SHAPE)
        obs = np.stack([_frame(1.0), _frame(2.0)])
        state = push(state, obs, np.array([True, True]), np.array([0, 0], np.int32))
        state = push(state, np.stack([_frame(3.0), _frame(4.0)]), np.array([False, False]), np.array([1, 2], np.int32))
        # Row 1 starts a new episode; row 0 carries on.
        state = push(state, np.stack([_frame(5.0), _frame(6.0)]), np.array([False, True]), np.array([2, 1], np.int32))
        frames = np.asarray(state.frames)
        np.testing.assert_array_equal(frames[0], np.stack([_frame(3.0), _frame(5.0)]))
        np.testing.assert_array_equal(frames[1], np.stack([np.zeros(OBS_SHAPE), _frame(6.0)]))
        np.testing.assert_array_equal(np.asarray(state.actions), [[1, 2], [0, 0]])
