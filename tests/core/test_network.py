"""The learned model (thesis 5.2.7): shapes, batch-norm modes, hidden-state scaling."""

import dataclasses
import functools

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from moozi.core.history import stack_history
from moozi.core.network import (NetworkConfig, NetworkOutput, _ConstantPlanesConv, _normalize, board_taps,
                                 make_network)
from moozi.core.scalar import logits_to_scalar
from moozi.errors import MooziError

B, L, A = 3, 2, 4
SMALL_RESNET = NetworkConfig(
    kind="resnet", channels=8, representation_blocks=2, prediction_blocks=1, dynamics_blocks=1, head_hidden=16
)
SMALL_MLP = NetworkConfig(kind="mlp", mlp_hidden_sizes=(32,), mlp_hidden_state_size=16, head_hidden=16)
CASES = (
    ("resnet", SMALL_RESNET, (10, 10, 4), (10, 10, 8)),
    ("mlp", SMALL_MLP, (1, 1, 6), (16,)),
)


@functools.cache
def _build(config, obs_shape, jit=True):
    """A network, its variables and a batch of inputs; with jit, every function of the bundle is jitted.

    Eager Flax compiles every primitive it dispatches, so the tests that are
    not about jit-vs-eager run compiled programs.
    """
    network = make_network(config, obs_shape=obs_shape, history_length=L, num_actions=A)
    if jit:
        fields = ("init", "initial_inference", "recurrent_inference", "project")
        fields += ("initial_inference_train", "recurrent_inference_train", "project_train")
        network = dataclasses.replace(network, **{f: jax.jit(getattr(network, f)) for f in fields})
    obs = jnp.asarray(np.random.default_rng(1).uniform(size=(B, *network.input_shape)), jnp.float32)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), obs)
    return network, variables, obs


def _trees_equal(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))


