"""Stochastic MuZero's learned model (Antonoglou et al., 2022): a step is a move, then chance.

    s⁰ = h(o_≤t)                      representation   (network.py's h)
    as^k = φ(s^k, a_{t+k})             afterstate dynamics: after the move, before chance
    Q^k, σ^k = ψ(as^k)                 afterstate prediction: Q over the value support, σ over C codes
    s^{k+1}, r^{k+1} = g(as^k, c)      dynamics, given a chance code c (one-hot over C)
    p^k, v^k = f(s^k)                  prediction       (network.py's f)
    c_{t+k+1} = e(o_≤t+k, o_≤t+k+1)    chance encoder (training only): C logits -> one-hot code

The chance code c is learned, not given by the game: a VQ-VAE-style encoder
picks one of C codes for each observed transition, and σ learns how often
each code happens after the move. The search (stochastic_planner.py) sums
over σ at chance nodes instead of trusting one imagined outcome.

Reuse: h, f, the projection ϱ and every layer come from network.py; only the
two transition functions, the encoder and the straight-through code are new.
Both architectures (resnet, mlp), both normalisations and the acting/training
batch-norm modes behave exactly as in network.py (read its docstring).

Choices the paper leaves open (LightZero's implementation takes the same ones):
  * The encoder sees two consecutive history inputs side by side on the
    channel axis, so it can tell what changed whatever the history length L.
  * Afterstates are min-max scaled like hidden states: φ's output feeds g as
    s^k feeds φ, and the same bound keeps the two-stage unroll stable.
  * The code enters g as C one-hot planes of value 1 (not 1/C like action
    planes): the hidden state is scaled to [0, 1], so the code matches it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from moozi.core.network import (
    NetworkConfig,
    NetworkOutput,
    _CategoricalHead,
    _ConvBnRelu,
    _Downsample,
    _MlpPrediction,
    _MlpProjection,
    _MlpRepresentation,
    _ResidualBlock,
    _ResPrediction,
    _ResProjection,
    _ResRepresentation,
    dynamics_action_maps,
    encode_mlp_action,
    finish_hidden_state,
    make_network,
    mlp_next_state,
    model_calls,
    turn_head_logit,
)
from moozi.core.scalar import logits_to_scalar
from moozi.core.types import Array
from moozi.errors import MooziError


class AfterstateOutput(NamedTuple):
    """What afterstate inference returns: φ then ψ. Batched on the leading axis."""

    afterstate: Array  # [B, ...] same shape as a hidden state
    value: Array  # [B] float32: Q(s, a) = v(as), decoded to environment scale, from the mover's view
    value_logits: Array  # [B, Z]
    chance_logits: Array  # [B, C]: σ, the prior over chance codes after the move


class ChanceOutput(NamedTuple):
    """What the chance encoder returns."""

    logits: Array  # [B, C]: c^e before the softmax
    code: Array  # [B, C]: one-hot of argmax(logits) forward, the softmax's gradient backward


def straight_through_one_hot(logits: Array) -> Array:
    """[..., C] logits -> [..., C]: one-hot of the argmax, with the softmax's gradient.

    Written as onehot + (p - sg(p)) rather than p + sg(onehot - p): the
    second form rounds (0.3 + 0.7 need not be 1.0 in float32), the first adds
    an exact zero, so the forward value is exactly one-hot.
    """
    probs = jax.nn.softmax(logits, axis=-1)
    one_hot = jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=probs.dtype)
    return one_hot + (probs - jax.lax.stop_gradient(probs))


# ---------------------------------------------------------------- resnet


class _ResTrunk(nn.Module):
    """conv-BN-relu, then `dynamics_blocks` residual blocks: the body of φ and of g (as network.py's g)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, x, train: bool):
        x = _ConvBnRelu(self.config, self.config.channels)(x, train)
        for _ in range(self.config.dynamics_blocks):
            x = _ResidualBlock(self.config)(x, train)
        return x


def _tile(vectors, like):
    """[B, n] -> [B, H, W, n], the spatial size of `like` [B, H, W, ch]."""
    batch, height, width, _ = like.shape
    return jnp.broadcast_to(vectors[:, None, None, :], (batch, height, width, vectors.shape[-1]))


class _ResAfterstateDynamics(nn.Module):
    config: NetworkConfig
    num_actions: int
    action_planes: Any = None  # as in network.py's _ResDynamics

    @nn.compact
    def __call__(self, hidden_state, action, train: bool):  # [B, H, W, ch], [B] -> [B, H, W, ch]
        planes = jax.nn.one_hot(action, self.num_actions, dtype=hidden_state.dtype) / self.num_actions
        inputs = [hidden_state, _tile(planes, hidden_state)]
        if self.action_planes is not None:
            inputs.append(jnp.asarray(self.action_planes, hidden_state.dtype)[action][..., None])
        return _ResTrunk(self.config)(jnp.concatenate(inputs, -1), train)


class _ResChanceDynamics(nn.Module):
    config: NetworkConfig

    @nn.compact
    def __call__(self, afterstate, code, train: bool):  # [B, H, W, ch], [B, C] -> [B, H, W, ch], [B, Z]
        x = _ResTrunk(self.config)(jnp.concatenate([afterstate, _tile(code, afterstate)], -1), train)
        r = _ConvBnRelu(self.config, self.config.channels)(x, train)
        reward_logits = _CategoricalHead(self.config, self.config.support.size, name="reward_head")(
            r.reshape(r.shape[0], -1), train
        )
        return x, reward_logits


class _ResChanceEncoder(nn.Module):
    config: NetworkConfig
    num_chance_outcomes: int

    @nn.compact
    def __call__(self, pair, train: bool):  # [B, H, W, 2 C_h] -> [B, C]
        x = _Downsample(self.config)(pair, train) if self.config.downsample else pair
        x = _ConvBnRelu(self.config, self.config.channels)(x, train)
        x = _ResidualBlock(self.config)(x, train)
        x = _ConvBnRelu(self.config, self.config.channels)(x, train)
        return _CategoricalHead(self.config, self.num_chance_outcomes)(x.reshape(x.shape[0], -1), train)


# ---------------------------------------------------------------- mlp


class _MlpTrunk(nn.Module):
    """The dense layers of network.py's mlp g, without its reward head (a module of its own, so that the
    parameters of saved runs keep their names)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, state, x, train: bool):
        return mlp_next_state(self.config, state, x, train)


class _MlpAfterstateDynamics(nn.Module):
    config: NetworkConfig
    num_actions: int
    action_features: Any = None  # as in network.py's _MlpDynamics

    @nn.compact
    def __call__(self, hidden_state, action, train: bool):  # [B, D], [B] -> [B, D]
        encoded = encode_mlp_action(action, self.num_actions, self.action_features, hidden_state.dtype)
        return _MlpTrunk(self.config)(hidden_state, jnp.concatenate([hidden_state, encoded], -1), train)


class _MlpChanceDynamics(nn.Module):
    config: NetworkConfig

    @nn.compact
    def __call__(self, afterstate, code, train: bool):  # [B, D], [B, C] -> [B, D], [B, Z]
        x = _MlpTrunk(self.config)(afterstate, jnp.concatenate([afterstate, code], -1), train)
        reward_logits = _CategoricalHead(self.config, self.config.support.size, name="reward_head")(x, train)
        return x, reward_logits


class _MlpChanceEncoder(nn.Module):
    config: NetworkConfig
    num_chance_outcomes: int

    @nn.compact
    def __call__(self, pair, train: bool):  # [B, 1, 1, 2 C_h] -> [B, C]
        x = _MlpRepresentation(self.config)(pair, train)
        return _CategoricalHead(self.config, self.num_chance_outcomes)(x, train)


# ---------------------------------------------------------------- the model


class _StochasticMuZeroModel(nn.Module):
    config: NetworkConfig
    num_actions: int
    num_chance_outcomes: int
    action_planes: Any = None
    predicts_turns: bool = False  # a "the turn passes" logit on every state g makes (turns may repeat)
    action_features: Any = None  # as in network.py's _MuZeroModel

    def setup(self):
        if self.predicts_turns:
            self.turn_head = nn.Dense(1, name="turn_head")
        if self.config.kind == "resnet":
            self.representation = _ResRepresentation(self.config)
            self.prediction = _ResPrediction(self.config, self.num_actions)
            self.afterstate_dynamics = _ResAfterstateDynamics(self.config, self.num_actions, self.action_planes)
            # ψ has f's shape: a value head (Q) and a distribution head (σ over codes instead of actions).
            self.afterstate_prediction = _ResPrediction(self.config, self.num_chance_outcomes)
            self.dynamics = _ResChanceDynamics(self.config)
            self.encoder = _ResChanceEncoder(self.config, self.num_chance_outcomes)
            self.projection = _ResProjection(self.config)
        else:
            self.representation = _MlpRepresentation(self.config)
            self.prediction = _MlpPrediction(self.config, self.num_actions)
            self.afterstate_dynamics = _MlpAfterstateDynamics(self.config, self.num_actions, self.action_features)
            self.afterstate_prediction = _MlpPrediction(self.config, self.num_chance_outcomes)
            self.dynamics = _MlpChanceDynamics(self.config)
            self.encoder = _MlpChanceEncoder(self.config, self.num_chance_outcomes)
            self.projection = _MlpProjection(self.config)

    def _scale(self, x):
        return finish_hidden_state(self.config, x)  # float32 afterstates too, whatever network.dtype

    def _decode(self, logits):
        return logits_to_scalar(logits, self.config.support)

    def _state_output(self, hidden_state, reward_logits, train: bool) -> NetworkOutput:
        value_logits, policy_logits = self.prediction(hidden_state, train)
        return NetworkOutput(
            hidden_state=hidden_state,
            value=self._decode(value_logits),
            reward=self._decode(reward_logits),
            policy_logits=policy_logits,
            value_logits=value_logits,
            reward_logits=reward_logits,
        )

    def initial_inference(self, stacked_obs, train: bool) -> NetworkOutput:
        hidden_state = self._scale(self.representation(stacked_obs, train))
        batch = stacked_obs.shape[0]
        # All-zero reward logits decode to a nonzero scalar on an asymmetric support; say 0 outright.
        out = self._state_output(hidden_state, jnp.zeros((batch, self.config.support.size), jnp.float32), train)
        return out._replace(reward=jnp.zeros((batch,), jnp.float32))

    def afterstate_inference(self, hidden_state, action, train: bool) -> AfterstateOutput:
        afterstate = self._scale(self.afterstate_dynamics(hidden_state, action, train))
        value_logits, chance_logits = self.afterstate_prediction(afterstate, train)
        return AfterstateOutput(
            afterstate=afterstate,
            value=self._decode(value_logits),
            value_logits=value_logits,
            chance_logits=chance_logits,
        )

    def recurrent_inference(self, afterstate, code, train: bool) -> NetworkOutput:
        hidden_state, reward_logits = self.dynamics(afterstate, code, train)
        out = self._state_output(self._scale(hidden_state), reward_logits, train)
        if self.predicts_turns:
            out = out._replace(turn_logit=turn_head_logit(self.turn_head, out.hidden_state))
        return out

    def chance_inference(self, previous_stacked_obs, stacked_obs, train: bool) -> ChanceOutput:
        logits = self.encoder(jnp.concatenate([previous_stacked_obs, stacked_obs], -1), train)
        return ChanceOutput(logits=logits, code=straight_through_one_hot(logits))

    def project(self, hidden_state, train: bool):
        return self.projection(hidden_state, train)

    def init_all(self, stacked_obs):
        """Touches every submodule once so `init` creates all parameters."""
        batch = stacked_obs.shape[0]
        out = self.initial_inference(stacked_obs, train=False)
        after = self.afterstate_inference(out.hidden_state, jnp.zeros((batch,), jnp.int32), train=False)
        chance = self.chance_inference(stacked_obs, stacked_obs, train=False)
        self.recurrent_inference(after.afterstate, chance.code, train=False)
        return self.project(out.hidden_state, train=False)


@dataclasses.dataclass(frozen=True)
class StochasticNetwork:
    """Stochastic MuZero's model as pure, batched functions of `variables = {"params", "batch_stats"}`.

    Same modes and conventions as network.py's `Network` (acting functions
    change nothing; `*_train` use batch moments and return new `batch_stats`),
    and the same `init`, `initial_inference`, `project` signatures, so the
    learner's state and the loss's value targets and consistency term work on
    either. `recurrent_inference` differs: it starts from an afterstate and a
    chance code, not from a hidden state and an action.
    """

    config: NetworkConfig
    num_actions: int  # A, the dummy action included
    num_chance_outcomes: int  # C, the codebook size
    input_shape: tuple[int, int, int]  # (H, W, C_h) of one stacked observation
    hidden_state_shape: tuple[int, ...]  # per-example hidden state (and afterstate) shape
    init: Callable  # (rng, stacked_obs [B, H, W, C_h]) -> variables
    initial_inference: Callable  # (variables, stacked_obs) -> NetworkOutput
    afterstate_inference: Callable  # (variables, hidden_state [B, ...], action [B] int32) -> AfterstateOutput
    recurrent_inference: Callable  # (variables, afterstate [B, ...], code [B, C] float) -> NetworkOutput
    chance_inference: Callable  # (variables, previous_stacked_obs, stacked_obs) -> ChanceOutput
    project: Callable  # (variables, hidden_state) -> [B, D]
    initial_inference_train: Callable  # same arguments, -> (output, batch_stats)
    afterstate_inference_train: Callable
    recurrent_inference_train: Callable
    chance_inference_train: Callable
    project_train: Callable


def make_stochastic_network(
    config: NetworkConfig, *, obs_shape: tuple[int, int, int], history_length: int, num_actions: int,
    num_chance_outcomes: int, action_planes=None, predicts_turns: bool = False, action_features=None,
) -> StochasticNetwork:
    """Builds the model for frames of `obs_shape`, L = history_length, A = num_actions, C = num_chance_outcomes.

    `action_planes` and `action_features` as in `make_network` (φ sees the cells each action acts on,
    or the action's parts).
    `predicts_turns`: g also gives `turn_logit`, whether the player to move changed (games whose
    turns may repeat; the search signs each step's value with it)."""
    if num_chance_outcomes < 1:
        raise MooziError(f"num_chance_outcomes (the codebook size C) must be >= 1, got {num_chance_outcomes}")
    # The deterministic network of the same config fixes the input and hidden-state shapes.
    shapes = make_network(config, obs_shape=obs_shape, history_length=history_length, num_actions=num_actions)
    planes, features = dynamics_action_maps(config, action_planes, action_features)
    model = _StochasticMuZeroModel(config, num_actions, num_chance_outcomes, planes, predicts_turns, features)
    M = _StochasticMuZeroModel
    init, acting, training = model_calls(model)

    methods = ("initial_inference", "afterstate_inference", "recurrent_inference", "chance_inference", "project")
    return StochasticNetwork(
        config=config,
        num_actions=num_actions,
        num_chance_outcomes=num_chance_outcomes,
        input_shape=shapes.input_shape,
        hidden_state_shape=shapes.hidden_state_shape,
        init=init,
        **{name: acting(getattr(M, name)) for name in methods},
        **{f"{name}_train": training(getattr(M, name)) for name in methods},
    )
