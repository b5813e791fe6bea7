"""Where roles live: in this process (`inline`) or as Ray actors (`ray`).

The driver talks to every role through `RoleHandle.call(method, *args)`,
which returns a future, and `Backend.get(futures)` (or `get_first`: the first
of several to finish, for a queue of calls). Inline calls run at once;
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
* Placement (a cluster or the local instance): every role's resources are
  reserved before any actor starts, all or nothing, in two placement groups.
  The learner group (parameter optimizer, replay buffer, testing worker) is
  STRICT_PACK on one node, the driver's when it has room: they exchange the
  largest data every iteration, and a run cannot outlive its driver's node
  anyway, so losing any other node never takes the learner. The rollout
  group (training and reanalyze workers) follows `backend.placement_strategy`
  (SPREAD by default: one worker per node where it can, so rollouts scale
  out). Placement that does not succeed within
  `backend.placement_timeout_seconds` stops the run with what each role
  asks for and what the cluster has free; nothing was started.
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
import concurrent.futures
import ipaddress
import logging
import math
import os
import time
from typing import Any

from moozi.config import BackendConfig
from moozi.errors import MooziError


class RoleDiedError(MooziError):
    """A role's process died; the message names the role (also in `.role`)."""

    def __init__(self, role: str, message: str):
        super().__init__(message)
        self.role = role


class WaitInterrupted(MooziError):
    """A wait on the roles given up because the run was asked to stop (`reason`): the calls in
    flight are dropped, the last checkpoint stays the run's last."""

    def __init__(self, reason: str, waiting_for: str):
        super().__init__(f"stopped ({reason}) while waiting for {waiting_for}")
        self.reason = reason
        self.waiting_for = waiting_for


POLL_SECONDS = 0.5  # how often a wait looks at the stop request


def _check_interrupt(interrupt, waiting_for) -> None:
    reason = interrupt() if interrupt is not None else None
    if reason is not None:
        raise WaitInterrupted(reason, waiting_for())


def _check_nonempty(futures: list) -> None:
    if not futures:
        raise ValueError("get_first needs at least one future")


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
        future = self._executor.submit(lambda: getattr(self.obj, method)(*map(_value, args)))
        future.moozi_call = f"{self.name}.{method}"
        return future

    def drain(self) -> None:
        """Waits for the call in progress and drops the queued ones (before the role is closed)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)


class InlineBackend:
    kind = "inline"

    def __init__(self, threaded: bool = True):
        self.threaded = threaded
        self.interrupt = None  # () -> a stop reason or None: set by the driver, polled by `get`

    def start(self, name: str, cls, *args, resources: dict | None = None, group: str = "learner") -> InlineHandle:
        return InlineHandle(name, cls(*args), (cls, args, resources), self.threaded)

    def cpus(self) -> float:
        """CPUs the roles can use: this machine's."""
        return float(os.cpu_count() or 1)

    def is_ready(self, handle) -> bool:
        return True

    def wait_ready(self, handle) -> None:
        pass

    def restart(self, handle: InlineHandle) -> InlineHandle:
        """A fresh instance of the role in place of `handle` (same name, same constructor arguments)."""
        handle.drain()
        close = getattr(handle.obj, "close", None)
        if close:
            close()
        cls, args, resources = handle.spec
        return self.start(handle.name, cls, *args, resources=resources)

    def get(self, futures):
        self._wait(futures if isinstance(futures, list) else [futures], every=True)
        if isinstance(futures, list):
            return [_value(f) for f in futures]
        return _value(futures)

    def get_first(self, futures: list) -> tuple[int, Any]:
        """(index, value) of the first of `futures` to finish, the lowest index among those finished;
        it waits as `get` waits. A `_Done` or plain value is finished at once."""
        _check_nonempty(futures)
        self._wait(futures, every=False)
        index = next(i for i, f in enumerate(futures) if not isinstance(f, concurrent.futures.Future) or f.done())
        return index, _value(futures[index])

    def _wait(self, futures: list, every: bool) -> None:
        """Waits until every one (or one) of `futures` is finished, giving up on a stop request."""
        pending = {f for f in futures if isinstance(f, concurrent.futures.Future)}
        if not every and not all(isinstance(f, concurrent.futures.Future) for f in futures):
            return  # a value (or an unthreaded call's result) is finished at once
        return_when = concurrent.futures.ALL_COMPLETED if every else concurrent.futures.FIRST_COMPLETED
        while pending:
            done, pending = concurrent.futures.wait(pending, timeout=POLL_SECONDS, return_when=return_when)
            if done and not every:
                return
            if pending:
                _check_interrupt(self.interrupt, lambda: ", ".join(getattr(f, "moozi_call", "a role") for f in pending))

    def put(self, value):
        return value

    def resolve_arg(self, future):
        """What to pass to another role's call: the future itself, waited for on that role's thread."""
        return future

    def kill(self, handle) -> None:
        pass

    def launch(self) -> None:
        pass  # inline roles exist as soon as they are started

    def shutdown(self) -> None:
        pass


