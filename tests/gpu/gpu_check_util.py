"""gpu_check.py's shared parts: the check's state (its report, its commands'
log, whether one failed), running a command under a time limit, and the
renderings its sections share."""

import json
import os
import re
import signal
import statistics
import subprocess
import time

# Any command the check runs stops after this long unless it says otherwise:
# a hang ends there, not with the loan of the GPU.
DEFAULT_TIMEOUT_S = 300


def run(cmd, log, check=True, timeout=DEFAULT_TIMEOUT_S, env=None):
    """`cmd` in a process group of its own, the whole group stopped at the
    time limit (a trainsim under nsys or mpirun holds the GPU otherwise)."""
    log.append("$ " + " ".join(cmd))
    started = time.time()
    try:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, env=None if env is None else {**os.environ, **env})
    except (FileNotFoundError, PermissionError) as e:
        child = None
        done = subprocess.CompletedProcess(cmd, 127, "", str(e))
    if child is not None:
        try:
            out, err = child.communicate(timeout=timeout)
            done = subprocess.CompletedProcess(cmd, child.returncode, out, err)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = child.communicate()
            done = subprocess.CompletedProcess(cmd, 124, out or "", f"timed out after {timeout} s")
    log.append(f"(exit {done.returncode}, {time.time() - started:.1f} s)")
    if done.returncode != 0 and check:
        log.append(done.stdout[-4000:] + done.stderr[-4000:])
    return done


class Check:
    """What the sections share: the options, trainsim's path, the report so
    far and the commands' log (written out by flush), whether a command
    failed, and each strategy's measured iteration (for the cluster's
    predictions; kept under --out, so a later call of the check reads it)."""

    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.trainsim = os.path.join(args.build, "tools", "trainsim")
        self.data = ["--data-dir", args.data_dir] if args.data_dir else []
        self.log, self.report, self.failed = [], [], False
        self.measured_path = os.path.join(args.out, "measured.json")

    def run(self, cmd, check=True, timeout=DEFAULT_TIMEOUT_S, env=None):
        return run(cmd, self.log, check=check, timeout=timeout, env=env)

    def flush(self):
        """The report so far, with its commands, so a check cut short keeps what it measured."""
        with open(os.path.join(self.out, "gpu-check.md"), "w") as f:
            f.write("\n".join(self.report + ["", "## Commands", "", "```"] + self.log + ["```", ""]))

    def measured(self):
        try:
            with open(self.measured_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def keep_measured(self, strategy, iteration_s):
        measured = self.measured()
        measured[strategy] = iteration_s
        with open(self.measured_path + ".new", "w") as f:
            json.dump(measured, f, indent=2)
        os.replace(self.measured_path + ".new", self.measured_path)

    def forget_measured(self):
        forget(self.measured_path)


def forget(path):
    """`path` removed where it is: an earlier call's file must not pass for the next command's."""
    if os.path.exists(path):
        os.remove(path)


def last_line(done):
    return (done.stderr.strip().splitlines() or ["?"])[-1]


def num(value, fmt, scale=1.0, missing="n/a"):
    """`value` (a JSON number, or null where trainsim wrote NaN) times `scale`, formatted."""
    return missing if value is None else format(value * scale, fmt)


GTEST_TEST_LINE = re.compile(r"^\[  (FAILED|SKIPPED) +\] ([A-Za-z_][\w/.]*)")


def gtest_summary(output):
    """gtest's totals (each run's, once, with how many runs gave them), then
    each test that failed or was skipped, named once over the repeats."""
    lines = output.splitlines()
    totals = [l[len("[  PASSED  ] "):] for l in lines if l.startswith("[  PASSED  ]")]
    named = {"FAILED": [], "SKIPPED": []}
    for line in lines:
        m = GTEST_TEST_LINE.match(line)
        if m and m.group(2) not in named[m.group(1)]:
            named[m.group(1)].append(m.group(2))
    if not totals and not any(named.values()):
        return " ".join(output.strip().splitlines()[-1:])
    parts = [f"passed {t}" + (f" (×{totals.count(t)})" if totals.count(t) > 1 else "") for t in dict.fromkeys(totals)]
    parts += [f"{kind.lower()} {len(tests)}: {', '.join(tests)}" for kind, tests in named.items() if tests]
    return "; ".join(parts)


def step_s(profile):
    return sum(l["forward_s"] + l["backward_s"] + l.get("update_s", 0.0) for l in profile["layers"])


DEVICE_TID = 6  # a worker's thread of its compute ops' work on the GPU (exec_chrome_trace), after the plan's 6 streams


def compute_busy_s(trace_path, first, tid=0):
    """Median over iterations from `first` of the time worker 0's compute stream spends in its ops (tid 0: the
    host's, queuing their kernels; DEVICE_TID: their kernels on the GPU)."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    busy = {}
    for e in events:
        it = e.get("args", {}).get("iteration")
        if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == tid and it is not None and it >= first:
            busy[it] = busy.get(it, 0.0) + e["dur"] * 1e-6
    return statistics.median(busy.values()) if busy else None


def spread(values):
    return f"{statistics.median(values) * 1e3:.3f} ms (runs {', '.join(f'{v * 1e3:.3f}' for v in values)})"


def validation_lines(model, v):
    """validate's JSON as the report's table of each strategy."""
    lines = [f"{model}, batch {v.get('batch_size', '?')} per worker, {v['rounds']} rounds ({v['stopped']}); median |error| simulated "
             f"{num(v.get('median_abs_error_simulated'), '.1f', 100)}%, analytic "
             f"{num(v.get('median_abs_error_analytic'), '.1f', 100)}%; "
             "GPU busy: each worker's kernels over an iteration, the median over the workers; memory: the "
             "analytic prediction's fullest device and the most a worker held (MiB):", "",
             "| strategy | measured | simulated | error | analytic | error | verdict | GPU busy | memory predicted, held |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in v["results"]:
        if r.get("skipped"):
            lines.append(f"| {r['strategy']} | not run: {r['skipped']} | | | | | | | |")
            continue
        busy = f"{r['device_busy'] * 100:.0f}%" if r.get("device_busy") is not None else "not timed"
        held = r.get("measured_memory_bytes")
        memory = f"{num(r.get('predicted_memory_bytes'), '.1f', 2**-20, '?')}, {num(held, '.1f', 2**-20, '?')}"
        lines.append(f"| {r['strategy']} | {num(r['measured_s'], '.3f', 1e3)} ms | "
                     f"{num(r['predicted_simulated_s'], '.3f', 1e3)} ms | {num(r['error_simulated'], '+.1f', 100)}% | "
                     f"{num(r['predicted_analytic_s'], '.3f', 1e3)} ms | {num(r['error_analytic'], '+.1f', 100)}% | "
                     f"{r['verdict']} | {busy} | {memory} |")
    return lines + [""]
