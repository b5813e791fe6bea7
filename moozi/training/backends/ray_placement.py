"""Where the Ray backend's roles run: placement groups, reserved before any actor starts.

Placement (a cluster or the local instance): every role's resources are
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

Also here: the check that a cluster's address answers before Ray is asked to
join it (`check_reachable`), and whether a host is loopback (`is_loopback`).
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

from moozi.config import BackendConfig
from moozi.errors import MooziError
from moozi.training.backends.inline import POLL_SECONDS, check_interrupt

PLACEMENT_GROUPS = ("learner", "rollout")


class Placement:
    """The run's placement groups on the Ray cluster (`ray`, the module) and each role's bundle in them.
    Roles are RayHandles: their `name`, `group` and `spec[2]` (their `ray.remote` resources)."""

    def __init__(self, ray, config: BackendConfig):
        self.ray = ray
        self.config = config
        self.groups: dict[str, Any] = {}  # "learner" / "rollout:NAME" -> its placement group (`reserve`)
        self.bundle_of: dict[str, tuple[str, int]] = {}  # role name -> (group, bundle index)

    def reserve(self, handles: list, interrupt) -> None:
        """The roles' placement groups (all or nothing): either the cluster places them all within
        `backend.placement_timeout_seconds`, or nothing starts and the message says what was asked for.
        A stop request (`interrupt`, as the backend's waits poll it) ends the wait.

        The learner's group is one STRICT_PACK group. Each rollout worker gets a one-bundle group of
        its own, aimed (a soft target) at the node that `backend.placement_strategy` picks for it:
        one group for all of them would spread them as well, but when a node dies Ray keeps
        rescheduling that group's lost bundles, which holds the GCS at a full core until the node is
        back (measured: 98% CPU, and the learner beside it at a third of its updates/s); a lost
        worker's own group is removed instead (`renew_rollout_group`), and its replacement waits in a new one."""
        from ray.util.placement_group import placement_group, placement_group_table

        wanted: dict[str, list] = {group: [] for group in PLACEMENT_GROUPS}
        for handle in handles:
            bundle = _bundle(handle.spec[2])
            if bundle:  # a role that asks for nothing needs no reservation
                wanted[handle.group].append((handle.name, bundle))
        if not self._could_ever_fit(wanted):  # no need to wait for resources that do not exist
            raise MooziError(self._refusal(wanted, [], waited=False))
        deadline = time.monotonic() + self.config.placement_timeout_seconds
        groups: dict[str, Any] = {}
        placed: list[dict] = []  # bundles reserved so far (free again once a refusal removes them)

        def wait_all(keys_and_bundles) -> None:
            for key, bundles in keys_and_bundles:
                while not groups[key].wait(timeout_seconds=max(min(POLL_SECONDS, deadline - time.monotonic()), 0.01)):
                    check_interrupt(interrupt, lambda: "the cluster to place the roles")
                    if time.monotonic() >= deadline:
                        raise MooziError(self._refusal(wanted, placed))
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
        self.groups = groups
        for index, (name, _) in enumerate(wanted["learner"]):
            self.bundle_of[name] = ("learner", index)
        for name, _ in wanted["rollout"]:
            self.bundle_of[name] = (f"rollout:{name}", 0)

    def scheduling(self, name: str) -> dict:
        """The `ray.remote` options that put role `name`'s actor in its bundle ({} if it has none)."""
        if name not in self.bundle_of:
            return {}
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        group, index = self.bundle_of[name]
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=self.groups[group], placement_group_bundle_index=index)}

    def renew_rollout_group(self, name: str, options: dict) -> None:
        """A restarted rollout worker's new group, in place of its old one: that bundle may have been on
        a lost node, and Ray would keep rescheduling it (see `reserve`); the new group waits, placed when
        a node has room. Roles of the learner's group keep their bundle."""
        key = self.bundle_of.get(name, ("", 0))[0]
        if key.startswith("rollout:"):
            from ray.util.placement_group import placement_group

            self._remove_groups([self.groups[key]])
            self.groups[key] = placement_group([_bundle(options)], strategy="STRICT_PACK", name=f"moozi-{name}")

    def where(self) -> dict[str, str]:
        """Role name -> the id of the node its bundle was placed on (after `reserve`)."""
        from ray.util.placement_group import placement_group_table

        where = {}
        for name, (group, index) in self.bundle_of.items():
            nodes = placement_group_table(self.groups[group]).get("bundles_to_node_id", {})
            if index in nodes:
                where[name] = nodes[index]
        return where

    def remove(self) -> None:
        """Removes every group (the actors in them are gone or going)."""
        if self.groups:
            self._remove_groups(self.groups.values())
            self.groups = {}

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

    def _refusal(self, wanted: dict[str, list], placed: list[dict], waited: bool = True) -> str:
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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_reachable(address: str, timeout: float = 5.0) -> str | None:
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