class NetworkTest(parameterized.TestCase):
    @parameterized.named_parameters(*CASES)
    def test_input_channels_follow_history_layout(self, config, obs_shape, hidden_shape):
        network = make_network(config, obs_shape=obs_shape, history_length=L, num_actions=A)
        assert network.input_shape == (*obs_shape[:2], L * (obs_shape[2] + A))
        assert network.hidden_state_shape == hidden_shape

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.named_parameters(*CASES)
    @pytest.mark.slow
    def test_output_shapes(self, config, obs_shape, hidden_shape):
        network, variables, obs = _build(config, obs_shape, jit=False)
        root = self.variant(network.initial_inference)(variables, obs)
        assert isinstance(root, NetworkOutput)
        chex.assert_shape(root.hidden_state, (B, *hidden_shape))
        chex.assert_shape([root.value, root.reward], (B,))
        chex.assert_shape(root.policy_logits, (B, A))
        chex.assert_shape([root.value_logits, root.reward_logits], (B, 11))
        np.testing.assert_array_equal(root.reward, np.zeros(B))
        # Values are decoded from the value logits, in environment scale.
        decoded = logits_to_scalar(root.value_logits, config.support)
        np.testing.assert_allclose(root.value, decoded, rtol=1e-5, atol=1e-6)

        step = self.variant(network.recurrent_inference)(variables, root.hidden_state, jnp.array([0, 1, 3]))
        chex.assert_shape(step.hidden_state, (B, *hidden_shape))
        chex.assert_shape([step.value, step.reward], (B,))
        chex.assert_shape(step.policy_logits, (B, A))
        chex.assert_shape([step.value_logits, step.reward_logits], (B, 11))
        decoded = logits_to_scalar(step.reward_logits, config.support)
        np.testing.assert_allclose(step.reward, decoded, rtol=1e-5, atol=1e-6)
        chex.assert_tree_all_finite(step)

        projected = self.variant(network.project)(variables, step.hidden_state)
        chex.assert_shape(projected, (B, int(np.prod(hidden_shape))))

    @parameterized.named_parameters(*CASES)
    @pytest.mark.slow
    def test_hidden_state_min_max_scaled_per_example(self, config, obs_shape, hidden_shape):
        network, variables, obs = _build(config, obs_shape)
        root = network.initial_inference(variables, obs)
        step = network.recurrent_inference(variables, root.hidden_state, jnp.array([1, 2, 3]))
        for hidden in (root.hidden_state, step.hidden_state):
            flat = hidden.reshape(B, -1)
            np.testing.assert_allclose(flat.min(axis=1), 0.0, atol=1e-6)
            np.testing.assert_allclose(flat.max(axis=1), 1.0, atol=1e-6)

    def test_hidden_state_scaling_can_be_off(self):
        config = NetworkConfig(**{**SMALL_MLP.__dict__, "scale_hidden_state": False})
        network, variables, obs = _build(config, (1, 1, 6))
        hidden = network.initial_inference(variables, obs).hidden_state
        # Unscaled, the last layer is a relu: non-negative but not normalised to a max of 1.
        assert float(hidden.min()) >= 0.0
        assert not np.allclose(hidden.max(axis=1), 1.0)

    @parameterized.named_parameters(*CASES)
    @pytest.mark.slow
    def test_acting_mode_leaves_batch_stats_and_training_mode_updates_them(self, config, obs_shape, hidden_shape):
        network, variables, obs = _build(config, obs_shape)
        before = jax.tree.map(jnp.copy, variables["batch_stats"])
        root = network.initial_inference(variables, obs)
        network.recurrent_inference(variables, root.hidden_state, jnp.array([0, 1, 2]))
        assert _trees_equal(variables["batch_stats"], before)

        _, stats = network.initial_inference_train(variables, obs)
        assert jax.tree.structure(stats) == jax.tree.structure(before)
        assert not _trees_equal(stats["representation"], before["representation"])
        assert not _trees_equal(stats["prediction"], before["prediction"])
        assert _trees_equal(stats["dynamics"], before["dynamics"])  # g was not called

        _, stats = network.recurrent_inference_train(variables, root.hidden_state, jnp.array([0, 1, 2]))
        assert not _trees_equal(stats["dynamics"], before["dynamics"])
        assert _trees_equal(stats["representation"], before["representation"])

    def test_running_mean_moves_with_configured_momentum(self):
        network, variables, obs = _build(SMALL_MLP, (1, 1, 6))
        _, stats = network.initial_inference_train(variables, obs)
        # The first batch norm sees Dense(obs) with the initial (zero) running mean.
        kernel = variables["params"]["representation"]["_DenseBnRelu_0"]["Dense_0"]["kernel"]
        batch_mean = jnp.mean(obs.reshape(B, -1) @ kernel, axis=0)
        got = stats["representation"]["_DenseBnRelu_0"]["BatchNorm_0"]["mean"]
        np.testing.assert_allclose(got, (1 - SMALL_MLP.batch_norm_momentum) * batch_mean, rtol=1e-4, atol=1e-6)

    @pytest.mark.slow
    def test_acting_mode_is_independent_of_batch_composition(self):
        network, variables, obs = _build(SMALL_RESNET, (10, 10, 4))
        full = network.initial_inference(variables, obs)
        single = network.initial_inference(variables, obs[:1])
        np.testing.assert_allclose(single.value, full.value[:1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(single.policy_logits, full.policy_logits[:1], rtol=1e-5, atol=1e-5)

    def test_thesis_default_sizes(self):
        config = NetworkConfig()
        assert (config.channels, config.representation_blocks, config.prediction_blocks) == (32, 6, 1)
        assert (config.dynamics_blocks, config.head_hidden, config.support.size) == (2, 128, 11)
        network = make_network(config, obs_shape=(10, 10, 4), history_length=L, num_actions=A)
        params = jax.eval_shape(network.init, jax.random.PRNGKey(0), jnp.zeros((1, *network.input_shape)))["params"]
        blocks = [k for k in params["representation"] if k.startswith("_ResidualBlock")]
        assert len(blocks) == 6
        assert len([k for k in params["dynamics"] if k.startswith("_ResidualBlock")]) == 2
        assert len([k for k in params["prediction"] if k.startswith("_ResidualBlock")]) == 1

    def test_unknown_kind_is_rejected(self):
        with pytest.raises(MooziError):
            NetworkConfig(kind="transformer")


@pytest.mark.slow
@pytest.mark.parametrize("normalization", ["layer", "layer_all"])
@pytest.mark.parametrize("name, config, obs_shape, _", CASES)
def test_layer_norm_acts_as_it_trains(name, config, obs_shape, _, normalization):
    """With layer norm there are no running moments: acting and training compute the same outputs,
    for the root and for unrolled states alike (batch norm's moments mix the two)."""
    network, variables, obs = _build(dataclasses.replace(config, normalization=normalization), obs_shape)
    assert variables["batch_stats"] == {}
    acting = network.initial_inference(variables, obs)
    training, batch_stats = network.initial_inference_train(variables, obs)
    assert batch_stats == {}
    np.testing.assert_allclose(acting.policy_logits, training.policy_logits, rtol=1e-5, atol=1e-5)
    action = jnp.arange(B, dtype=jnp.int32) % A
    step = network.recurrent_inference(variables, acting.hidden_state, action)
    step_train, _ = network.recurrent_inference_train(variables, acting.hidden_state, action)
    np.testing.assert_allclose(step.value_logits, step_train.value_logits, rtol=1e-5, atol=1e-5)
    # Batch norm, on the same inputs, does not: acting uses the running moments.
    bn_network, bn_variables, _ = _build(config, obs_shape)
    bn_acting = bn_network.initial_inference(bn_variables, obs)
    bn_training, _ = bn_network.initial_inference_train(bn_variables, obs)
    assert not np.allclose(bn_acting.policy_logits, bn_training.policy_logits, atol=1e-3)


def test_unknown_normalization_is_refused():
    with pytest.raises(MooziError, match="batch, layer, layer_all"):
        NetworkConfig(normalization="group")


def test_whole_layer_norm_keeps_how_much_each_cell_of_a_convolution_sees():
    """"layer" normalises each position's channels apart: a cell seeing twice as much comes out the same
    as one seeing half of it, and an empty cell as the offset alone. "layer_all" normalises over all
    positions and channels together: the cells keep their differences."""
    x = np.zeros((1, 2, 2, 3), np.float32)
    x[0, 0, 0] = [1.0, 2.0, 3.0]
    x[0, 1, 1] = [2.0, 4.0, 6.0]

    class Norm(nn.Module):
        config: NetworkConfig

        @nn.compact
        def __call__(self, x):
            return _normalize(self.config, True, x)

    outputs = {}
    for normalization in ("layer", "layer_all"):
        norm = Norm(NetworkConfig(normalization=normalization))
        variables = norm.init(jax.random.PRNGKey(0), x)
        assert variables["params"]["LayerNorm_0"]["scale"].shape == (3,)  # one scale and offset per channel in both
        outputs[normalization] = np.asarray(norm.apply(variables, x))
    per_position, whole = outputs["layer"], outputs["layer_all"]
    np.testing.assert_allclose(per_position[0, 0, 0], per_position[0, 1, 1], atol=1e-5)
    np.testing.assert_allclose(per_position[0, 0, 1], 0.0, atol=1e-5)
    flat = x.reshape(-1)
    expected = (x - flat.mean()) / np.sqrt(flat.var() + NetworkConfig().batch_norm_epsilon)
    np.testing.assert_allclose(whole, expected, rtol=1e-5, atol=1e-5)
    assert whole[0, 1, 1, 2] > whole[0, 0, 0, 2] > whole[0, 0, 1, 2]


@pytest.mark.parametrize("obs_shape, hidden_side", [((84, 84, 1), 6), ((96, 96, 3), 6), ((10, 10, 4), 1)])
@pytest.mark.slow
def test_downsampling_makes_the_atari_hidden_state_small(obs_shape, hidden_side):
    config = NetworkConfig(downsample=True, channels=8, representation_blocks=1, prediction_blocks=1,
                           dynamics_blocks=1, head_hidden=16)
    planes = np.ones((5, *obs_shape[:2]), bool)  # board cells: meaningless once downsampled, so unused
    network = make_network(config, obs_shape=obs_shape, history_length=4, num_actions=5, action_planes=planes)
    assert network.hidden_state_shape == (hidden_side, hidden_side, 8)
    obs = jnp.asarray(np.random.default_rng(0).uniform(size=(2, *network.input_shape)), jnp.float32)
    variables = network.init(jax.random.PRNGKey(0), obs)
    root = network.initial_inference(variables, obs)
    assert root.hidden_state.shape == (2, hidden_side, hidden_side, 8)
    step = network.recurrent_inference(variables, root.hidden_state, jnp.array([1, 4], jnp.int32))
    assert step.hidden_state.shape == root.hidden_state.shape and step.policy_logits.shape == (2, 5)
    assert np.all(np.isfinite(np.asarray(step.value)))
    (out, _), projected = network.initial_inference_train(variables, obs), network.project(variables, root.hidden_state)
    assert out.hidden_state.shape == root.hidden_state.shape and projected.shape == (2, hidden_side * hidden_side * 8)


@pytest.mark.slow
def test_mlp_convolution_reads_the_planes_before_the_dense_layers():
    """`mlp_conv_channels`: one 3x3 convolution over the H x W planes (MinAtar's DQN torso), its
    H * W * channels features flattened into h's first dense layer; the hidden state keeps its size."""
    config = dataclasses.replace(SMALL_MLP, mlp_conv_channels=5)
    obs_shape = (10, 10, 4)
    network, variables, obs = _build(config, obs_shape)
    representation = variables["params"]["representation"]
    channels_in = L * (obs_shape[2] + A)
    assert representation["_ConvBnRelu_0"]["Conv_0"]["kernel"].shape == (3, 3, channels_in, 5)
    assert representation["_DenseBnRelu_0"]["Dense_0"]["kernel"].shape == (10 * 10 * 5, 32)
    root = network.initial_inference(variables, obs)
    assert root.hidden_state.shape == (B, 16)
    # Without it, the dense layer reads the raw planes.
    plain, plain_variables, _ = _build(SMALL_MLP, obs_shape)
    assert "_ConvBnRelu_0" not in plain_variables["params"]["representation"]
    assert plain_variables["params"]["representation"]["_DenseBnRelu_0"]["Dense_0"]["kernel"].shape == (10 * 10 * channels_in, 32)


def test_negative_mlp_convolution_channels_are_refused():
    with pytest.raises(MooziError, match="network.mlp_conv_channels"):
        NetworkConfig(kind="mlp", mlp_conv_channels=-1)


@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_mlp_dynamics_sees_the_action_features_only_when_asked(stochastic):
    # Backgammon's checker moves described by their parts (moozi/envs/action_planes.py): the first
    # dense layer of the dynamics (MuZero's g, Stochastic MuZero's φ) reads them beside the one-hot
    # when network.mlp_action_features is on, and the parameters are as before when it is off
    # (runs saved before the flag load unchanged).
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
    from moozi.config import build_config
    from moozi.envs.action_planes import action_features

    tiny = {"network.mlp_hidden_sizes": "8", "network.mlp_hidden_state_size": "4", "network.head_hidden": "4"}
    if not stochastic:
        tiny["agent"] = "muzero"
    widths = {}
    for flag in ("false", "true"):
        config = build_config("backgammon", overrides={**tiny, "network.mlp_action_features": flag})
        spec = env_spec(config)
        variables = build_network(config, spec).init(seed_key(0, 0), example_stacked_obs(config, spec))
        name = "afterstate_dynamics" if stochastic else "dynamics"
        kernels = [leaf for path, leaf in jax.tree_util.tree_flatten_with_path(variables["params"][name])[0]
                   if "kernel" in jax.tree_util.keystr(path)]
        widths[flag] = kernels[0].shape[0]
    features = action_features(spec)
    assert widths["false"] == 4 + spec.num_actions
    assert widths["true"] == 4 + spec.num_actions + features.shape[1]


@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_mlp_residual_dynamics_adds_a_change_to_the_last_state(stochastic):
    # network.mlp_residual_dynamics: the dynamics (MuZero's g, Stochastic MuZero's φ and g) give the last
    # state plus W·x + b. With W = 0 the next state is the last one plus b, exactly, for every action;
    # with the flag off the parameters keep their names (runs saved before it load unchanged).
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
    from moozi.config import build_config
    from moozi.core.network import finish_hidden_state

    tiny = {"network.mlp_hidden_sizes": "8", "network.mlp_hidden_state_size": "4", "network.head_hidden": "4"}
    if not stochastic:
        tiny["agent"] = "muzero"
    name = "afterstate_dynamics" if stochastic else "dynamics"

    def params_of(flag):
        config = build_config("backgammon", overrides={**tiny, "network.mlp_residual_dynamics": flag})
        spec = env_spec(config)
        network = build_network(config, spec)
        obs = example_stacked_obs(config, spec)
        return config, spec, network, obs, network.init(seed_key(0, 0), obs)

    *_, plain = params_of("false")
    config, spec, network, obs, variables = params_of("true")
    plain_names = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(plain["params"][name])[0]}
    assert not any("state_change" in n for n in plain_names)
    assert any("_DenseBnRelu_1" in n for n in plain_names)  # the last dense layer, replaced by the change

    bias = jnp.arange(1.0, 5.0)
    params = jax.tree_util.tree_map(lambda x: x, variables["params"])
    trunk = params[name]["_MlpTrunk_0"] if stochastic else params[name]
    trunk["state_change"] = {"kernel": jnp.zeros_like(trunk["state_change"]["kernel"]), "bias": bias}
    variables = {**variables, "params": params}
    root = network.initial_inference(variables, obs)
    actions = jnp.arange(spec.num_actions, dtype=jnp.int32)
    states = jnp.repeat(root.hidden_state, spec.num_actions, axis=0)
    if stochastic:
        after = network.afterstate_inference(variables, states, actions).afterstate
    else:
        after = network.recurrent_inference(variables, states, actions).hidden_state
    expected = finish_hidden_state(config.network, states + bias)
    np.testing.assert_allclose(np.asarray(after), np.asarray(expected), rtol=1e-6, atol=1e-6)
    assert not np.allclose(np.asarray(after), np.asarray(states))  # the change counted


def _cells_and_pass(size: int) -> np.ndarray:
    """[1 + size*size + 1, size, size]: the dummy, one action per cell, then a pass (Go's layout)."""
    planes = np.zeros((size * size + 2, size, size), np.float32)
    for cell in range(size * size):
        planes[1 + cell, cell // size, cell % size] = 1.0
    return planes


@pytest.mark.slow
def test_conv_policy_head_gives_each_cell_the_logit_of_its_point():
    """A stone's logit is read at its own cell (pointwise 1x1 convolutions); the actions on no cell
    (dummy, pass) read the board's average. Changing the board at one cell changes that cell's action
    and the no-cell actions only."""
    from moozi.core.network import _ConvPolicyHead
    from moozi.core.network import static_table  # noqa: F401  (nested tuples, as make_network passes them)

    size = 3
    cells = _cells_and_pass(size)
    head = _ConvPolicyHead(dataclasses.replace(SMALL_RESNET, policy_head="conv"),
                           tuple(tuple(tuple(r) for r in p) for p in cells.tolist()))
    board = jnp.asarray(np.random.default_rng(0).normal(size=(1, size, size, 8)), jnp.float32)
    variables = head.init(jax.random.PRNGKey(0), board, train=False)
    logits = head.apply(variables, board, train=False)
    assert logits.shape == (1, size * size + 2)
    changed = head.apply(variables, board.at[0, 1, 2].add(1.0), train=False)
    moved = np.flatnonzero(np.abs(np.asarray(changed - logits)[0]) > 1e-6)
    assert set(moved.tolist()) <= {0, 1 + 1 * size + 2, size * size + 1}
    assert 1 + 1 * size + 2 in moved.tolist()
    # The full network builds it under the prediction function's "policy_head".
    network = make_network(dataclasses.replace(SMALL_RESNET, policy_head="conv"), obs_shape=(size, size, 2),
                           history_length=1, num_actions=size * size + 2, point_actions=cells)
    obs = jnp.zeros((2, *network.input_shape), jnp.float32)
    variables = network.init(jax.random.PRNGKey(0), obs)
    assert "cell_logits" in variables["params"]["prediction"]["policy_head"]
    assert network.initial_inference(variables, obs).policy_logits.shape == (2, size * size + 2)


def test_conv_policy_head_needs_a_map_of_cells():
    config = dataclasses.replace(SMALL_RESNET, policy_head="conv")
    with pytest.raises(MooziError, match="place a stone on a cell"):
        make_network(config, obs_shape=(3, 3, 2), history_length=1, num_actions=11)
    with pytest.raises(MooziError, match="policy_head"):
        NetworkConfig(kind="mlp", policy_head="conv")
    with pytest.raises(MooziError, match="policy_head"):
        NetworkConfig(policy_head="attention")


@pytest.mark.slow
def test_territory_heads_give_per_point_ownership_and_a_score():
    network = make_network(SMALL_RESNET, obs_shape=(5, 5, 3), history_length=1, num_actions=27,
                           territory_heads=True)
    obs = jnp.asarray(np.random.default_rng(0).uniform(size=(2, *network.input_shape)), jnp.float32)
    variables = network.init(jax.random.PRNGKey(0), obs)
    out = network.initial_inference(variables, obs)
    assert out.ownership_logits.shape == (2, 5, 5) and out.score.shape == (2,)
    # Without them the parameters are those of a network saved before the heads existed.
    plain = make_network(SMALL_RESNET, obs_shape=(5, 5, 3), history_length=1, num_actions=27)
    plain_variables = plain.init(jax.random.PRNGKey(0), obs)
    assert "territory" not in plain_variables["params"]["prediction"]
    assert plain.initial_inference(plain_variables, obs).ownership_logits is None
    with pytest.raises(MooziError, match="resnet"):
        make_network(SMALL_MLP, obs_shape=(1, 1, 6), history_length=1, num_actions=4, territory_heads=True)


def test_board_taps_mark_the_taps_that_read_the_board():
    taps = board_taps(6, 7)
    assert taps.shape == (6, 7, 3, 3)
    assert taps[0, 0].tolist() == [[0, 0, 0], [0, 1, 1], [0, 1, 1]]  # a corner reads 4 cells
    assert taps[0, 3].sum() == 6 and taps[3, 3].sum() == 9 and taps[5, 6].sum() == 4
    assert taps.sum() == (2 + 3 * 4 + 2) * (2 + 3 * 5 + 2)  # rows x columns of taps inside a 6 x 7 board


@pytest.mark.parametrize("height, width, frames, constant", [(9, 9, 24, 83), (6, 7, 2, 8), (3, 3, 4, 10)])
@pytest.mark.slow
def test_constant_planes_conv_is_the_convolution_with_the_same_kernel(height, width, frames, constant):
    # The history's action planes are one value over the board (moozi/core/history.py): their part of
    # the first convolution comes from one cell each and the board's tap mask. Same parameter (name,
    # shape, initial values), same output and gradient as nn.Conv's to float rounding.
    batch, features = 5, 16
    board = jax.random.normal(jax.random.PRNGKey(0), (batch, height, width, frames))
    values = jax.random.normal(jax.random.PRNGKey(1), (batch, constant))
    x = jnp.concatenate([board, jnp.broadcast_to(values[:, None, None, :], (batch, height, width, constant))], -1)
    conv = nn.Conv(features, (3, 3), padding="SAME", use_bias=False)
    fast = _ConstantPlanesConv(features, constant)
    params = conv.init(jax.random.PRNGKey(2), x)
    np.testing.assert_array_equal(params["params"]["kernel"], fast.init(jax.random.PRNGKey(2), x)["params"]["kernel"])
    np.testing.assert_allclose(fast.apply(params, x), conv.apply(params, x), atol=2e-5, rtol=1e-5)

    def loss(module, p, x):
        return jnp.sum(jnp.sin(module.apply(p, x)))

    for argnum in (0, 1):  # the kernel's gradient and the input's (the frames' part is what flows back)
        expected = jax.grad(functools.partial(loss, conv), argnums=argnum)(params, x)
        got = jax.grad(functools.partial(loss, fast), argnums=argnum)(params, x)
        if argnum == 1:
            expected, got = expected[..., :frames], got[..., :frames]
        chex.assert_trees_all_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_the_representation_reads_the_action_planes_from_one_cell_on_stacked_histories():
    # On real stacked histories (frames and one-hot action planes, history.py) the representation's
    # first layer, which takes the action planes' part from one cell, equals the plain convolution
    # with its kernel.
    config = NetworkConfig(channels=8, representation_blocks=1, prediction_blocks=0, dynamics_blocks=1,
                           head_hidden=16, normalization="layer")
    length, obs_shape, num_actions = 2, (4, 5, 3), 6
    network = make_network(config, obs_shape=obs_shape, history_length=length, num_actions=num_actions)
    frames = (jax.random.uniform(jax.random.PRNGKey(0), (7, length, *obs_shape)) > 0.5).astype(jnp.float32)
    actions = jax.random.randint(jax.random.PRNGKey(1), (7, length), 0, num_actions)
    stacked = stack_history(frames, actions, num_actions)
    variables = network.init(jax.random.PRNGKey(2), stacked)
    kernel = variables["params"]["representation"]["_ConvBnRelu_0"]["Conv_0"]["kernel"]
    assert kernel.shape == (3, 3, length * (obs_shape[2] + num_actions), 8)

    def plain_first_layer(x):
        return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    fast = _ConstantPlanesConv(8, length * num_actions)
    np.testing.assert_allclose(fast.apply({"params": {"kernel": kernel}}, stacked), plain_first_layer(stacked),
                               atol=1e-5)
    out = network.initial_inference(variables, stacked)
    assert np.all(np.isfinite(out.value)) and out.policy_logits.shape == (7, num_actions)
