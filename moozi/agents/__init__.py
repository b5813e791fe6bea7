"""Model-free learning agents beside MuZero/AlphaZero (moozi/core), one package each, laid out alike
(config, learning; the actor-critic network, acting and rollouts they share are in actor_critic/)."""
