"""The learned model (thesis 5.2.7): representation h, dynamics g, prediction f, projection ϱ.

`make_network` returns a `Network`, a bundle of pure, batched functions of
(variables, inputs) in the acme style; nothing in it holds state. Two
architectures share one interface: a residual network for image-like inputs
(the thesis's, sizes configurable) and an MLP for vector observations
(obs shape (1, 1, C)).

Initial inference is h then f (reward 0); recurrent inference is g then f.
Both return a `NetworkOutput` whose value and reward are already decoded to
environment scale (3.8.6), so a planner never touches categories.

Hidden states. As in MuZero, each example's hidden state is min-max scaled
to [0, 1] after h and after g (`scale_hidden_state`), which keeps the
recurrent unroll bounded and puts root and unrolled states on one scale.

Batch norm. Every convolution and hidden dense layer is followed by batch
norm, as the thesis lists. Two modes, chosen per call, never by hidden state:
  * acting mode (`initial_inference`, `recurrent_inference`, `project`) uses
    the running moments in `variables["batch_stats"]` and leaves them as they
    are. An action's evaluation must not depend on which other positions
    happen to share its batch (search calls the network on batches of tree
    nodes, not on i.i.d. samples), so acting never uses batch moments.
  * training mode (`*_train`) normalizes with the batch's own moments and
    returns the updated running moments as a new `batch_stats` tree; the
    learner decides which updates to keep.
ELF OpenGo (appendix C) found exponentially averaged moments to be stale:
the network changes faster than a slow average forgets, and acting on stale
moments measurably hurt. Their fix (re-estimating moments on held-out
batches every 1000 steps) needs an extra pass we do not want in a
single-process learner, so we use the cheap half of it: a fast momentum
(`batch_norm_momentum = 0.9`, an effective window of ~10 updates instead of
Flax's default 0.99 / ~100), and the learner updates the moments of f and g
once per unrolled step, so acting-mode moments average over all the depths
at which the planner calls them.

Mixed precision (`dtype = "bfloat16"`, off by default). Every convolution,
dense layer and normalisation computes in bfloat16 while its parameters stay
float32 (Flax's `dtype` / `param_dtype`), so the optimizer updates float32
weights. What leaves a layer stack goes back to float32 at once: the heads'
logits (so value and reward decoding, softmaxes and every loss run in
float32), the hidden state (which the search tree and the consistency loss
hold) and the projection. Normalisation statistics are reduced in float32
(Flax's `force_float32_reductions`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Literal, NamedTuple

import flax.linen as nn
import numpy as np
import jax
import jax.numpy as jnp

from moozi.core.scalar import Support, logits_to_scalar
from moozi.errors import MooziError
from moozi.core.types import Array


NETWORK_KINDS = ("resnet", "mlp")
POLICY_HEADS = ("dense", "conv")
NORMALIZATIONS = ("batch", "layer", "layer_all")
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Architecture of the learned model (defaults: the thesis's residual network, 5.2.7)."""

    kind: str = "resnet"  # "resnet" for image-like inputs, "mlp" for vector inputs of shape (1, 1, C)
    channels: int = 32  # resnet: channels of every convolution and of the hidden state
    representation_blocks: int = 6  # resnet: residual blocks in h (between its two convolutions)
    prediction_blocks: int = 1  # resnet: residual blocks in f before the heads
    dynamics_blocks: int = 2  # resnet: residual blocks in g after its input convolution
    head_hidden: int = 128  # width of the dense layer in the value, policy and reward heads (and the mlp's ϱ)
    mlp_hidden_sizes: tuple[int, ...] = (128, 128)  # mlp: widths of the hidden layers of h and of g
    mlp_hidden_state_size: int = 64  # mlp: size of the hidden state vector
    # mlp: channels of one 3x3 convolution over the observation planes before h's dense layers
    # (0: none). MinAtar's own DQN torso is such a convolution (16 channels): it sees each cell with
    # its neighbours, the same filter at every cell, where dense layers must learn every position apart.
    mlp_conv_channels: int = 0
    # resnet: where the game has an action map (moozi/envs/action_planes.py), the dynamics function
    # also sees the board cells the action acts on, as MuZero encodes board-game actions.
    spatial_actions: bool = True
    # mlp: where a vector-observed game describes its actions by their parts (action_planes.py's
    # `action_features`; backgammon: source, die, target), the dynamics function also sees those.
    # Off by default so that runs saved before it existed load unchanged; the backgammon preset
    # turns it on (docs/stochastic.md, "Backgammon").
    mlp_action_features: bool = False
    # mlp: the dynamics functions (g; Stochastic MuZero's φ and g) give the next state as the last one
    # plus a learned change, h' = h + W·x, as the resnet's dynamics blocks are residual; the dense
    # layers then learn what a move changes, not the whole position again. Off by default so that
    # runs saved before it existed load unchanged.
    mlp_residual_dynamics: bool = False
    # resnet: MuZero's Atari downsampling before h's blocks (two stride-2 convolutions with a residual
    # block after each, then two stride-2 average pools): a 84x84 frame becomes a 6x6 hidden state,
    # which the search and the unroll can afford. Board games keep their full resolution.
    downsample: bool = False
    support: Support = Support()  # integer support of the value and reward categories (Z = support.size)
    scale_hidden_state: bool = True  # min-max scale each example's hidden state to [0, 1] after h and g
    # "batch": batch norm, as the thesis lists (see module docstring). "layer": layer norm over the
    # channels, which computes the same thing in acting and in training: no running moments, so the
    # root and unrolled states cannot share (and skew) them (docs/board_games.md). "layer_all": layer
    # norm as Ba et al. define it, over all of a layer's units: a convolution's output is normalised
    # over its positions and channels together, not each position apart. Per position, a cell whose
    # neighbourhood holds one faint object is scaled up to the size of a crowded one, which discards
    # how much a cell sees. Dense layers are normalised the same way by both. On MinAtar it learned no
    # faster than "layer" (docs/experiments/2026-11-27-one-minatar-preset.md, candidate v22).
    normalization: str = "batch"
    # resnet: "dense" (the thesis's: a dense layer over the flattened board, then one logit per action) or
    # "conv" (for games whose moves place a stone on a cell, moozi/envs/action_planes.py's
    # `point_actions`: a 1x1 convolution gives each cell's logit, as AlphaGo Zero's and KataGo's policy
    # heads do, and the actions on no cell (pass) take theirs from the board's global average).
    policy_head: str = "dense"
    batch_norm_momentum: float = 0.9  # decay of the running moments; fast on purpose (see module docstring)
    batch_norm_epsilon: float = 1e-5  # added to the variance inside batch norm
    # The layers' compute dtype; parameters, outputs and losses stay float32 (module docstring).
    # "bfloat16" halves activation memory and runs on a GPU's or TPU's bfloat16 units; on a CPU it is
    # usually slower than float32 (docs/gpu.md).
    dtype: Literal["float32", "bfloat16"] = "float32"

    def __post_init__(self):
        if self.kind not in NETWORK_KINDS:
            raise MooziError(f"network.kind must be one of {NETWORK_KINDS}, got {self.kind!r}")
        if self.policy_head not in POLICY_HEADS:
            raise MooziError(f"network.policy_head must be one of {', '.join(POLICY_HEADS)}, got {self.policy_head!r}")
        if self.policy_head == "conv" and self.kind != "resnet":
            raise MooziError("network.policy_head='conv' needs network.kind='resnet' (a board to convolve)")
        if self.normalization not in NORMALIZATIONS:
            raise MooziError(f"network.normalization must be one of {', '.join(NORMALIZATIONS)}, got {self.normalization!r}")
        if self.mlp_conv_channels < 0:
            raise MooziError(f"network.mlp_conv_channels must be >= 0 (0: no convolution), got {self.mlp_conv_channels}")
        if self.dtype not in DTYPES:
            raise MooziError(f"network.dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")


