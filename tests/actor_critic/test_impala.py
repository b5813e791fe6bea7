"""IMPALA: V-trace against hand-computed values, and the one-version policy lag it corrects."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from moozi.actor_critic.impala import IMPALAConfig
from moozi.actor_critic.impala import vtrace_targets
from moozi.errors import MooziError


def test_vtrace_by_hand():
    # Transitions of one env: r = 1, 0, 0; the second ends the episode (discount 0); the third
    # follows a reset. V = 0.5, 0.6, 0.7, bootstrap 0.4; pi/mu = 2, 0.5, 1; rho-bar = c-bar = 1.
    config = IMPALAConfig(discount=0.9, vtrace_lambda=0.5)
    values = jnp.array([[0.5], [0.6], [0.7]])
    errors, pg_advantage = vtrace_targets(
        values, jnp.array([0.4]), jnp.array([[1.0], [0.0], [0.0]]), jnp.array([[0.9], [0.0], [0.9]]),
        jnp.array([[2.0], [0.5], [1.0]]), config,
    )
    # rho = (1, 0.5, 1), c = lambda * rho = (0.5, 0.25, 0.5).
    # delta = (1 * (1 + 0.9 * 0.6 - 0.5), 0.5 * (0 - 0.6), 1 * (0.9 * 0.4 - 0.7)) = (1.04, -0.3, -0.34)
    # v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})): (1.04 + 0.9 * 0.5 * -0.3, -0.3, -0.34)
    np.testing.assert_allclose(errors[:, 0], [0.905, -0.3, -0.34], atol=1e-6)
    # pg advantage: rho_s (r_s + gamma_s q_{s+1} - V(x_s)) with the lambda-mixed bootstrap
    # q_{s+1} = lambda v_{s+1} + (1 - lambda) V(x_{s+1}) (rlax; the paper's v_{s+1} when lambda = 1):
    # q_1 = 0.5 * 0.3 + 0.5 * 0.6 = 0.45; the last transition bootstraps from V(o_3) = 0.4.
    np.testing.assert_allclose(pg_advantage[:, 0], [1 + 0.9 * 0.45 - 0.5, 0.5 * -0.6, 0.9 * 0.4 - 0.7], atol=1e-6)


def test_bad_settings_name_the_key():
    with pytest.raises(MooziError, match="impala.vtrace_lambda"):
        IMPALAConfig(vtrace_lambda=1.5)
    with pytest.raises(MooziError, match="impala.torso"):
        IMPALAConfig(torso="transformer")


@pytest.mark.slow
def test_the_loss_is_summed_over_the_rollout():
    """The paper's losses are sums over the T x B transitions (its RMSProp epsilon and gradient clip
    are sized for them; averaged, Breakout stalled at a return of 5): a rollout joined with a copy of
    itself on the env axis doubles the gradient, and the logged losses, per transition, stay."""
    import jax
    import optax

    from moozi.actor_critic.networks import make_policy_network
    from moozi.actor_critic.rollout import Rollout
    from moozi.actor_critic.impala import loss_fn

    config = IMPALAConfig(mlp_hidden_sizes=(8,))
    T, B, A = 5, 3, 2
    network = make_policy_network("mlp", (8,), (4,), A)
    params = network.init(jax.random.PRNGKey(0), np.zeros((1, 4), np.float32))
    rng = np.random.default_rng(0)
    rollout = Rollout(
        obs=rng.normal(size=(T, B, 4)).astype(np.float32), legal_actions=np.ones((T, B, A), bool),
        reward=rng.integers(0, 2, (T, B)).astype(np.float32), is_last=np.eye(T, B, -2, dtype=bool),
        action=rng.integers(0, A, (T, B)), log_prob=np.full((T, B), np.log(0.5), np.float32),
        value=np.zeros((T, B), np.float32), next_obs=rng.normal(size=(B, 4)).astype(np.float32),
        next_legal_actions=np.ones((B, A), bool), next_reward=np.ones(B, np.float32),
        next_is_last=np.zeros(B, bool), next_value=np.zeros(B, np.float32))
    doubled = Rollout(*(np.concatenate([x, x], axis=0 if name.startswith("next_") else 1)
                        for name, x in rollout._asdict().items()))
    grad = jax.grad(loss_fn, has_aux=True)
    (g1, m1), (g2, m2) = grad(params, network, rollout, config), grad(params, network, doubled, config)
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
        np.testing.assert_allclose(b, 2 * a, rtol=1e-4, atol=1e-6)
    assert float(optax.global_norm(g1)) > 0
    for key in ("policy_loss", "value_loss", "policy_entropy"):
        np.testing.assert_allclose(m2[key], m1[key], rtol=1e-5)


@pytest.mark.parametrize("policy_lag", [0, 1])
@pytest.mark.slow
def test_policy_lag_is_what_vtrace_sees(policy_lag):
    """Acting one update behind (Cleanba's synchronous schedule) makes pi/mu differ from 1; acting
    with the latest parameters keeps it 1."""
    from moozi.actor_critic import make_anakin_trainer
    from moozi.envs import gymnax

    config = IMPALAConfig(learning_rate=1e-2, mlp_hidden_sizes=(16,))
    trainer = make_anakin_trainer(gymnax.make("gymnax:CartPole-v1"), config, num_envs=4, rollout_steps=8,
                                  policy_lag=policy_lag)
    weights = [trainer.iteration()["importance_weight_mean"] for _ in range(3)]
    assert abs(weights[0] - 1.0) < 1e-4  # the first rollout is played by the initial parameters either way
    if policy_lag:
        assert max(abs(w - 1.0) for w in weights[1:]) > 1e-3
    else:
        assert max(abs(w - 1.0) for w in weights) < 1e-4


@pytest.mark.slow
def test_impala_learns_cartpole():
    """~250k env steps of gymnax CartPole-v1 in ~20 s (mostly compiling), one RMSProp step per rollout
    of 32 x 20: a broken V-trace or loss stays near the random policy's ~22."""
    from moozi.actor_critic import make_anakin_trainer
    from moozi.envs import gymnax

    config = IMPALAConfig(mlp_hidden_sizes=(64, 64), learning_rate=2e-3, anneal_env_steps=300_000)
    trainer = make_anakin_trainer(gymnax.make("gymnax:CartPole-v1"), config, num_envs=32, rollout_steps=20)
    for _ in range(400):
        trainer.iteration()
    returns = trainer.evaluate(20, greedy=True, max_steps=500)
    assert returns.mean() >= 150, returns
