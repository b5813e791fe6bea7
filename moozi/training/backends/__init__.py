"""Where roles live: in this process (`inline`) or as Ray actors (`ray`); `make_backend` picks one.

- `inline.py`: the interface the training loops use (`Backend`, `RoleHandle.call(Role.method, *args)`,
  the errors and waits; `SearchLoop` in search_loop.py, `HostTrainer` in actor_critic_host_loop.py)
  and the inline backend, each role on a thread of its own.
- `ray_backend.py`: each role a Ray actor (a local instance, or a cluster joined), its waits, its errors.
- `ray_placement.py`: the Ray roles' placement groups, reserved before any actor starts.
- `ray_cores.py`: which cores of its node each Ray role runs on (`backend.role_cores`).
"""

from __future__ import annotations

from moozi.config import BackendConfig
from moozi.errors import MooziError
from moozi.training.backends.inline import Backend, Call, InlineBackend, RoleDiedError, RoleHandle, WaitInterrupted
from moozi.training.backends.ray_backend import RayBackend

__all__ = ["Backend", "Call", "InlineBackend", "RayBackend", "RoleDiedError", "RoleHandle", "WaitInterrupted",
           "make_backend"]


def make_backend(kind: str, config: BackendConfig) -> Backend:
    if kind == "inline":
        return InlineBackend(threaded=config.inline_threads)
    if kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise MooziError("the ray backend needs Ray: pip install -e \".[ray]\" (in the moozi checkout)") from None
        return RayBackend(config)
    raise MooziError(f"unknown backend {kind!r}: allowed are inline, ray")
