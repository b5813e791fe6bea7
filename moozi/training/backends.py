"""Where roles live: in this process (`inline`) or as Ray actors (`ray`).

The driver talks to every role through `RoleHandle.call(method, *args)`,
which returns a future, and `Backend.get(futures)`. Inline calls run at once;
Ray calls run in the role's actor. Roles are plain classes either way: Ray
wraps them only here, at launch, so the role classes know nothing about Ray.

The Ray backend
---------------
* `backend.ray_address` unset: a local Ray instance, started by the driver
  and stopped by `shutdown()`. Set: join that cluster (`ray.init(address=)`,
  after checking in 5 s that something listens at a `host:port` address) and
  leave it running afterwards; the roles' actors end with the driver. A
  cluster with Ray's token authentication needs `RAY_AUTH_MODE=token` (and
  its token) in the driver's environment, as for any Ray client.
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

import concurrent.futures
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


def _value(arg):
    """An argument's value: a future from another inline role's call is waited for."""
    if isinstance(arg, _Done):
        return arg.value
    if isinstance(arg, concurrent.futures.Future):
        return arg.result()
    return arg


class InlineHandle:
    """A role in this process. With a thread (the default), calls run in order on the role's own
    thread and return futures, as a Ray actor's do: the learner's update then overlaps the rollout,
    since compiled JAX code runs without holding the GIL. Without one, each call runs at once."""

    def __init__(self, name: str, obj, spec, threaded: bool = True):
        self.name = name
        self.obj = obj
        self.spec = spec  # (cls, args, resources): what `restart` builds again
        self._executor = (
            concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"moozi-{name}") if threaded else None
        )

    def call(self, method: str, *args):
        if self._executor is None:
            return _Done(getattr(self.obj, method)(*map(_value, args)))
        return self._executor.submit(lambda: getattr(self.obj, method)(*map(_value, args)))

    def drain(self) -> None:
        """Waits for the call in progress and drops the queued ones (before the role is closed)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)


class InlineBackend:
    kind = "inline"

    def __init__(self, threaded: bool = True):
        self.threaded = threaded

    def start(self, name: str, cls, *args, resources: dict | None = None) -> InlineHandle:
        return InlineHandle(name, cls(*args), (cls, args, resources), self.threaded)

    def restart(self, handle: InlineHandle) -> InlineHandle:
        """A fresh instance of the role in place of `handle` (same name, same constructor arguments)."""
        handle.drain()
        close = getattr(handle.obj, "close", None)
        if close:
            close()
        cls, args, resources = handle.spec
        return self.start(handle.name, cls, *args, resources=resources)

    def get(self, futures):
        if isinstance(futures, list):
            return [_value(f) for f in futures]
        return _value(futures)

    def put(self, value):
        return value

    def resolve_arg(self, future):
        """What to pass to another role's call: the future itself, waited for on that role's thread."""
        return future

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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def _check_reachable(address: str, timeout: float = 5.0) -> str | None:
    """The host of a `host:port` (or `ray://host:port`) address after checking that something
    listens there; Ray itself would retry for minutes. None for other forms (e.g. `auto`)."""
    import socket

    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise MooziError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}") from None
    return host


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
            host = _check_reachable(config.ray_address)
            if host is not None and _is_loopback(host):
                self._single_machine_mode()  # else Ray would dial the machine's outward address
            try:
                ray.init(address=config.ray_address, log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError) as e:
                self._restore_env()
                hint = "" if os.environ.get("RAY_AUTH_MODE") else "; a cluster with token authentication also needs RAY_AUTH_MODE=token"
                raise MooziError(f"cannot join the Ray cluster at {config.ray_address}: {_first_line(e)}{hint}") from None
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

    def _single_machine_mode(self) -> None:
        """Keeps loopback addresses loopback: Ray on Linux resolves 127.0.0.1 / localhost to the
        machine's outward address unless in its single-machine mode, which it reads from this
        variable at import (child processes) and from `ray_constants` (this process). Undone by
        `shutdown()`."""
        from ray._private import ray_constants

        self._set_env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        if self._saved_cluster_flag is None:
            self._saved_cluster_flag = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False

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
            self._single_machine_mode()
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
            raise RoleDiedError(
                role, f"{role} died (its Ray actor is gone: {_first_line(e)}); the last checkpoint is intact, continue with --resume"
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
            self._restore_env()

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        if self._saved_cluster_flag is not None:
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = self._saved_cluster_flag
            self._saved_cluster_flag = None


def make_backend(kind: str, config: BackendConfig):
    if kind == "inline":
        return InlineBackend(threaded=config.inline_threads)
    if kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise MooziError("the ray backend needs Ray: pip install 'moozi[ray]'") from None
        return RayBackend(config)
    raise MooziError(f"unknown backend {kind!r}: allowed are inline, ray")
