"""Real multi-node Ray clusters on this machine (`ray start`: a head and worker nodes, loopback only,
each node its own temp dir; tests/helpers/ray_cluster.py), driven through `moozi train --ray-address`
as a user would:

* a cluster too small for the run's roles (1 CPU per node) is refused within 30 s, with what each
  role asks for and what the cluster has, and nothing starts;
* on a cluster with room (3 CPUs per node), `train.num_training_workers=auto` puts rollout workers on
  both nodes; SIGKILL to the worker node mid-run: the run goes on with the workers it has left, a
  node that comes back gets replacements, and the run ends with its checkpoint whole.
"""

import json
import re
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

pytest.importorskip("ray")
# One Ray instance at a time on this machine (pyproject.toml, addopts).
pytestmark = pytest.mark.xdist_group("ray")

from moozi.runs.checkpoint import latest_checkpoint  # noqa: E402
from moozi.runs.metrics_log import read_metrics  # noqa: E402
from tests.helpers.ray_cluster import LocalCluster, ray_available  # noqa: E402


@pytest.fixture
def cluster_factory(tmp_path):
    if not ray_available():
        pytest.skip("the ray command is not on PATH")
    clusters = []

    def make(port: int, cpus_per_node: int) -> LocalCluster:
        # Ray's sockets live under each node's temp dir, and a socket path may not exceed 107 bytes.
        cluster = LocalCluster(port, pathlib.Path(tempfile.mkdtemp(prefix=f"mzray{port}-")), cpus_per_node)
        clusters.append(cluster)
        try:
            cluster.start_head()
        except RuntimeError as e:
            pytest.skip(str(e))
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
        shutil.rmtree(cluster.tmp_dir, ignore_errors=True)


def _train(cluster: LocalCluster, run_dir, *args, timeout=240) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "moozi.cli", "train", "tic_tac_toe", "--backend", "ray", "--ray-address",
         cluster.address, "--run-dir", str(run_dir), "--quiet", "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env)


@pytest.mark.slow
def test_a_cluster_too_small_for_the_roles_is_refused_within_30_seconds(cluster_factory, tmp_path):
    cluster = cluster_factory(6391, cpus_per_node=1)
    cluster.add_node("worker")
    started = time.monotonic()
    proc = _train(cluster, tmp_path / "run", "--max-minutes", "2")
    _, stderr = proc.communicate(timeout=120)
    seconds = time.monotonic() - started
    assert proc.returncode == 2, stderr[-2000:]
    assert f"the Ray cluster at {cluster.address} cannot place the run's roles: nothing was started" in stderr
    for role in ("parameter_optimizer: 1 CPU", "replay_buffer: 0.5 CPU", "training_rollout_worker_0: 1 CPU",
                 "testing_rollout_worker: 0.5 CPU", "in all: 3 CPU",
                 "the learner's group (parameter_optimizer, replay_buffer, testing_rollout_worker) on one node: 2 CPU"):
        assert role in stderr, stderr
    assert re.search(r"The cluster has free: 2 CPU, [\d.]+ [GM]iB memory on 2 node\(s\), the largest with 1 CPU\.", stderr)
    assert re.search(r"replay_buffer: 0\.5 CPU, [\d.]+ [GM]iB memory", stderr)  # its buffer, reserved with its CPUs
    assert "backend.rollout_worker_cpus" in stderr and "train.num_training_workers" in stderr
    assert seconds < 30, f"the refusal took {seconds:.0f} s"
    assert not (tmp_path / "run" / "checkpoints").exists() or not any((tmp_path / "run" / "checkpoints").iterdir())


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"the run ended while waiting for {what}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _updates(run_dir) -> int:
    rows = read_metrics(run_dir)
    return max((r["step"] for r in rows), default=0)


def _events(run_dir) -> list[dict]:
    return [r for r in read_metrics(run_dir) if r.get("role") == "event"]


@pytest.mark.slow
def test_rollout_workers_on_two_nodes_survive_the_loss_of_one(cluster_factory, tmp_path):
    cluster = cluster_factory(6392, cpus_per_node=3)
    worker_node = cluster.add_node("worker")
    run_dir = tmp_path / "run"
    # Bounds for a loaded machine with a cold compilation cache (a fresh clone's CI beside another test
    # worker); alone, on a warm cache, the whole test takes ~100 s.
    proc = _train(cluster, run_dir, "--max-minutes", "10", "--set", "train.num_training_workers=auto",
                  "--set", "train.checkpoint_every_minutes=0.25", "--set", "train.test_every_updates=0")
    try:
        placement = json.loads(_wait_for(lambda: (run_dir / "placement.json").exists()
                                          and (run_dir / "placement.json").read_text(), 120, "placement", proc))
        roles, nodes = placement["roles"], placement["nodes"]
        # 6 CPUs: the learner's group (2 CPUs) leaves room for 4 rollout workers, spread over both nodes.
        workers = sorted(r for r in roles if r.startswith("training_rollout_worker_"))
        assert len(workers) == 4 and len(nodes) == 2
        learner_node = roles["parameter_optimizer"]
        assert roles["replay_buffer"] == learner_node == roles["testing_rollout_worker"]
        remote = [r for r in workers if roles[r] != learner_node]
        assert remote, roles  # rollout workers on the node that is not the driver's

        _wait_for(lambda: _updates(run_dir) >= 50, 300, "50 updates", proc)
        cluster.kill_node(worker_node)
        updates_at_kill = _updates(run_dir)
        # The run goes on with the workers it has left...
        _wait_for(lambda: _updates(run_dir) >= updates_at_kill + 50, 120, "50 updates after the loss", proc)
        lost = [e for e in _events(run_dir) if "training_worker_lost" in e]
        assert sorted(f"training_rollout_worker_{e['training_worker_lost']}" for e in lost) == remote
        assert min(e["training_workers_alive"] for e in lost) == 4 - len(remote)
        # ... and a node that comes back gets the replacements.
        cluster.add_node("worker-again")
        _wait_for(lambda: sum("training_worker_back" in e for e in _events(run_dir)) == len(remote), 150,
                  "the replacements to join", proc)
        updates_back = _updates(run_dir)
        _wait_for(lambda: _updates(run_dir) >= updates_back + 20, 120, "updates with every worker back", proc)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stop_reason"] == "signal SIGTERM"
    for worker in remote:
        assert f"{worker} died (its process or its node was lost): the run goes on with" in stderr, stderr[-3000:]
    assert " is back: 4 of 4 training workers" in stderr, stderr[-3000:]
    # The checkpoint written on SIGTERM is whole and is the run's end.
    path = latest_checkpoint(run_dir)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["counters"]["updates"] == summary["updates"] >= updates_back + 20
    assert meta["counters"]["env_steps"] == summary["env_steps"]
