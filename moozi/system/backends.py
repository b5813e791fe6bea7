"""Where roles live: in this process (`inline`) or as Ray actors (`ray`).

The driver talks to every role through `RoleHandle.call(method, *args)`,
which returns a future, and `Backend.get(futures)`. Inline calls run at once;
Ray calls run in the role's actor. Roles are plain classes either way: Ray
wraps them only here, at launch (STYLE: workers that don't know about Ray).

The Ray backend
---------------
* `backend.ray_address` unset: a local Ray instance, started by the driver
  and stopped by `shutdown()`. Set: join that cluster (`ray.init(address=)`),
  leaving it running afterwards.
* Local instance, network: every listener (GCS, raylet, object manager,
  agents, the driver's and actors' gRPC servers, the dashboard if enabled)
  binds to `backend.bind_host`, 127.0.0.1 by default; nothing listens beyond
  this machine. Ray on Linux turns a loopback `_node_ip_address` into the
  machine's outward address (`services.resolve_ip_for_localhost`), so for a
  loopback bind_host the backend switches Ray to its single-machine mode
  (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`) while it starts the instance. The
  dashboard is off unless `backend.include_dashboard`; usage stats are off
  (`RAY_USAGE_STATS_ENABLED=0`); Ray's token authentication stays as Ray
  sets it (on for a new local instance in Ray >= 2.5x), without its notice.
* Local instance, resources: each role's Ray resources come from the config
  (`ray.remote` options). The instance is started lazily, at the first use
  of any role, with `num_cpus = max(os.cpu_count(), ceil(sum of the CPUs the
  roles ask for))`: Ray's CPUs are scheduling tokens, and the synchronous
  driver needs every role alive at once, so an instance with fewer tokens
  than the roles ask for (e.g. 4.0 on a 2-core laptop) would leave actors
  pending forever. GPUs asked for but not present are an error, not a hang.
* Logs: Ray's session directory under its temp dir (/tmp/ray/session_*);
  nothing from the actors is forwarded to the terminal (`log_to_driver=False`).
* Data moves in whole batches: one call per iteration per role; futures
  passed from one role's call into another's go through the object store
  without a round trip through the driver.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
from typing import Any

from moozi.config import BackendConfig
from moozi.errors import MooziError


class RoleDiedError(MooziError):
    """A role's process died; the message names the role (also in `.role`)."""

    def __init__(self, role: str, message: str):
        super().__init__(message)
        self.role = role


class _Done:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class InlineHandle:
    def __init__(self, name: str, obj, spec):
        self.name = name
        self.obj = obj
        self.spec = spec  # (cls, args, resources): what `restart` builds again

    def call(self, method: str, *args):
        return _Done(getattr(self.obj, method)(*args))


