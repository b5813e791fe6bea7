"""Where the test suite's time goes: JAX tracing, lowering and XLA compiling, per test and per program.

As a pytest plugin it records every test's duration and the JAX compile events inside it (one JSONL
file per xdist worker); run as a script it prints the totals, the files and tests that cost most,
and the programs whose compiles cost most:

    PYTHONPATH=bench MOOZI_SUITE_PROFILE=/tmp/prof pytest -p suite_profile
    python bench/suite_profile.py /tmp/prof

Events of processes the tests start (Ray actors, `moozi` subprocesses) are not recorded.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import sys

_current = {"test": "<collection>"}
_out = None
TRACE, LOWER, COMPILE = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                         "/jax/core/compile/backend_compile_duration")


def _write(record: dict) -> None:
    global _out
    if _out is None:
        directory = os.environ.get("MOOZI_SUITE_PROFILE", "suite-profile")
        os.makedirs(directory, exist_ok=True)
        _out = open(os.path.join(directory, f"events-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl"), "a")
    _out.write(json.dumps(record) + "\n")
    _out.flush()


def pytest_configure(config):
    from jax import monitoring

    workers = config.getoption("numprocesses", default=None)
    _current["controller"] = bool(workers) and not os.environ.get("PYTEST_XDIST_WORKER")

    def on_duration(event, duration, **kwargs):
        if event in (TRACE, LOWER, COMPILE):
            _write({"test": _current["test"], "event": event, "seconds": duration, "program": kwargs.get("fun_name")})

    monitoring.register_event_duration_secs_listener(on_duration)


def pytest_runtest_setup(item):
    _current["test"] = item.nodeid


def pytest_runtest_logreport(report):
    # Under pytest-xdist the controller receives every worker's reports too: the workers write them.
    if report.when == "call" and not _current.get("controller"):
        _write({"test": report.nodeid, "event": "test", "seconds": report.duration})


def summarize(directory: str, top: int = 25) -> dict:
    events = [json.loads(line) for path in glob.glob(os.path.join(directory, "events-*.jsonl")) for line in open(path)]
    duration = {e["test"]: e["seconds"] for e in events if e["event"] == "test"}
    per_test = collections.defaultdict(lambda: collections.Counter())
    per_program = collections.Counter()
    for e in events:
        if e["event"] != "test":
            per_test[e["test"]][e["event"]] += e["seconds"]
            if e["event"] == COMPILE:
                per_program[e["program"]] += e["seconds"]
    totals = {name: sum(c[event] for c in per_test.values()) for name, event in
              (("compile_s", COMPILE), ("trace_s", TRACE), ("lower_s", LOWER))}
    per_file = collections.Counter()
    for test, seconds in duration.items():
        per_file[test.split("::")[0]] += seconds
    return {
        "tests": len(duration), "test_seconds": sum(duration.values()), **totals,
        "files": per_file.most_common(top),
        "tests_by_duration": [(t, duration[t], per_test[t][COMPILE], per_test[t][TRACE] + per_test[t][LOWER])
                              for t in sorted(duration, key=duration.get, reverse=True)[:top]],
        "programs_by_compile": per_program.most_common(top),
    }


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    summary = summarize(argv[0] if argv else "suite-profile")
    print(f"{summary['tests']} tests, {summary['test_seconds']:.0f} test-seconds: compiling {summary['compile_s']:.0f} s, "
          f"tracing {summary['trace_s']:.0f} s, lowering {summary['lower_s']:.0f} s")
    print("\nfiles (test-seconds)")
    for path, seconds in summary["files"]:
        print(f"{seconds:8.1f}  {path}")
    print("\ntests: seconds, compiling, tracing + lowering")
    for test, seconds, compiling, tracing in summary["tests_by_duration"]:
        print(f"{seconds:8.1f} {compiling:8.1f} {tracing:8.1f}  {test}")
    print("\nprograms (compile seconds)")
    for program, seconds in summary["programs_by_compile"]:
        print(f"{seconds:8.1f}  {program}")
    print(json.dumps({k: v for k, v in summary.items() if k.endswith("_s") or k in ("tests", "test_seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
