"""A real multi-node Ray cluster on this machine, as a user starts one: `ray start --head`, then
`ray start --address` for each worker node, every node with its own temp dir and loopback only.

Worker nodes run `ray start --block` in a session of their own, so `kill_node` can take a whole node
down at once (its raylet, its agents and every actor process on it), as a crashed machine would.
The head's health checks are tightened (Ray reads `RAY_<setting>` from the environment) so that a
dead node is declared dead within seconds rather than the default half minute, while a slow one is not. `cores` pins a
node's processes, and so its actors, to some of this machine's cores (`taskset`), so that two
nodes on one machine do not share its cores as two machines would not."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import uuid


def ray_available() -> bool:
    return shutil.which("ray") is not None


def _pinned(cores: str | None) -> list[str]:
    return ["taskset", "-c", cores] if cores else []


class LocalCluster:
    def __init__(self, port: int, tmp_dir, cpus_per_node: int):
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.tmp_dir = tmp_dir
        self.cpus = cpus_per_node
        # Token authentication on, with a token of the cluster's own (every node and driver share it).
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN": uuid.uuid4().hex,
                    # A killed node refuses the checks at once, so 5 failed checks 1 s apart declare it dead
                    # in ~5 s; a live node answers within 10 s even on an overloaded core (a 1 s timeout
                    # made the GCS declare a returning node dead while it started three JAX workers).
                    "RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
                    "RAY_health_check_timeout_ms": "10000", "RAY_health_check_failure_threshold": "5"}
        for key in ("RAY_AUTH_TOKEN_PATH", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS"):
            self.env.pop(key, None)  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 would refuse a second node
        self.workers: list[subprocess.Popen] = []
        self.nodes = 0  # live nodes, as this helper started and killed them

    def _ray(self, *args, timeout=120, cores: str | None = None):
        return subprocess.run([*_pinned(cores), shutil.which("ray"), *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env)

    def start_head(self, cores: str | None = None) -> None:
        head = self._ray("start", "--head", "--port", str(self.port), "--num-cpus", str(self.cpus),
                         "--node-ip-address", "127.0.0.1", "--include-dashboard", "false",
                         "--temp-dir", str(self.tmp_dir / "head"), cores=cores)
        if head.returncode != 0:
            raise RuntimeError(f"ray start --head failed: {head.stderr[-500:]}")
        self.nodes = 1

    def add_node(self, name: str, cores: str | None = None, attempts: int = 3) -> subprocess.Popen:
        """A worker node (blocking `ray start` in its own session); returns once the head counts it.
        Its output goes to `<tmp_dir>/<name>.log`, quoted in the error if it never joins. A `ray start`
        that gives up is started again (up to `attempts` times): Ray waits a fixed 30 s for a new
        raylet to register with the GCS, and on two vCPUs busy with a run and another xdist worker
        that was not always enough ("The current node timed out during startup"; seen once in CI)."""
        log_path = self.tmp_dir / f"{name}.log"
        for attempt in range(1, attempts + 1):
            with open(log_path, "a") as log:
                log.write(f"--- attempt {attempt}\n")
                log.flush()
                proc = subprocess.Popen(
                    [*_pinned(cores), shutil.which("ray"), "start", "--address", self.address, "--num-cpus", str(self.cpus),
                     "--node-ip-address", "127.0.0.1", "--temp-dir", str(self.tmp_dir / name), "--block"],
                    stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
            try:
                self.wait_for_nodes(self.nodes + 1, node=proc)
            except RuntimeError as e:
                exited = proc.poll() is not None
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # whatever the failed start left running
                except ProcessLookupError:
                    pass
                proc.wait(timeout=30)
                if exited and attempt < attempts:
                    continue
                tail = log_path.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"{e}; node {name!r} (`ray start`, attempt {attempt}) said:\n{tail}") from None
            self.workers.append(proc)
            self.nodes += 1
            return proc
        raise AssertionError("unreachable")

    def alive_nodes(self) -> int:
        status = self._ray("status", "--address", self.address, timeout=60).stdout
        active = status.split("Active:", 1)[-1].split("Pending:", 1)[0]
        return len(re.findall(r"^\s*1 node_", active, flags=re.M))

    def wait_for_nodes(self, count: int, timeout: float = 180.0, node: subprocess.Popen | None = None) -> None:
        # A node whose `ray start` exits fails at once (add_node retries it) rather than after the
        # whole wait: in the full suite on 2 vCPUs one gave up after Ray's 30 s and the test waited
        # out its 90 s before saying nothing about why. Alone a node joins within seconds.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node is not None and node.poll() is not None:
                raise RuntimeError(f"`ray start` of a worker node exited with {node.returncode} before the cluster reached {count} live nodes")
            if self.alive_nodes() == count:
                return
            time.sleep(2.5)  # each `ray status` is a Python process importing Ray: ~1 CPU-second
        raise RuntimeError(f"the cluster did not reach {count} live nodes in {timeout:g} s")

    def kill_node(self, proc: subprocess.Popen) -> None:
        """SIGKILL to every process of the node: no chance to clean up, as when a machine dies."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        self.nodes -= 1

    def stop(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._ray("stop", "--force")
