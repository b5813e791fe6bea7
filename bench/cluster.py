"""Scale-out and node loss on a real multi-node Ray cluster on this machine (issue 17).

    python bench/cluster.py [--nodes 1,2] [--cpus-per-node 4] [--minutes 3] [--pin]
                            [--game tic_tac_toe] [--kill-at SECONDS [--return-at SECONDS]]

For each node count, starts a cluster with `ray start` (a head, then worker nodes; loopback only,
tests/helpers/ray_cluster.py), runs `moozi train GAME --backend ray --ray-address ... --set
train.num_training_workers=auto` on it for --minutes, and reports env steps/s and updates/s over the
run's steady part (metrics rows after its first minute) and over the whole run. --pin gives node k
core k of this machine (and the driver the head's core), so one node is one core and two nodes are two,
as on two one-core machines; without it every node shares every core. --kill-at kills the last worker
node (SIGKILL to all of its processes) that many seconds after the command started, and --return-at
starts a node again: the report then gives the updates and env steps before and after, the workers
lost and back, and the checkpoints written.

The machine's float32 2048x2048 matmul speed is printed with the results: give it with every figure.
Prints a table, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.helpers.ray_cluster import LocalCluster  # noqa: E402


def _matmul_gflops() -> float:
    import jax
    import jax.numpy as jnp

    x = jnp.ones((2048, 2048), jnp.float32)
    f = jax.jit(lambda a: a @ a)
    f(x).block_until_ready()
    start, n = time.perf_counter(), 10
    for _ in range(n):
        f(x).block_until_ready()
    return 2 * 2048**3 * n / (time.perf_counter() - start) / 1e9


def _rates(rows: list[dict], after_seconds: float) -> dict:
    """env steps/s and updates/s between the first row after `after_seconds` and the last row."""
    train = [r for r in rows if r.get("role") is None and "env_steps" in r]
    steady = [r for r in train if r["time"] >= after_seconds] or train
    if len(steady) < 2:
        return {}
    first, last = steady[0], steady[-1]
    seconds = last["time"] - first["time"]
    return {"seconds": round(seconds, 1), "env_steps_per_s": round((last["env_steps"] - first["env_steps"]) / seconds, 1),
            "updates_per_s": round((last["step"] - first["step"]) / seconds, 2)}


def run(nodes: int, args, work: pathlib.Path) -> dict:
    from moozi.runs.metrics_log import read_metrics

    port = 6400 + nodes
    cluster = LocalCluster(port, pathlib.Path(tempfile.mkdtemp(prefix=f"mzb{port}-")), args.cpus_per_node)
    head_cpus = args.head_cpus or args.cpus_per_node
    core = (lambda k: str(k % (os.cpu_count() or 1))) if args.pin else (lambda k: None)
    run_dir = work / f"{nodes}-nodes"
    out: dict = {"nodes": nodes, "cpus_per_node": args.cpus_per_node, "pinned": args.pin}
    try:
        cluster.cpus = head_cpus
        cluster.start_head(cores=core(0))
        cluster.cpus = args.cpus_per_node
        node_procs = [cluster.add_node(f"node{k}", cores=core(k)) for k in range(1, nodes)]
        command = [sys.executable, "-m", "moozi.cli", "train", args.game, "--backend", "ray", "--ray-address",
                   cluster.address, "--run-dir", str(run_dir), "--max-minutes", str(args.minutes), "--json", "--quiet",
                   "--set", "train.num_training_workers=auto", "--set", "train.checkpoint_every_minutes=0.5",
                   *[x for kv in args.overrides for x in ("--set", kv)]]
        if args.pin:
            command = ["taskset", "-c", core(0), *command]
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env)
        events = []
        if args.kill_at is not None and node_procs:
            time.sleep(max(args.kill_at - (time.monotonic() - started), 0))
            rows = read_metrics(run_dir)
            events.append({"event": "node killed", "second": round(time.monotonic() - started, 1),
                           "updates": max((r["step"] for r in rows), default=0)})
            cluster.kill_node(node_procs[-1])
            if args.return_at is not None:
                time.sleep(max(args.return_at - (time.monotonic() - started), 0))
                cluster.add_node("node-back", cores=core(nodes - 1))
                events.append({"event": "node back", "second": round(time.monotonic() - started, 1)})
                time.sleep(20)
                out["ray_status_after_return"] = cluster._ray("status", "--address", cluster.address).stdout
        stdout, stderr = proc.communicate(timeout=60 * args.minutes + 600)
        out["seconds"] = round(time.monotonic() - started, 1)
        out["exit_code"] = proc.returncode
        out["stderr_tail"] = stderr.strip().splitlines()[-12:]
        (work / f"{nodes}-nodes.stderr").write_text(stderr)
        if proc.returncode != 0:
            out["events"] = events
            out["checkpoints"] = sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*"))
            if (run_dir / "placement.json").exists():
                out["placement"] = json.loads((run_dir / "placement.json").read_text())
            if args.resume_minutes and events:
                # The learner's node was lost: bring a node back and continue the run from its checkpoint.
                if cluster.nodes < nodes:
                    cluster.add_node("node-back", cores=core(nodes - 1))
                resumed = subprocess.run(
                    [*command[:command.index("--max-minutes")], "--max-minutes", str(args.resume_minutes),
                     "--resume", *command[command.index("--max-minutes") + 2:]],
                    capture_output=True, text=True, env=cluster.env, timeout=60 * args.resume_minutes + 600)
                out["resume"] = {"exit_code": resumed.returncode, "stderr_tail": resumed.stderr.strip().splitlines()[-5:]}
                if resumed.returncode == 0:
                    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
                    out["resume"].update({k: summary[k] for k in ("updates", "env_steps", "stop_reason")})
            return out
        summary = json.loads(stdout.strip().splitlines()[-1])
        placement = json.loads((run_dir / "placement.json").read_text())
        rows = read_metrics(run_dir)
        out.update({
            "workers": sum(r.startswith("training_rollout_worker_") for r in placement["roles"]),
            "nodes_used": len(placement["nodes"]),
            "updates": summary["updates"], "env_steps": summary["env_steps"],
            "steady": _rates(rows, 60.0), "whole": _rates(rows, 0.0),
            "checkpoints": sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*")),
            "events": events + [{k: v for k, v in r.items() if k != "role"} for r in rows if r.get("role") == "event"],
        })
        if events:
            kill = events[0]["second"]
            train = [r for r in rows if r.get("role") is None and "env_steps" in r]
            # rows' "time" runs from the driver's start, a little after the command's
            before = [r for r in train if r["time"] <= kill - 5]
            after = [r for r in train if r["time"] >= kill + 5]
            out["before_kill"] = _rates(before, 30.0)
            out["after_kill"] = _rates(after, 0.0)
        return out
    finally:
        cluster.stop()
        shutil.rmtree(cluster.tmp_dir, ignore_errors=True)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,2", help="node counts to measure, one cluster each")
    parser.add_argument("--cpus-per-node", type=int, default=4)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--game", default="tic_tac_toe")
    parser.add_argument("--pin", action="store_true", help="node k on core k (the driver with the head)")
    parser.add_argument("--kill-at", type=float, default=None, help="kill the last worker node at this second")
    parser.add_argument("--return-at", type=float, default=None, help="start a node again at this second")
    parser.add_argument("--head-cpus", type=int, default=None,
                        help="CPUs of the head (default --cpus-per-node); below 2, the learner's group goes to a worker node")
    parser.add_argument("--resume-minutes", type=float, default=None,
                        help="if the run stops (its learner's node lost), bring a node back and --resume it this long")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="moozi-cluster-bench-"))
    result = {"matmul_gflops": round(_matmul_gflops(), 1), "game": args.game, "runs": []}
    for nodes in [int(n) for n in args.nodes.split(",")]:
        result["runs"].append(run(nodes, args, work))
        r = result["runs"][-1]
        print(f"{nodes} node(s): exit {r['exit_code']}, {r.get('workers')} workers on {r.get('nodes_used')} node(s), "
              f"steady {r.get('steady')}, whole {r.get('whole')}", file=sys.stderr, flush=True)
    runs = {r["nodes"]: r for r in result["runs"]}
    if 1 in runs and 2 in runs and runs[1].get("steady") and runs[2].get("steady"):
        result["ratio_2_vs_1"] = {k: round(runs[2]["steady"][k] / runs[1]["steady"][k], 2)
                                  for k in ("env_steps_per_s", "updates_per_s")}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
