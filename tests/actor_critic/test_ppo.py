"""PPO: GAE and the loss against hand-computed values, and a learning regression on gymnax CartPole."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from moozi.actor_critic.networks import example_obs, make_policy_network
from moozi.actor_critic.rollout import Rollout
from moozi.actor_critic.ppo import PPOConfig
from moozi.actor_critic.ppo import Batch, advantages, loss_fn
from moozi.errors import MooziError


def one_episode_rollout(**overrides) -> Rollout:
    # One env, three steps: o0 -a0-> o1 (reward 1) -a1-> o2 (terminal, reward 0); then a reset.
    fields = {
        "obs": jnp.zeros((3, 1, 1, 1, 2)),
        "legal_actions": jnp.ones((3, 1, 3), bool),
        "reward": jnp.array([[0.0], [1.0], [0.0]]),
        "is_last": jnp.array([[False], [False], [True]]),
        "action": jnp.array([[1], [2], [0]]),
        "log_prob": jnp.zeros((3, 1)),
        "value": jnp.array([[0.5], [0.6], [0.7]]),
        "next_obs": jnp.zeros((1, 1, 1, 2)),
        "next_legal_actions": jnp.ones((1, 3), bool),
        "next_reward": jnp.array([0.0]),
        "next_is_last": jnp.array([False]),
        "next_value": jnp.array([0.4]),
    }
    fields.update(overrides)
    return Rollout(**fields)


def test_gae_by_hand():
    adv, target = advantages(one_episode_rollout(), discount=0.9, gae_lambda=0.8)
    # delta_0 = 1 + 0.9 * 0.6 - 0.5 = 1.04; delta_1 = 0 + 0 * 0.7 - 0.6 = -0.6 (o2 is terminal);
    # A_1 = delta_1; A_0 = delta_0 + 0.9 * 0.8 * A_1 = 0.608. Step 2 took no action (masked); its
    # delta, 0 + 0.9 * 0.4 - 0.7, must not reach A_1: the episode ended between them.
    np.testing.assert_allclose(adv[:, 0], [0.608, -0.6, -0.34], atol=1e-6)
    np.testing.assert_allclose(target[:, 0], [1.108, 0.0, 0.36], atol=1e-6)


def test_gae_bootstraps_across_the_rollout_end():
    rollout = one_episode_rollout(is_last=jnp.array([[False], [False], [False]]))
    adv, _ = advantages(rollout, discount=0.9, gae_lambda=1.0)
    # lambda = 1: Monte-Carlo to the end, then v(o_3) = 0.4: A_2 = 0 + 0.9 * 0.4 - 0.7 = -0.34.
    np.testing.assert_allclose(adv[2, 0], -0.34, atol=1e-6)
    np.testing.assert_allclose(adv[0, 0], 1.0 + 0.9 * 0.0 + 0.81 * 0.36 - 0.5, atol=1e-6)


def test_loss_at_the_acting_parameters_by_hand():
    config = PPOConfig(normalize_advantages=False, clip_value=True, mlp_hidden_sizes=(8,))
    network = make_policy_network(config.torso, config.mlp_hidden_sizes, (1, 1, 2), 3)
    params = network.init(jax.random.PRNGKey(0), example_obs((1, 1, 2)))
    obs = jax.random.normal(jax.random.PRNGKey(1), (4, 1, 1, 2))
    legal = jnp.array([[False, True, True]] * 3 + [[True, False, False]])
    logits, value = network.apply(params, obs, legal)
    action = jnp.array([1, 2, 1, 0])
    log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
    batch = Batch(obs, legal, action, log_prob, value, advantage=jnp.array([1.0, -2.0, 0.5, 9.0]),
                  value_target=value + jnp.array([0.1, -0.2, 0.3, 5.0]), mask=jnp.array([1.0, 1.0, 1.0, 0.0]))
    total, m = loss_fn(params, network, batch, config)
    # ratio 1: the surrogate is -mean(A) over the three real steps; the value error is unclipped
    # (the new value is the old one) and the masked fourth step counts nowhere.
    np.testing.assert_allclose(m["policy_loss"], -(1.0 - 2.0 + 0.5) / 3, atol=1e-6)
    np.testing.assert_allclose(m["value_loss"], 0.5 * (0.01 + 0.04 + 0.09) / 3, atol=1e-6)
    p = jax.nn.softmax(logits[:3])
    entropy = -(p * jnp.log(jnp.where(p > 0, p, 1.0))).sum(-1).mean()
    np.testing.assert_allclose(m["policy_entropy"], entropy, atol=1e-5)
    np.testing.assert_allclose(m["approx_kl"], 0.0, atol=1e-7)
    expected = m["policy_loss"] + 0.5 * m["value_loss"] - 0.01 * entropy
    np.testing.assert_allclose(total, expected, atol=1e-5)


@pytest.mark.parametrize("shared_torso", [False, True])
def test_a_critic_of_its_own_leaves_the_policy_features_alone(shared_torso):
    network = make_policy_network("mlp", (8, 8), (2, 2, 1), 3, shared_torso=shared_torso)
    params = network.init(jax.random.PRNGKey(0), example_obs((2, 2, 1)))
    obs = jax.random.normal(jax.random.PRNGKey(1), (5, 2, 2, 1))
    legal = jnp.ones((5, 3), bool)
    value_grads = jax.grad(lambda p: network.apply(p, obs, legal)[1].sum())(params)["params"]
    policy_grads = jax.grad(lambda p: network.apply(p, obs, legal)[0][:, 1].sum())(params)["params"]
    torso_norm = optax.global_norm(value_grads["torso"])
    if shared_torso:
        assert "critic_torso" not in params["params"] and torso_norm > 0
    else:
        # The value loss cannot move the policy's torso, nor the policy loss the critic's.
        assert torso_norm == 0.0
        assert optax.global_norm(policy_grads["critic_torso"]) == 0.0
        assert optax.global_norm(value_grads["critic_torso"]) > 0


def test_bad_settings_name_the_key():
    with pytest.raises(MooziError, match="ppo.torso"):
        PPOConfig(torso="lstm")
    with pytest.raises(MooziError, match="ppo.num_minibatches"):
        PPOConfig(num_minibatches=0)


@pytest.mark.slow
def test_ppo_learns_cartpole():
    """~60k env steps of gymnax CartPole-v1 (about 20 s here, most of it compiling): a broken
    update (sign, masking, advantage) stays near the random policy's ~22. The greedy policy reaches
    ~215 here with jax 0.10.2 / flax 0.12.8 / optax 0.2.8 (other versions' numerics give other
    curves), so the bar is set well below that and far above chance."""
    from moozi.actor_critic import make_anakin_trainer
    from moozi.envs import gymnax

    env = gymnax.make("gymnax:CartPole-v1")
    # cleanrl's CartPole settings (learning rate 2.5e-3 annealed, clip 0.2, 4 minibatches, 64-unit layers).
    config = PPOConfig(learning_rate=2.5e-3, anneal_learning_rate=True, anneal_env_steps=200_000, clip_epsilon=0.2,
                       num_minibatches=4, mlp_hidden_sizes=(64, 64))
    trainer = make_anakin_trainer(env, config, num_envs=8, rollout_steps=128, seed=0)
    first = trainer.iteration()
    for _ in range(59):
        trainer.iteration()
    assert first["episode_return"] < 60
    returns = trainer.evaluate(20, greedy=True, max_steps=500)
    assert returns.mean() >= 150, returns
