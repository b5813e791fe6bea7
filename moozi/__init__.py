"""moozi: a general game-playing system that learns to plan (MuZero / AlphaZero in JAX)."""

__version__ = "0.1.0"
