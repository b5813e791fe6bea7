"""What PPO and IMPALA share: the actor-critic network, acting, rollouts on moozi's env contract and
the jitted Anakin loop."""
