"""moozi: a general game-playing system that learns to plan (MuZero in JAX + mctx).

The layout, the roles and the data contracts: docs/architecture.md. Docstrings
cite the specification, the MooZi thesis, as "thesis 5.2.x"; the table of its
sections and where each lives is in that page too ("The thesis").
"""

from moozi._version import __version__
from moozi.xla_defaults import apply_xla_defaults

# Before JAX starts its CPU backend: XLA reads XLA_FLAGS once (moozi/xla_defaults.py).
apply_xla_defaults()
__all__ = ["load_agent", "make_env", "Config", "build_config", "__version__"]


def __getattr__(name):
    # Lazy: `import moozi` stays cheap (no JAX or game libraries until they are used).
    if name == "load_agent":
        from moozi.play import load_agent

        return load_agent
    if name == "make_env":
        from moozi.envs.registry import make_env

        return make_env
    if name in ("Config", "build_config"):
        from moozi import config

        return getattr(config, name)
    raise AttributeError(f"module 'moozi' has no attribute {name!r}")
