"""The roles of a training run (thesis 5.2.12-5.2.16), one per module, as plain classes.

`parameter_optimizer` updates the parameters, `replay` holds the buffer,
`self_play` and `anakin_self_play` generate training trajectories (host envs;
JAX-native envs in one compiled program), `testing` measures the greedy agent
and `reanalyze` re-searches stored trajectories. None of them knows about Ray:
the backend (moozi/training/backends.py) wraps them.
"""