class InlineBackend:
    kind = "inline"

    def start(self, name: str, cls, *args, resources: dict | None = None) -> InlineHandle:
        return InlineHandle(name, cls(*args), (cls, args, resources))

    def restart(self, handle: InlineHandle) -> InlineHandle:
        """A fresh instance of the role in place of `handle` (same name, same constructor arguments)."""
        close = getattr(handle.obj, "close", None)
        if close:
            close()
        cls, args, resources = handle.spec
        return self.start(handle.name, cls, *args, resources=resources)

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
    """A role as a Ray actor. The actor is created when the backend launches (see RayBackend)."""

    def __init__(self, backend: "RayBackend", name: str, spec):
        self.name = name
        self.spec = spec  # (cls, args, options)
        self._backend = backend
        self._actor = None

    @property
    def actor(self):
        if self._actor is None:
            self._backend._launch()
        return self._actor

    def call(self, method: str, *args):
        return getattr(self.actor, method).remote(*args)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RayBackend:
    kind = "ray"

    def __init__(self, config: BackendConfig):
        import ray

        self.ray = ray
        self.config = config
        self._handles: list[RayHandle] = []  # every role started, in start order
        self._names: dict[str, str] = {}  # actor id (hex) -> role name, for RoleDiedError
        self._saved_env: dict[str, str | None] = {}
        self._saved_cluster_flag = None
        self._owns_ray = False  # this backend called ray.init, so shutdown() calls ray.shutdown()
        self._closed = False
        if not ray.is_initialized() and config.ray_address:
            ray.init(address=config.ray_address, log_to_driver=False, configure_logging=False)
            self._owns_ray = True
        # Otherwise the local instance starts at the first use of a role, sized for all roles started by then.

    # --- launching --------------------------------------------------------------------
    def start(self, name: str, cls, *args, resources: dict | None = None) -> RayHandle:
        handle = RayHandle(self, name, (cls, args, dict(resources or {})))
        self._handles.append(handle)
        if self.ray.is_initialized():
            self._create(handle)
        return handle

    def restart(self, handle: RayHandle) -> RayHandle:
        """A fresh actor in place of `handle` (same name and constructor arguments, new process)."""
        self.kill(handle)
        self._handles.remove(handle)
        cls, args, options = handle.spec
        return self.start(handle.name, cls, *args, resources=options)

    def _create(self, handle: RayHandle) -> None:
        cls, args, options = handle.spec
        actor = self.ray.remote(**options)(cls).remote(*args) if options else self.ray.remote(cls).remote(*args)
        self._names[actor._actor_id.hex()] = handle.name
        handle._actor = actor

    def _launch(self) -> None:
        """Starts the local Ray instance (if none is up) and creates every pending actor."""
        if self._closed:
            raise MooziError("the Ray backend was shut down")
        if not self.ray.is_initialized():
            self._init_local()
        for handle in self._handles:
            if handle._actor is None:
                self._create(handle)

    def _set_env(self, key: str, value: str) -> None:
        if key not in self._saved_env:
            self._saved_env[key] = os.environ.get(key)
        os.environ[key] = value

    def _init_local(self) -> None:
        config = self.config
        cpus = sum(float(h.spec[2].get("num_cpus", 1.0)) for h in self._handles)
        gpus = sum(float(h.spec[2].get("num_gpus", 0.0)) for h in self._handles)
        self._set_env("RAY_USAGE_STATS_ENABLED", "0")
        kwargs: dict[str, Any] = dict(
            num_cpus=max(os.cpu_count() or 1, math.ceil(cpus - 1e-9)),
            include_dashboard=config.include_dashboard,
            dashboard_host=config.bind_host,
            log_to_driver=False,
            configure_logging=False,
        )
        host = config.bind_host
        if _is_loopback(host):
            # Ray resolves a loopback node address to the outward one unless in single-machine mode,
            # which it reads from this variable at import (children) and from ray_constants (this process).
            from ray._private import ray_constants

            self._set_env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            self._saved_cluster_flag = ray_constants.ENABLE_RAY_CLUSTER
            ray_constants.ENABLE_RAY_CLUSTER = False
            kwargs["_node_ip_address"] = "127.0.0.1"
        elif host not in ("0.0.0.0", "::", ""):
            kwargs["_node_ip_address"] = host
        # Ray >= 2.5x turns on token authentication for a new local instance and warns that it did
        # (through `logging`, which would reach the terminal): keep it on, drop the notice.
        notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = notice.level
        notice.setLevel(logging.ERROR)
        try:
            self.ray.init(**kwargs)
        finally:
            notice.setLevel(level)
        self._owns_ray = True
        available = self.ray.cluster_resources().get("GPU", 0.0)
        if gpus > available + 1e-9:
            self.shutdown()
            raise MooziError(
                f"the roles ask for {gpus:g} GPUs but this machine's Ray instance has {available:g}: "
                "set backend.learner_gpus / backend.rollout_worker_gpus to 0"
            )

    # --- calls ------------------------------------------------------------------------
    def get(self, futures):
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return self.ray.get(futures)
        except RayActorError as e:
            role = self._names.get(getattr(e, "actor_id", None) or "", "a role")
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise RoleDiedError(
                role, f"{role} died (its Ray actor is gone: {first[:200]}); the last checkpoint is intact, continue with --resume"
            ) from None
        except RayTaskError as e:
            # An error raised inside a role: the same one-line error the inline backend would raise.
            if isinstance(e.cause, MooziError):
                raise e.cause from None
            raise

    def put(self, value):
        if not self.ray.is_initialized():
            self._launch()
        return self.ray.put(value)

    def resolve_arg(self, future):
        return future

    def kill(self, handle: RayHandle) -> None:
        if handle._actor is not None:
            self.ray.kill(handle._actor, no_restart=True)

    def shutdown(self) -> None:
        """Closes the roles that hold resources of their own (env processes), then stops Ray."""
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        try:
            if ray.is_initialized():
                live = [h for h in self._handles if h._actor is not None]
                closing = [h._actor.close.remote() for h in live if hasattr(h.spec[0], "close")]
                if closing:
                    ray.wait(closing, num_returns=len(closing), timeout=10)
                if not self._owns_ray:
                    for h in live:
                        ray.kill(h._actor, no_restart=True)
            if self._owns_ray:
                ray.shutdown()
        finally:
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            if self._saved_cluster_flag is not None:
                from ray._private import ray_constants

                ray_constants.ENABLE_RAY_CLUSTER = self._saved_cluster_flag


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