class NetworkOutput(NamedTuple):
    """What initial and recurrent inference return; all batched on the leading axis."""

    hidden_state: Array  # [B, ...]: [B, H, W, channels] (resnet) or [B, D] (mlp)
    value: Array  # [B] float32: v, decoded to environment scale
    reward: Array  # [B] float32: r, decoded to environment scale (0 for initial inference)
    policy_logits: Array  # [B, A]
    value_logits: Array  # [B, Z]
    reward_logits: Array  # [B, Z]: all zeros for initial inference (no reward is predicted there)
    # [B]: the logit of "the player to move changed with this step", from recurrent inference of a
    # model for a game whose turns may repeat; None otherwise.
    turn_logit: Array | None = None
    # Territory games whose loss trains them (moozi/core/territory.py), resnet only: [B, H, W] the logit
    # of "this point ends as the mover's" (its tanh is the expected ownership in [-1, 1]) and [B] the
    # predicted final score margin divided by the board's points.
    ownership_logits: Array | None = None
    score: Array | None = None


def _min_max_scale(x):
    """Scales each example of [B, ...] to [0, 1] over all its non-batch axes."""
    axes = tuple(range(1, x.ndim))
    low = jnp.min(x, axis=axes, keepdims=True)
    high = jnp.max(x, axis=axes, keepdims=True)
    # A constant hidden state (possible right after init) would divide by 0.
    return (x - low) / jnp.maximum(high - low, 1e-8)


