"""moozi: a general game-playing system that learns to plan (MuZero in JAX + mctx)."""

__version__ = "0.1.0"
__all__ = ["load_agent", "make_env", "Config", "build_config", "__version__"]


def __getattr__(name):
    # Lazy: `import moozi` stays cheap (no JAX or game libraries until they are used).
    if name == "load_agent":
        from moozi.agent import load_agent

        return load_agent
    if name == "make_env":
        from moozi.envs.registry import make_env

        return make_env
    if name in ("Config", "build_config"):
        from moozi import config

        return getattr(config, name)
    raise AttributeError(f"module 'moozi' has no attribute {name!r}")
