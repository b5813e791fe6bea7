"""Where roles live: in this process (`inline`) or as Ray actors (`ray`).

The driver talks to every role through `RoleHandle.call(method, *args)`,
which returns a future, and `Backend.get(futures)`. Inline calls run at once;
Ray calls run in the role's actor. Roles are plain classes either way: Ray
wraps them only here, at launch (STYLE: workers that don't know about Ray).
"""

from __future__ import annotations

import os
from typing import Any

from moozi.config import BackendConfig
from moozi.errors import MooziError


class RoleDiedError(MooziError):
    """A role's process died; the message names the role."""


class _Done:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class InlineHandle:
    def __init__(self, name: str, obj):
        self.name = name
        self.obj = obj

    def call(self, method: str, *args):
        return _Done(getattr(self.obj, method)(*args))


class InlineBackend:
    kind = "inline"

    def start(self, name: str, cls, *args, resources: dict | None = None) -> InlineHandle:
        return InlineHandle(name, cls(*args))

    def get(self, futures):
        if isinstance(futures, list):
            return [f.value for f in futures]
        return futures.value

    def put(self, value):
        return value

    def resolve_arg(self, future):
        """What to pass to another role's call: the value itself inline."""
        return future.value if isinstance(future, _Done) else future

    def kill(self, handle) -> None:
        pass

    def shutdown(self) -> None:
        pass


class RayHandle:
    def __init__(self, name: str, actor, restart_args):
        self.name = name
        self.actor = actor
        self.restart_args = restart_args

    def call(self, method: str, *args):
        return getattr(self.actor, method).remote(*args)


class RayBackend:
    kind = "ray"

    def __init__(self, config: BackendConfig):
        import ray

        self.ray = ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = dict(
                include_dashboard=config.include_dashboard,
                dashboard_host=config.bind_host,
                log_to_driver=False,
                configure_logging=False,
            )
            if config.ray_address:
                ray.init(address=config.ray_address, **kwargs)
            else:
                # A local instance bound to this machine only (nothing listens beyond bind_host).
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                ray.init(
                    _node_ip_address=config.bind_host,
                    num_cpus=max(os.cpu_count() or 1, 2),
                    **kwargs,
                )
            self._owns_ray = True
        else:
            self._owns_ray = False

    def start(self, name: str, cls, *args, resources: dict | None = None) -> RayHandle:
        options = dict(resources or {})
        actor_cls = self.ray.remote(**options)(cls) if options else self.ray.remote(cls)
        return RayHandle(name, actor_cls.remote(*args), (cls, args, options))

    def get(self, futures):
        from ray.exceptions import ActorDiedError, RayActorError

        try:
            return self.ray.get(futures)
        except (RayActorError, ActorDiedError) as e:
            raise RoleDiedError(f"a role's process died: {str(e).splitlines()[0]}") from None

    def put(self, value):
        return self.ray.put(value)

    def resolve_arg(self, future):
        return future

    def kill(self, handle: RayHandle) -> None:
        self.ray.kill(handle.actor, no_restart=True)

    def shutdown(self) -> None:
        if self._owns_ray:
            self.ray.shutdown()


def make_backend(kind: str, config: BackendConfig):
    if kind == "inline":
        return InlineBackend()
    if kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise MooziError("the ray backend needs Ray: pip install 'moozi[ray]'") from None
        return RayBackend(config)
    raise MooziError(f"unknown backend {kind!r}: allowed are inline, ray")