def compute_dtype(config: NetworkConfig):
    """The dtype every layer computes in (`NetworkConfig.dtype`); parameters are float32 either way."""
    return jnp.dtype(config.dtype)


def finish_hidden_state(config: NetworkConfig, x):
    """A hidden state as h and g hand it on: float32 whatever the layers computed in (the search tree
    and the consistency loss hold it), min-max scaled when `scale_hidden_state`."""
    x = x.astype(jnp.float32)
    return _min_max_scale(x) if config.scale_hidden_state else x


class _ConvBnRelu(nn.Module):
    config: NetworkConfig
    features: int
    # The input's last `constant_channels` channels are constant over the board (the history's action
    # planes): the convolution computes their part from one cell each (_ConstantPlanesConv).
    constant_channels: int = 0

    @nn.compact
    def __call__(self, x, train: bool):
        # No conv bias: the following batch norm's offset replaces it.
        if self.constant_channels:
            x = _ConstantPlanesConv(self.features, self.constant_channels, compute_dtype(self.config), name="Conv_0")(x)
        else:
            x = nn.Conv(self.features, (3, 3), padding="SAME", use_bias=False, dtype=compute_dtype(self.config))(x)
        x = _normalize(self.config, train, x)
        return nn.relu(x)


def board_taps(height: int, width: int, kernel: int = 3) -> np.ndarray:
    """[H, W, k, k] float32: 1 where tap (i, j) of a stride-1 "SAME" k x k convolution at output cell
    (h, w) reads a cell of the board, 0 where it reads the zero padding."""
    low = (kernel - 1) // 2
    rows = np.arange(height)[:, None] + np.arange(kernel)[None, :] - low  # [H, k]
    cols = np.arange(width)[:, None] + np.arange(kernel)[None, :] - low  # [W, k]
    row_in = (rows >= 0) & (rows < height)
    col_in = (cols >= 0) & (cols < width)
    return (row_in[:, None, :, None] & col_in[None, :, None, :]).astype(np.float32)