class RayHandle:
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

    def call(self, method: str, *args):
        ref = getattr(self.actor, method).remote(*args)
        self._backend._remember_call(ref, f"{self.name}.{method}")
        return ref


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
        self._groups: dict[str, Any] = {}  # "learner" / "rollout" -> its placement group (`_reserve`)
        self._bundle_of: dict[str, tuple[str, int]] = {}  # role name -> (group, bundle index)
        # object ref's id -> "role.method" (the id, not the ref: holding a ref would keep its object alive)
        self._calls: collections.OrderedDict = collections.OrderedDict()
        self._ready: dict[str, Any] = {}  # role name -> its readiness probe (`is_ready`)
        self.interrupt = None  # () -> a stop reason or None: set by the driver, polled by `get`
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
    def start(self, name: str, cls, *args, resources: dict | None = None, group: str = "learner") -> RayHandle:
        """Registers a role of `group` ("learner": with the learner on one node; "rollout": spread by
        `backend.placement_strategy`); its actor is created with every other role's at `launch()` (or at
        the first call to any role), once the cluster has reserved all their resources."""
        if group not in PLACEMENT_GROUPS:
            raise ValueError(f"unknown role group {group!r}: allowed are {', '.join(PLACEMENT_GROUPS)}")
        handle = RayHandle(self, name, (cls, args, dict(resources or {})))
        handle.group = group
        self._handles.append(handle)
        if self._groups:  # a role replaced after the launch takes the old one's bundle
            self._create(handle)
        return handle

    def launch(self) -> None:
        """Places every role registered so far, or stops with what they ask for and what the cluster has."""
        self._launch()

    def restart(self, handle: RayHandle) -> RayHandle:
        """A fresh actor in place of `handle` (same name and constructor arguments, new process). A
        rollout worker's group is replaced too: its bundle may have been on a lost node, and Ray would
        keep rescheduling it (see `_reserve`); the new group waits, placed when a node has room."""
        self.kill(handle)
        self._handles.remove(handle)
        key = self._bundle_of.get(handle.name, ("", 0))[0]
        if key.startswith("rollout:"):
            from ray.util.placement_group import placement_group

            self._remove_groups([self._groups[key]])
            self._groups[key] = placement_group([_bundle(handle.spec[2])], strategy="STRICT_PACK", name=f"moozi-{handle.name}")
        cls, args, options = handle.spec
        return self.start(handle.name, cls, *args, resources=options, group=handle.group)

    def _create(self, handle: RayHandle) -> None:
        cls, args, options = handle.spec
        options = dict(options)
        if handle.name in self._bundle_of:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            group, index = self._bundle_of[handle.name]
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=self._groups[group], placement_group_bundle_index=index)
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
        from ray.util.placement_group import placement_group_table

        where = {}
        for name, (group, index) in self._bundle_of.items():
            nodes = placement_group_table(self._groups[group]).get("bundles_to_node_id", {})
            if index in nodes:
                where[name] = nodes[index]
        return where

    def _launch(self) -> None:
        """Starts the local Ray instance (if none is up) and creates every pending actor."""
        if self._closed:
            raise MooziError("the Ray backend was shut down")
        if not self.ray.is_initialized():
            self._init_local()
        pending = [h for h in self._handles if h._actor is None]
        if not self._groups and pending:
            self._reserve(pending)
        for handle in pending:
            self._create(handle)

    def _reserve(self, handles: list[RayHandle]) -> None:
        """The roles' placement groups (all or nothing): either the cluster places them all within
        `backend.placement_timeout_seconds`, or nothing starts and the message says what was asked for.

        The learner's group is one STRICT_PACK group. Each rollout worker gets a one-bundle group of
        its own, aimed (a soft target) at the node that `backend.placement_strategy` picks for it:
        one group for all of them would spread them as well, but when a node dies Ray keeps
        rescheduling that group's lost bundles, which holds the GCS at a full core until the node is
        back (measured: 98% CPU, and the learner beside it at a third of its updates/s); a lost
        worker's own group is removed instead (`restart`), and its replacement waits in a new one."""
        from ray.util.placement_group import placement_group, placement_group_table

        wanted: dict[str, list] = {group: [] for group in PLACEMENT_GROUPS}
        for handle in handles:
            bundle = _bundle(handle.spec[2])
            if bundle:  # a role that asks for nothing needs no reservation
                wanted[handle.group].append((handle.name, bundle))
        if not self._could_ever_fit(wanted):  # no need to wait for resources that do not exist
            raise MooziError(self._placement_refusal(wanted, [], waited=False))
        deadline = time.monotonic() + self.config.placement_timeout_seconds
        groups: dict[str, Any] = {}
        placed: list[dict] = []  # bundles reserved so far (free again once a refusal removes them)

        def wait_all(keys_and_bundles) -> None:
            for key, bundles in keys_and_bundles:
                while not groups[key].wait(timeout_seconds=max(min(POLL_SECONDS, deadline - time.monotonic()), 0.01)):
                    _check_interrupt(self.interrupt, lambda: "the cluster to place the roles")
                    if time.monotonic() >= deadline:
                        raise MooziError(self._placement_refusal(wanted, placed))
                placed.extend(bundles)

        try:
            learner_node = None
            if wanted["learner"]:  # one node, the driver's if it has room (soft)
                bundles = [b for _, b in wanted["learner"]]
                groups["learner"] = placement_group(bundles, strategy="STRICT_PACK", name="moozi-learner",
                                                    _soft_target_node_id=self.ray.get_runtime_context().get_node_id())
                wait_all([("learner", bundles)])
                learner_node = placement_group_table(groups["learner"])["bundles_to_node_id"][0]
            targets = self._rollout_targets([b for _, b in wanted["rollout"]], learner_node, _sum_bundles(placed))
            for (name, bundle), target in zip(wanted["rollout"], targets):
                options = {"_soft_target_node_id": target} if target else {}
                groups[f"rollout:{name}"] = placement_group([bundle], strategy="STRICT_PACK", name=f"moozi-{name}", **options)
            wait_all([(f"rollout:{name}", [bundle]) for name, bundle in wanted["rollout"]])
        except BaseException:
            self._remove_groups(groups.values())
            raise
        self._groups = groups
        for index, (name, _) in enumerate(wanted["learner"]):
            self._bundle_of[name] = ("learner", index)
        for name, _ in wanted["rollout"]:
            self._bundle_of[name] = (f"rollout:{name}", 0)

    def _rollout_targets(self, bundles: list[dict], learner_node: str | None, learner: dict) -> list[str | None]:
        """A node for each rollout bundle, by `backend.placement_strategy` over the live nodes' CPUs
        (less the learner's group on its node): SPREAD gives each next bundle to the node with the
        most CPUs left, PACK to the one with the fewest that still holds it (the learner's first).
        Only hints: Ray places a bundle elsewhere when its target has no room after all."""
        left = {n["NodeID"]: n.get("Resources", {}).get("CPU", 0.0) for n in self.ray.nodes() if n.get("Alive")}
        if learner_node in left:
            left[learner_node] -= learner.get("CPU", 0.0)
        targets = []
        for bundle in bundles:
            need = bundle.get("CPU", 0.0)
            fits = [node for node, cpus in left.items() if cpus + 1e-9 >= need]
            if not fits:
                targets.append(None)
                continue
            if self.config.placement_strategy == "SPREAD":
                node = max(fits, key=lambda n: left[n])
            else:
                node = min(fits, key=lambda n: (n != learner_node, left[n]))
            left[node] -= need
            targets.append(node)
        return targets

    def _remove_groups(self, groups) -> None:
        from ray.util.placement_group import remove_placement_group

        for group in groups:
            remove_placement_group(group)

    def _could_ever_fit(self, wanted: dict[str, list]) -> bool:
        """Whether the live nodes' total resources (free or not) could hold the roles at all: the
        learner group on one node, and every role somewhere (a bin-packing bound, not a proof)."""
        capacities = [n.get("Resources", {}) for n in self.ray.nodes() if n.get("Alive")]
        learner = _sum_bundles(b for _, b in wanted["learner"])
        every = _sum_bundles(b for roles in wanted.values() for _, b in roles)
        if learner and not any(all(node.get(k, 0.0) + 1e-9 >= v for k, v in learner.items()) for node in capacities):
            return False
        return all(sum(node.get(k, 0.0) for node in capacities) + 1e-9 >= v for k, v in every.items())

    def _placement_refusal(self, wanted: dict[str, list], placed: list[dict], waited: bool = True) -> str:
        """The refusal: each role's request, the cluster's free resources (counting those that this
        run's groups placed so far as free: they are released with the refusal), what to change."""
        total = _sum_bundles(b for roles in wanted.values() for _, b in roles)
        learner = _sum_bundles(b for _, b in wanted["learner"])
        free = _sum_bundles([self.ray.available_resources(), *placed])
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        largest = max((n.get("Resources", {}).get("CPU", 0.0) for n in nodes), default=0.0)
        where = f"the Ray cluster at {self.config.ray_address}" if self.config.ray_address else "the local Ray instance"
        why = (f"not placed within {self.config.placement_timeout_seconds:g} s" if waited
               else "more than its nodes have, free or not")
        lines = [f"{where} cannot place the run's roles: nothing was started ({why}). Each role asks for:"]
        lines += [f"  {name}: {_describe(bundle)}" for roles in wanted.values() for name, bundle in roles]
        lines.append(f"  in all: {_describe(total)}; the learner's group ({', '.join(n for n, _ in wanted['learner'])}) "
                     f"on one node: {_describe(learner)}; the rollout workers {self.config.placement_strategy}")
        lines.append(f"The cluster has free: {_describe({k: free.get(k, 0.0) for k in ('CPU', 'GPU', 'memory')})} on "
                     f"{len(nodes)} node(s), the largest with {largest:g} CPU.")
        lines.append("Change: backend.rollout_worker_cpus, backend.learner_cpus, backend.replay_cpus, replay.capacity, "
                     "backend.learner_gpus, backend.rollout_worker_gpus or train.num_training_workers "
                     "(--set key=value), or add nodes to the cluster.")
        return "\n".join(lines)

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
        _check_nonempty(futures)
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
            _check_interrupt(self.interrupt, waiting_for)
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
                if self._groups:
                    self._remove_groups(self._groups.values())
                    self._groups = {}
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


PLACEMENT_GROUPS = ("learner", "rollout")


def _sum_bundles(bundles) -> dict[str, float]:
    total: dict[str, float] = {}
    for bundle in bundles:
        for key, value in bundle.items():
            total[key] = total.get(key, 0.0) + value
    return total


def _bundle(options: dict) -> dict[str, float]:
    """A role's `ray.remote` resources as a placement-group bundle (zero entries dropped)."""
    bundle = {"CPU": float(options.get("num_cpus", 1.0)), "GPU": float(options.get("num_gpus", 0.0)),
              "memory": float(options.get("memory", 0.0))}
    return {k: v for k, v in bundle.items() if v > 0}


def _describe(resources: dict[str, float]) -> str:
    parts = [f"{resources.get(k, 0.0):g} {k}" for k in ("CPU", "GPU") if k == "CPU" or resources.get(k, 0.0)]
    memory = resources.get("memory", 0.0)
    if memory:
        parts.append(f"{memory / 2**30:.1f} GiB memory" if memory >= 2**30 else f"{memory / 2**20:.1f} MiB memory")
    return ", ".join(parts)


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
