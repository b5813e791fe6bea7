"""Which cores each Ray role runs on (moozi/training/backends/ray_cores.py): the slots the driver
hands out, the cores a role picks from its node's list, and, on a real local Ray instance, the
affinity of every thread of each role's process after it has run a JAX computation."""

from __future__ import annotations

import os

import pytest

from moozi.training.backends.ray_cores import CoreSlot, chosen_cores, slots, whole_cpus


def test_whole_cpus_count_only_whole_ones():
    assert [whole_cpus({"num_cpus": c}) for c in (0.5, 1.0, 1.5, 2.0, 0.0)] == [0, 1, 1, 2, 0]
    assert whole_cpus({}) == 1  # Ray's default for an actor's placement


def test_slots_are_disjoint_per_node_in_start_order_and_fractions_get_none():
    roles = [("parameter_optimizer", "a", 1), ("replay_buffer", "a", 0), ("training_rollout_worker_0", "a", 1),
             ("training_rollout_worker_1", "b", 2), ("testing_rollout_worker", "a", 0), ("training_rollout_worker_2", "b", 1)]
    assert slots(roles) == {
        "parameter_optimizer": CoreSlot(0, 1, 2), "training_rollout_worker_0": CoreSlot(1, 1, 2),
        "training_rollout_worker_1": CoreSlot(0, 2, 3), "training_rollout_worker_2": CoreSlot(2, 1, 3)}


def test_auto_confines_only_a_node_the_roles_fill():
    two = [0, 1]
    assert chosen_cores(CoreSlot(0, 1, 2), "auto", two) == {0}
    assert chosen_cores(CoreSlot(1, 1, 2), "auto", two) == {1}
    sixteen = list(range(16))
    assert chosen_cores(CoreSlot(1, 1, 2), "auto", sixteen) is None  # cores to spare: the pool may spread
    assert chosen_cores(CoreSlot(1, 1, 2), "on", sixteen) == {1}
    assert chosen_cores(CoreSlot(0, 1, 2), "off", two) is None


def test_more_slots_than_cores_wrap_and_a_role_never_gets_a_core_twice():
    cores = [4, 7]  # the node's list as the process sees it (a cgroup or taskset may leave gaps)
    assert chosen_cores(CoreSlot(2, 1, 3), "auto", cores) == {4}
    assert chosen_cores(CoreSlot(1, 3, 4), "on", cores) == {4, 7}


class _Probe:
    """A role that computes with JAX, then says which cores each of its process's threads may use."""

    def __init__(self, *_):
        import jax.numpy as jnp

        self.sum = float((jnp.ones((256, 256)) @ jnp.ones((256, 256))).sum())  # XLA's pool exists now

    def cores(self) -> list[list[int]]:
        out = []
        for tid in os.listdir("/proc/self/task"):
            try:
                out.append(sorted(os.sched_getaffinity(int(tid))))
            except OSError:
                pass
        return out


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs a platform that confines processes to cores, and two cores")
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_each_whole_cpu_role_runs_on_cores_of_its_own(mode):
    import dataclasses

    pytest.importorskip("ray")
    from moozi.config import build_config
    from moozi.training.backends import RayBackend

    mine = sorted(os.sched_getaffinity(0))
    config = dataclasses.replace(build_config("tic_tac_toe").backend, role_cores=mode)
    backend = RayBackend(config)
    try:
        # As many one-CPU roles as this process has cores, so "auto" confines (the roles fill the node).
        whole = [backend.start(f"worker_{i}", _Probe, resources={"num_cpus": 1.0}) for i in range(len(mine))]
        fraction = backend.start("replay", _Probe, resources={"num_cpus": 0.5})
        backend.launch()
        seen = backend.get([h.call(_Probe.cores) for h in [*whole, fraction]])
    finally:
        backend.shutdown()
    node = sorted(set().union(*(set(c) for threads in seen for c in threads)))
    for threads in seen[-1:]:  # the fractional role keeps every core
        assert all(set(c) == set(node) for c in threads)
    if mode == "off":
        assert all(len(set(map(tuple, threads))) == 1 and len(threads[0]) == len(node) for threads in seen)
        return
    # Every thread of a whole-CPU role (XLA's pool among them) on that role's one core; the roles' cores disjoint.
    per_role = [set(map(tuple, threads)) for threads in seen[:-1]]
    assert all(len(kinds) == 1 and len(next(iter(kinds))) == 1 for kinds in per_role), per_role
    assert sorted(next(iter(kinds))[0] for kinds in per_role) == node