class _ConstantPlanesConv(nn.Module):
    """`nn.Conv(features, (3, 3), padding="SAME", use_bias=False)` (the same parameter, "kernel"
    [3, 3, C_in, features], initialised the same way) for inputs whose last `constant_channels`
    channels are each one value over the whole board, as the history's action planes are
    (moozi/core/history.py). Their part of the output is, at each cell, the sum over the taps that
    fall on the board of value x kernel: computed from one cell per plane ([B, K] @ [K, 9 x features])
    and the board's tap mask, instead of convolving K planes. go9's input is 24 feature planes and 83
    action planes, so this removes 78% of the first convolution's FLOPs (docs/performance.md). The
    output equals the convolution's to float rounding for such inputs, and only for them."""

    features: int
    constant_channels: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):  # [B, H, W, C_in] -> [B, H, W, features]
        c_in = x.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, c_in, self.features), jnp.float32)
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        varying = c_in - self.constant_channels
        y = jax.lax.conv_general_dilated(x[..., :varying], kernel[:, :, :varying], (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        values = x[:, 0, 0, varying:]  # [B, K]: each constant plane's value
        per_tap = jnp.einsum("bk,ijko->bijo", values, kernel[:, :, varying:])  # [B, 3, 3, features]
        taps = jnp.asarray(board_taps(x.shape[1], x.shape[2]), self.dtype)  # [H, W, 3, 3]
        return y + jnp.einsum("hwij,bijo->bhwo", taps, per_tap)


class _DenseBnRelu(nn.Module):
    config: NetworkConfig
    features: int

    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Dense(self.features, use_bias=False, dtype=compute_dtype(self.config))(x)
        x = _normalize(self.config, train, x)
        return nn.relu(x)


def _normalize(config: NetworkConfig, train: bool, x):
    """The normalisation after every convolution and hidden dense layer (`NetworkConfig.normalization`),
    applied to `x`. "layer" reduces over the channels only; "layer_all" over every axis but the batch's
    (a dense layer's units either way; a convolution's positions and channels), with a scale and offset
    per channel in both."""
    if config.normalization in ("layer", "layer_all"):
        axes = tuple(range(1 - x.ndim, 0)) if config.normalization == "layer_all" else -1
        return nn.LayerNorm(epsilon=config.batch_norm_epsilon, dtype=compute_dtype(config),
                            reduction_axes=axes, feature_axes=-1)(x)
    return nn.BatchNorm(
        use_running_average=not train,
        dtype=compute_dtype(config),
        momentum=config.batch_norm_momentum,
        epsilon=config.batch_norm_epsilon,
    )(x)


class _ResidualBlock(nn.Module):
    """He et al.'s block as the thesis lists it: conv-BN-relu-conv-BN, add, relu."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, x, train: bool):
        channels, dtype = x.shape[-1], compute_dtype(self.config)
        y = nn.Conv(channels, (3, 3), padding="SAME", use_bias=False, dtype=dtype)(x)
        y = nn.relu(_normalize(self.config, train, y))
        y = nn.Conv(channels, (3, 3), padding="SAME", use_bias=False, dtype=dtype)(y)
        y = _normalize(self.config, train, y)
        return nn.relu(x + y)


class _CategoricalHead(nn.Module):
    """Dense(head_hidden)-BN-relu-Dense(outputs): the value, policy and reward heads. Logits leave it
    as float32 whatever the compute dtype: decoding, softmaxes and losses need float32's precision."""

    config: NetworkConfig
    outputs: int

    @nn.compact
    def __call__(self, x, train: bool):
        x = _DenseBnRelu(self.config, self.config.head_hidden)(x, train)
        return nn.Dense(self.outputs, dtype=compute_dtype(self.config))(x).astype(jnp.float32)


# ---------------------------------------------------------------- resnet


def downsampled_size(size: int) -> int:
    """A side of the hidden state after `_Downsample`: four halvings, each rounded up (84 -> 6)."""
    for _ in range(4):
        size = -(-size // 2)
    return size


class _Downsample(nn.Module):
    """MuZero's Atari downsampling (its appendix): stride-2 convolutions and average pools."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, x, train: bool):  # [B, H, W, C_h] -> [B, H/16, W/16, channels], sides rounded up
        channels = self.config.channels
        for _ in range(2):
            x = nn.Conv(channels, (3, 3), strides=(2, 2), padding="SAME", use_bias=False,
                        dtype=compute_dtype(self.config))(x)
            x = nn.relu(_normalize(self.config, train, x))
            x = _ResidualBlock(self.config)(x, train)
        for _ in range(2):
            x = nn.avg_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        return x


class _ResRepresentation(nn.Module):
    config: NetworkConfig
    # The stacked input's last channels that are constant over the board: its L x A action planes
    # (moozi/core/history.py); 0 for an input of another layout.
    action_channels: int = 0

    @nn.compact
    def __call__(self, stacked_obs, train: bool):  # [B, H, W, C_h] -> [B, H', W', channels]
        constant = self.action_channels
        if self.config.downsample:
            stacked_obs = _Downsample(self.config)(stacked_obs, train)
            constant = 0  # the downsampling's strided convolutions mixed the planes with the border
        x = _ConvBnRelu(self.config, self.config.channels, constant)(stacked_obs, train)
        for _ in range(self.config.representation_blocks):
            x = _ResidualBlock(self.config)(x, train)
        return _ConvBnRelu(self.config, self.config.channels)(x, train)


class _TerritoryHeads(nn.Module):
    """KataGo's ownership and score heads, small: a 1x1 convolution gives each point's ownership logit
    (the board seen as a board, one output per point), and the score margin comes from the trunk's
    global average over the board (a count over the whole board, which no 3x3 window sees)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, x, train: bool):  # [B, H, W, ch] -> [B, H, W], [B]
        dtype = compute_dtype(self.config)
        ownership = nn.Conv(1, (1, 1), dtype=dtype, name="ownership_head")(x)[..., 0].astype(jnp.float32)
        pooled = jnp.mean(x, axis=(1, 2))
        score = _CategoricalHead(self.config, 1, name="score_head")(pooled, train)[:, 0]
        return ownership, score


class _ConvPolicyHead(nn.Module):
    """One logit per cell from a 1x1 convolution of the board; actions on no cell (Go's pass, the
    dummy) from the board's global average. `point_actions` [A, H, W] (nested tuples) maps each action to
    its cell."""

    config: NetworkConfig
    point_actions: Any

    @nn.compact
    def __call__(self, board, train: bool):  # [B, H, W, ch] -> [B, A]
        dtype = compute_dtype(self.config)
        cells = jnp.asarray(self.point_actions, jnp.float32)  # [A, H, W]
        x = nn.Conv(self.config.channels, (1, 1), use_bias=False, dtype=dtype)(board)
        x = nn.relu(_normalize(self.config, train, x))
        cell_logits = nn.Conv(1, (1, 1), dtype=dtype, name="cell_logits")(x)[..., 0].astype(jnp.float32)
        pooled = jnp.mean(board, axis=(1, 2))
        other_logits = _CategoricalHead(self.config, cells.shape[0], name="other_logits")(pooled, train)
        on_a_cell = jnp.sum(cells, axis=(1, 2))  # [A]: 1 for a stone's action, 0 for pass and the dummy
        return jnp.einsum("bhw,ahw->ba", cell_logits, cells) + other_logits * (1.0 - on_a_cell)[None, :]


class _ResPrediction(nn.Module):
    config: NetworkConfig
    num_actions: int
    territory_heads: bool = False
    point_actions: Any = None  # [A, H, W] nested tuples with policy_head="conv"

    @nn.compact
    def __call__(self, hidden_state, train: bool):  # [B, H, W, channels] -> [B, Z], [B, A] (, territory)
        x = _ConvBnRelu(self.config, self.config.channels)(hidden_state, train)
        for _ in range(self.config.prediction_blocks):
            x = _ResidualBlock(self.config)(x, train)
        board = x
        x = x.reshape(x.shape[0], -1)
        value_logits = _CategoricalHead(self.config, self.config.support.size, name="value_head")(x, train)
        if self.config.policy_head == "conv":
            policy_logits = _ConvPolicyHead(self.config, self.point_actions, name="policy_head")(board, train)
        else:
            policy_logits = _CategoricalHead(self.config, self.num_actions, name="policy_head")(x, train)
        if self.territory_heads:
            return value_logits, policy_logits, _TerritoryHeads(self.config, name="territory")(board, train)
        return value_logits, policy_logits


class _ResDynamics(nn.Module):
    config: NetworkConfig
    num_actions: int
    action_planes: Any = None  # [A, H, W] nested tuples: the cells each action acts on, or None

    @nn.compact
    def __call__(self, hidden_state, action, train: bool):  # [B, H, W, ch], [B] -> [B, H, W, ch], [B, Z]
        batch, height, width, _ = hidden_state.shape
        # Action planes as in the history input (5.2.6): one-hot / A, tiled over H, W.
        planes = jax.nn.one_hot(action, self.num_actions, dtype=hidden_state.dtype) / self.num_actions
        planes = jnp.broadcast_to(planes[:, None, None, :], (batch, height, width, self.num_actions))
        inputs = [hidden_state, planes]
        if self.action_planes is not None:
            where = jnp.asarray(self.action_planes, hidden_state.dtype)[action]  # [B, H, W]
            inputs.append(where[..., None])
        x = _ConvBnRelu(self.config, self.config.channels)(jnp.concatenate(inputs, -1), train)
        for _ in range(self.config.dynamics_blocks):
            x = _ResidualBlock(self.config)(x, train)
        # The thesis's list puts a conv-BN-relu between the hidden-state head
        # and the reward dense layer; we read it as the start of the reward head.
        r = _ConvBnRelu(self.config, self.config.channels)(x, train)
        reward_logits = _CategoricalHead(self.config, self.config.support.size, name="reward_head")(
            r.reshape(batch, -1), train
        )
        return x, reward_logits


class _ResProjection(nn.Module):
    """ϱ for the resnet: conv-BN-relu-conv, back into the hidden-state space.

    The thesis compares ϱ(x¹_t) with x⁰_{t+1} itself (no projection on the
    target side, unlike EfficientZero's SimSiam pair), so ϱ must map into the
    hidden-state space; a convolutional map keeps that cheap and spatial.
    """

    config: NetworkConfig

    @nn.compact
    def __call__(self, hidden_state, train: bool):  # [B, H, W, ch] -> [B, H*W*ch]
        x = _ConvBnRelu(self.config, self.config.channels)(hidden_state, train)
        x = nn.Conv(hidden_state.shape[-1], (3, 3), padding="SAME", dtype=compute_dtype(self.config))(x)
        return x.reshape(x.shape[0], -1).astype(jnp.float32)  # compared with a float32 hidden state


# ---------------------------------------------------------------- mlp


class _MlpRepresentation(nn.Module):
    config: NetworkConfig

    @nn.compact
    def __call__(self, stacked_obs, train: bool):  # [B, H, W, C_h] -> [B, D]
        x = stacked_obs
        if self.config.mlp_conv_channels:
            x = _ConvBnRelu(self.config, self.config.mlp_conv_channels)(x, train)
        x = x.reshape(x.shape[0], -1)
        for size in self.config.mlp_hidden_sizes:
            x = _DenseBnRelu(self.config, size)(x, train)
        return _DenseBnRelu(self.config, self.config.mlp_hidden_state_size)(x, train)


class _MlpPrediction(nn.Module):
    config: NetworkConfig
    num_actions: int

    @nn.compact
    def __call__(self, hidden_state, train: bool):  # [B, D] -> [B, Z], [B, A]
        value_logits = _CategoricalHead(self.config, self.config.support.size, name="value_head")(
            hidden_state, train
        )
        policy_logits = _CategoricalHead(self.config, self.num_actions, name="policy_head")(hidden_state, train)
        return value_logits, policy_logits


def encode_mlp_action(action, num_actions: int, action_features, dtype):
    """An MLP dynamics function's view of the action [B]: its one-hot, and its features where the game
    has them (moozi/envs/action_planes.py's `action_features`, as nested tuples) -> [B, A (+ F)]."""
    encoded = jax.nn.one_hot(action, num_actions, dtype=dtype)
    if action_features is None:
        return encoded
    return jnp.concatenate([encoded, jnp.asarray(action_features, dtype)[action]], -1)


def _nested_tuples(values):
    return tuple(_nested_tuples(v) for v in values) if isinstance(values, list) else values


def static_table(array):
    """An array of any rank ([N, F] features, [A, H, W] planes) as nested tuples: a module attribute
    that stays hashable and static under jit."""
    return None if array is None else _nested_tuples(np.asarray(array).tolist())


def dynamics_action_maps(config: NetworkConfig, action_planes, action_features):
    """(planes, features) the dynamics function sees, as nested tuples (module attributes that stay
    hashable and static under jit), or None where the config does not use them."""
    planes = None
    # Action planes mark board cells; a downsampled hidden state has no cells to mark.
    if action_planes is not None and config.spatial_actions and config.kind == "resnet" and not config.downsample:
        planes = static_table(action_planes)
    features = static_table(action_features) if config.mlp_action_features and config.kind == "mlp" else None
    return planes, features


def mlp_next_state(config: NetworkConfig, state, x, train: bool):
    """The dense layers of an mlp dynamics function, from its input x ([state, what acts on it]) to the
    next state; called inside the caller's compact scope, so the parameters keep their names."""
    for size in config.mlp_hidden_sizes:
        x = _DenseBnRelu(config, size)(x, train)
    if config.mlp_residual_dynamics:
        change = nn.Dense(config.mlp_hidden_state_size, dtype=compute_dtype(config), name="state_change")(x)
        return state + change.astype(state.dtype)
    return _DenseBnRelu(config, config.mlp_hidden_state_size)(x, train)


class _MlpDynamics(nn.Module):
    config: NetworkConfig
    num_actions: int
    action_features: Any = None  # [A, F] nested tuples, or None

    @nn.compact
    def __call__(self, hidden_state, action, train: bool):  # [B, D], [B] -> [B, D], [B, Z]
        x = jnp.concatenate([hidden_state, encode_mlp_action(action, self.num_actions, self.action_features,
                                                             hidden_state.dtype)], -1)
        x = mlp_next_state(self.config, hidden_state, x, train)
        reward_logits = _CategoricalHead(self.config, self.config.support.size, name="reward_head")(x, train)
        return x, reward_logits


class _MlpProjection(nn.Module):
    config: NetworkConfig

    @nn.compact
    def __call__(self, hidden_state, train: bool):  # [B, D] -> [B, D]
        return _CategoricalHead(self.config, hidden_state.shape[-1])(hidden_state, train)


# ---------------------------------------------------------------- the model


def turn_head_logit(head: nn.Module, hidden_state) -> Array:
    """[B] the "turn passed" logit of a turn head (a Dense(1)) on a flattened hidden state."""
    return head(hidden_state.reshape(hidden_state.shape[0], -1).astype(jnp.float32))[:, 0]


class _MuZeroModel(nn.Module):
    config: NetworkConfig
    num_actions: int
    action_planes: Any = None
    predicts_turns: bool = False  # a "the turn passes" logit on every state the dynamics makes (turns may repeat)
    action_features: Any = None  # [A, F] nested tuples (an MLP's dynamics), or None
    territory_heads: bool = False  # ownership and score heads (resnet; territory games)
    point_actions: Any = None  # [A, H, W] nested tuples: each action's cell (policy_head="conv")
    history_action_channels: int = 0  # L x A: the stacked input's action planes, constant over the board

    def setup(self):
        if self.predicts_turns:
            self.turn_head = nn.Dense(1, name="turn_head")
        if self.config.kind == "resnet":
            self.representation = _ResRepresentation(self.config, self.history_action_channels)
            self.prediction = _ResPrediction(self.config, self.num_actions, self.territory_heads, self.point_actions)
            self.dynamics = _ResDynamics(self.config, self.num_actions, self.action_planes)
            self.projection = _ResProjection(self.config)
        else:
            self.representation = _MlpRepresentation(self.config)
            self.prediction = _MlpPrediction(self.config, self.num_actions)
            self.dynamics = _MlpDynamics(self.config, self.num_actions, self.action_features)
            self.projection = _MlpProjection(self.config)

    def _scale(self, x):
        return finish_hidden_state(self.config, x)

    def _decode(self, logits):
        return logits_to_scalar(logits, self.config.support)

    def _predict(self, hidden_state, train: bool):
        """(value logits, policy logits, {ownership_logits, score} or {})."""
        out = self.prediction(hidden_state, train)
        if self.territory_heads:
            value_logits, policy_logits, (ownership, score) = out
            return value_logits, policy_logits, {"ownership_logits": ownership, "score": score}
        return *out, {}

    def initial_inference(self, stacked_obs, train: bool) -> NetworkOutput:
        hidden_state = self._scale(self.representation(stacked_obs, train))
        value_logits, policy_logits, territory = self._predict(hidden_state, train)
        batch = stacked_obs.shape[0]
        return NetworkOutput(
            hidden_state=hidden_state,
            value=self._decode(value_logits),
            reward=jnp.zeros((batch,), jnp.float32),
            policy_logits=policy_logits,
            value_logits=value_logits,
            reward_logits=jnp.zeros((batch, self.config.support.size), jnp.float32),
            **territory,
        )

    def recurrent_inference(self, hidden_state, action, train: bool) -> NetworkOutput:
        next_hidden_state, reward_logits = self.dynamics(hidden_state, action, train)
        next_hidden_state = self._scale(next_hidden_state)
        value_logits, policy_logits, territory = self._predict(next_hidden_state, train)
        return NetworkOutput(
            hidden_state=next_hidden_state,
            value=self._decode(value_logits),
            reward=self._decode(reward_logits),
            policy_logits=policy_logits,
            value_logits=value_logits,
            reward_logits=reward_logits,
            turn_logit=turn_head_logit(self.turn_head, next_hidden_state) if self.predicts_turns else None,
            **territory,
        )

    def project(self, hidden_state, train: bool):
        return self.projection(hidden_state, train)

    def init_all(self, stacked_obs):
        """Touches every submodule once so `init` creates all parameters."""
        out = self.initial_inference(stacked_obs, train=False)
        action = jnp.zeros((stacked_obs.shape[0],), jnp.int32)
        self.recurrent_inference(out.hidden_state, action, train=False)
        return self.project(out.hidden_state, train=False)


@dataclasses.dataclass(frozen=True)
class Network:
    """The learned model as pure, batched functions of `variables = {"params", "batch_stats"}`.

    Acting-mode functions use the running batch-norm moments and change
    nothing. The `*_train` functions normalize with batch moments and also
    return the updated `batch_stats`. None of them is jitted here: callers
    compile them inside their own programs.
    """

    config: NetworkConfig
    num_actions: int  # A, the dummy action included
    input_shape: tuple[int, int, int]  # (H, W, C_h) of one stacked observation
    hidden_state_shape: tuple[int, ...]  # per-example hidden state shape
    init: Callable  # (rng, stacked_obs [B, H, W, C_h]) -> variables {"params", "batch_stats"}
    initial_inference: Callable  # (variables, stacked_obs [B, H, W, C_h]) -> NetworkOutput
    recurrent_inference: Callable  # (variables, hidden_state [B, ...], action [B] int32) -> NetworkOutput
    project: Callable  # (variables, hidden_state [B, ...]) -> [B, D], D = prod(hidden_state_shape)
    initial_inference_train: Callable  # (variables, stacked_obs) -> (NetworkOutput, batch_stats)
    recurrent_inference_train: Callable  # (variables, hidden_state, action) -> (NetworkOutput, batch_stats)
    project_train: Callable  # (variables, hidden_state) -> ([B, D], batch_stats)


def model_calls(model):
    """(init, acting, training) for a Flax model whose `init_all` touches every submodule:
    `init(rng, stacked_obs)` gives its variables, `acting(method)` a call in inference mode and
    `training(method)` one in training mode that also returns the updated batch statistics."""

    def init(rng, stacked_obs):
        variables = dict(model.init(rng, stacked_obs, method=type(model).init_all))
        variables.setdefault("batch_stats", {})  # layer norm keeps no moments; the variables keep their shape
        return variables

    def acting(method):
        def call(variables, *args):
            return model.apply(variables, *args, train=False, method=method)

        return call

    def training(method):
        def call(variables, *args):
            out, updates = model.apply(variables, *args, train=True, method=method, mutable=["batch_stats"])
            return out, updates.get("batch_stats", {})

        return call

    return init, acting, training


def make_network(
    config: NetworkConfig, *, obs_shape: tuple[int, int, int], history_length: int, num_actions: int,
    action_planes=None, predicts_turns: bool = False, action_features=None, territory_heads: bool = False,
    point_actions=None,
) -> Network:
    """Builds the model for frames of `obs_shape` (H, W, C), L = history_length, A = num_actions.

    `action_planes` [A, H, W] (moozi/envs/action_planes.py) marks the cells each action acts on;
    the resnet's dynamics function sees them when `config.spatial_actions` is on. `action_features`
    [A, F] (vector-observed games) describe each action by its parts; an MLP's dynamics function sees
    them beside the one-hot when `config.mlp_action_features` is on. `predicts_turns`:
    recurrent inference also gives `turn_logit` (games whose turns may repeat). `territory_heads`:
    inference also gives `ownership_logits` and `score` (territory games; resnet only). `point_actions`
    [A, H, W] (moozi/envs/action_planes.py): each action's cell, which `policy_head="conv"` needs."""
    if territory_heads and config.kind != "resnet":
        raise MooziError(f"ownership and score heads need network.kind='resnet' (a board), got {config.kind!r}")
    height, width, channels = obs_shape
    input_shape = (height, width, history_length * (channels + num_actions))
    if config.kind == "resnet" and config.downsample:
        hidden_state_shape: tuple[int, ...] = (downsampled_size(height), downsampled_size(width), config.channels)
    elif config.kind == "resnet":
        hidden_state_shape = (height, width, config.channels)
    else:
        hidden_state_shape = (config.mlp_hidden_state_size,)
    planes, features = dynamics_action_maps(config, action_planes, action_features)
    cells = None
    if config.policy_head == "conv":
        if point_actions is None:
            raise MooziError("network.policy_head='conv' needs a game whose moves place a stone on a cell "
                             "(Go, tic-tac-toe); use 'dense' for this one")
        cells = static_table(point_actions)
    model = _MuZeroModel(config, num_actions, planes, predicts_turns, features, territory_heads, cells,
                         history_action_channels=history_length * num_actions)
    M = _MuZeroModel
    init, acting, training = model_calls(model)

    return Network(
        config=config,
        num_actions=num_actions,
        input_shape=input_shape,
        hidden_state_shape=hidden_state_shape,
        init=init,
        initial_inference=acting(M.initial_inference),
        recurrent_inference=acting(M.recurrent_inference),
        project=acting(M.project),
        initial_inference_train=training(M.initial_inference),
        recurrent_inference_train=training(M.recurrent_inference),
        project_train=training(M.project),
    )
