"""The Ray backend: each role a Ray actor (its handle `RayHandle`, the interface in `inline.py`).

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
* Placement (a cluster or the local instance): every role's resources are
  reserved before any actor starts, all or nothing (`ray_placement.py`).
* Cores: with `backend.role_cores` on or auto, a role asking for whole CPUs
  runs on that many cores of its node of its own (`ray_cores.py`), so that
  the roles' XLA thread pools do not contend; off by default.
* Waits: `get` and `get_first` poll, so a stop request (a signal, --max-minutes) is seen
  within a second whatever the roles are doing (`interrupt`), and no wait
  lasts longer than `backend.wait_timeout_seconds` without an error that
  names the role and the call it waited for.
* Logs: Ray's session directory under its temp dir (/tmp/ray/session_*);
  nothing from the actors is forwarded to the terminal (`log_to_driver=False`).
* Data moves in whole batches: one call per iteration per role; futures
  passed from one role's call into another's go through the object store
  without a round trip through the driver.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from moozi.config import BackendConfig
from moozi.errors import MooziError
from moozi.training.backends.inline import POLL_SECONDS, RoleDiedError, RoleHandle, T, check_interrupt, check_nonempty
from moozi.training.backends.ray_cores import CoreSlot, confined_class, slots, whole_cpus
from moozi.training.backends.ray_placement import PLACEMENT_GROUPS, Placement, check_reachable, is_loopback


class RayHandle(RoleHandle[T]):
    """A role as a Ray actor. The actor is created when the backend launches (see RayBackend)."""

    def __init__(self, backend: "RayBackend", name: str, spec):
        self.name = name
        self.spec = spec  # (cls, args, options)
        self._backend = backend
        self._actor = None
        self.group = "learner"

    @property
    def actor(self):
        if self._actor is None:
            self._backend._launch()
        return self._actor

    def _submit(self, name: str, args: tuple, kwargs: dict):
        ref = getattr(self.actor, name).remote(*args, **kwargs)
        self._backend._remember_call(ref, f"{self.name}.{name}")
        return ref


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


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
        self._placement = Placement(ray, config)  # the roles' placement groups, reserved at launch
        self._core_slots: dict[str, CoreSlot] = {}  # role name -> its cores on its node (ray_cores.py), set at launch unless role_cores=off
        # object ref's id -> "role.method" (the id, not the ref: holding a ref would keep its object alive)
        self._calls: collections.OrderedDict = collections.OrderedDict()
        self._ready: dict[str, Any] = {}  # role name -> its readiness probe (`is_ready`)
        self.interrupt: Callable[[], str | None] | None = None  # the driver's stop reason or None, set by the loop; `get` polls it
        self._owns_ray = False  # this backend called ray.init, so shutdown() calls ray.shutdown()
        self._closed = False
        if not ray.is_initialized() and config.ray_address:
            host = check_reachable(config.ray_address)
            if host is not None and is_loopback(host):
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
    def start(self, name: str, cls, *args, resources: dict | None = None, group: str = "learner") -> RayHandle:
        """Registers a role of `group` ("learner": with the learner on one node; "rollout": spread by
        `backend.placement_strategy`); its actor is created with every other role's at `launch()` (or at
        the first call to any role), once the cluster has reserved all their resources."""
        if group not in PLACEMENT_GROUPS:
            raise ValueError(f"unknown role group {group!r}: allowed are {', '.join(PLACEMENT_GROUPS)}")
        handle = RayHandle(self, name, (cls, args, dict(resources or {})))
        handle.group = group
        self._handles.append(handle)
        if self._placement.groups:  # a role replaced after the launch takes the old one's bundle
            self._create(handle)
        return handle

    def launch(self) -> None:
        """Places every role registered so far, or stops with what they ask for and what the cluster has."""
        self._launch()

    def restart(self, handle: RayHandle) -> RayHandle:
        """A fresh actor in place of `handle` (same name and constructor arguments, new process). A
        rollout worker's group is replaced too (`Placement.renew_rollout_group`)."""
        self.kill(handle)
        self._handles.remove(handle)
        self._placement.renew_rollout_group(handle.name, handle.spec[2])
        cls, args, options = handle.spec
        return self.start(handle.name, cls, *args, resources=options, group=handle.group)

    def _create(self, handle: RayHandle) -> None:
        cls, args, options = handle.spec
        slot = self._core_slots.get(handle.name)
        if slot is not None:
            cls = confined_class(cls, slot, self.config.role_cores)
        options = {**options, **self._placement.scheduling(handle.name)}
        actor = self.ray.remote(**options)(cls).remote(*args) if options else self.ray.remote(cls).remote(*args)
        self._names[actor._actor_id.hex()] = handle.name
        handle._actor = actor
        self._ready.pop(handle.name, None)

    def _remember_call(self, ref, what: str) -> None:
        self._calls[ref.hex()] = what
        while len(self._calls) > 4096:  # calls whose results nobody fetches (fire and forget)
            self._calls.popitem(last=False)

    def is_ready(self, handle: RayHandle) -> bool:
        """Whether the role's actor is up (placed, constructed), without waiting; an actor that died
        while starting raises RoleDiedError."""
        probe = self._ready.get(handle.name)
        if probe is None:
            probe = self._ready[handle.name] = handle.actor.__ray_ready__.remote()
            self._remember_call(probe, f"{handle.name} to start")
        done, _ = self.ray.wait([probe], timeout=0)
        if not done:
            return False
        self.get(probe)
        return True

    def wait_ready(self, handle: RayHandle) -> None:
        """Waits (as `get` waits: a stop request or backend.wait_timeout_seconds ends it) until the role is up."""
        while not self.is_ready(handle):
            self.get(self._ready[handle.name])

    def cpus(self) -> float:
        """CPUs of the cluster's live nodes (of the local instance's machine before it starts)."""
        if not self.ray.is_initialized():
            return float(os.cpu_count() or 1)
        return float(self.ray.cluster_resources().get("CPU", 0.0))

    def placement(self) -> dict[str, str]:
        """Role name -> the id of the node its bundle was placed on (after `launch`)."""
        return self._placement.where()

    def _launch(self) -> None:
        """Starts the local Ray instance (if none is up) and creates every pending actor."""
        if self._closed:
            raise MooziError("the Ray backend was shut down")
        if not self.ray.is_initialized():
            self._init_local()
        pending = [h for h in self._handles if h._actor is None]
        if not self._placement.groups and pending:
            self._placement.reserve(pending, self.interrupt)
            if self.config.role_cores != "off":  # off (the default): no placement lookup, no slots
                where = self._placement.where()
                self._core_slots = slots([(h.name, where.get(h.name), whole_cpus(h.spec[2])) for h in self._handles])
        for handle in pending:
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
            # A new instance of this run's own, even where `ray start` left a cluster running on this
            # machine: a bare ray.init() would join that cluster, or refuse when it finds several.
            address="local",
            num_cpus=max(os.cpu_count() or 1, math.ceil(cpus - 1e-9)),
            include_dashboard=config.include_dashboard,
            dashboard_host=config.bind_host,
            log_to_driver=False,
            configure_logging=False,
        )
        host = config.bind_host
        if is_loopback(host):
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

        refs = futures if isinstance(futures, list) else [futures]
        self._wait(refs, every=True)
        for ref in refs:
            self._calls.pop(ref.hex(), None)
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

    def get_first(self, futures: list) -> tuple[int, Any]:
        """(index, value) of the first of `futures` to finish, the lowest index among those finished;
        it waits, and raises a role's error, as `get` does."""
        check_nonempty(futures)
        distinct = self._wait(futures, every=False)
        ready, _ = self.ray.wait(distinct, num_returns=len(distinct), timeout=0)
        finished = {ref.hex() for ref in ready}
        index = next(i for i, ref in enumerate(futures) if ref.hex() in finished)
        return index, self.get(futures[index])

    def _wait(self, refs: list, every: bool) -> list:
        """Waits until every one (or one) of `refs` is finished; a stop request or
        `backend.wait_timeout_seconds` ends the wait. Returns the distinct refs."""
        distinct = list({id(r): r for r in refs}.values())
        enough = len(distinct) if every else 1
        # The limit is read at every poll, not fixed at the start: a wait already in flight when the
        # limit is lowered (the hung-worker test lowers it mid-run) ends at the new limit, not the old.
        started = time.monotonic()
        while distinct:
            ready, pending = self.ray.wait(distinct, num_returns=enough, timeout=POLL_SECONDS)
            if len(ready) >= enough:
                return distinct
            waiting_for = lambda: ", ".join(self._calls.get(r.hex(), "a role") for r in pending)  # noqa: E731
            check_interrupt(self.interrupt, waiting_for)
            if time.monotonic() - started >= self.config.wait_timeout_seconds:
                raise MooziError(
                    f"waited {self.config.wait_timeout_seconds:g} s for {waiting_for()} on the Ray cluster without an "
                    "answer (a node may be overloaded or unreachable; `ray status` shows the cluster); raise "
                    "backend.wait_timeout_seconds if such calls are this slow; the last checkpoint is intact, continue with --resume")
        return distinct

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
                self._placement.remove()
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


