"""The actor-critic: a shared torso, a policy head over the A actions and a scalar value head.

Initialisation as cleanrl's (orthogonal, gain sqrt(2) in the torso, 0.01 for the policy head, 1
for the value head): a near-uniform first policy and small first values.

`dtype` (`network.dtype`) is the layers' compute dtype, as for MuZero's network
(moozi/core/network.py): parameters stay float32, and the logits and the value
leave the network as float32, so the losses run in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from moozi.errors import MooziError

TORSOS = ("auto", "mlp", "nature_cnn")
_ILLEGAL_LOGIT = -1e9  # finite, so entropies and log-probabilities of masked rows stay finite


def check_torso(torso: str, key: str) -> None:
    if torso not in TORSOS:
        raise MooziError(f"{key} must be one of {', '.join(TORSOS)}, got {torso!r}")


def torso_kind(torso: str, obs_shape: tuple[int, ...]) -> str:
    """"auto": the Nature CNN for frames of side >= 32, else an MLP over the flattened observation
    (vectors, and MinAtar's 10x10 planes, where XLA's small CPU convolutions cost ~24x an MLP's time)."""
    if torso != "auto":
        return torso
    return "nature_cnn" if min(obs_shape[0], obs_shape[1]) >= 32 else "mlp"


def _dense(features: int, gain: float, dtype: Any = jnp.float32) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(gain), bias_init=nn.initializers.zeros,
                    dtype=dtype)


class Torso(nn.Module):
    kind: str  # "mlp" or "nature_cnn"
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)
    dtype: Any = jnp.float32  # compute dtype; parameters are float32

    @nn.compact
    def __call__(self, obs):  # [B, H, W, C] -> features [B, F]
        gain = float(np.sqrt(2.0))
        if self.kind == "nature_cnn":  # Mnih et al. 2015
            x = obs
            for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
                x = nn.relu(nn.Conv(features, (kernel, kernel), (stride, stride), padding="VALID",
                                    kernel_init=nn.initializers.orthogonal(gain), dtype=self.dtype)(x))
            return nn.relu(_dense(512, gain, self.dtype)(x.reshape(x.shape[0], -1)))
        x = obs.reshape(obs.shape[0], -1)
        for size in self.mlp_hidden_sizes:
            x = nn.relu(_dense(size, gain, self.dtype)(x))
        return x


class ActorCritic(nn.Module):
    num_actions: int
    torso: str  # "mlp" or "nature_cnn"
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)
    # False: the critic has a torso of its own, so the value loss (on unnormalised returns) cannot
    # reshape the policy's features; gymnax-blines' and PureJaxRL's MinAtar agents are built so.
    shared_torso: bool = True
    dtype: Any = jnp.float32  # compute dtype; parameters, logits and value are float32

    @nn.compact
    def __call__(self, obs):  # [B, H, W, C] -> logits [B, A], value [B]
        x = Torso(self.torso, self.mlp_hidden_sizes, self.dtype, name="torso")(obs)
        logits = _dense(self.num_actions, 0.01, self.dtype)(x).astype(jnp.float32)
        critic_x = x if self.shared_torso else Torso(self.torso, self.mlp_hidden_sizes, self.dtype,
                                                     name="critic_torso")(obs)
        value = _dense(1, 1.0, self.dtype)(critic_x)[:, 0].astype(jnp.float32)
        return logits, value


class PolicyNetwork(NamedTuple):
    init: Callable  # (rng, obs [B, H, W, C]) -> params
    apply: Callable  # (params, obs [B, H, W, C], legal [B, A]) -> (masked logits [B, A], value [B])


def make_policy_network(torso: str, mlp_hidden_sizes, obs_shape: tuple[int, ...], num_actions: int,
                        shared_torso: bool = True, dtype: str = "float32") -> PolicyNetwork:
    """`dtype`: the layers' compute dtype ("float32" or "bfloat16", `network.dtype`)."""
    module = ActorCritic(num_actions, torso_kind(torso, obs_shape), tuple(mlp_hidden_sizes), shared_torso,
                         jnp.dtype(dtype))

    def apply(params, obs, legal_actions):
        logits, value = module.apply(params, obs.astype(jnp.float32))
        return jnp.where(legal_actions, logits, _ILLEGAL_LOGIT), value

    return PolicyNetwork(init=module.init, apply=apply)


def example_obs(obs_shape: tuple[int, ...], batch_size: int = 1) -> jax.Array:
    return jnp.zeros((batch_size, *obs_shape), jnp.float32)


class ActorCriticTrainState(NamedTuple):
    """The network's parameters and its optimizer's state."""

    params: dict
    opt_state: Any
