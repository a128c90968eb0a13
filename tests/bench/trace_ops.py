#!/usr/bin/env python3
"""Op by op, what a trace says about one plan's run (`trainsim run --trace`,
measured, or `trainsim simulate --trace`, priced): per op kind, the median
duration over the iterations from --from on; for the compute ops (forward,
backward, update), how many other workers computed meanwhile (the share of
their time with none, one, two or more others, sampled at ten points of
each); for the AllReduces, the median spread of the members' ends; where
the trace has a worker's compute ops' work on its device (a GPU's kernels,
`trainsim run --trace` on GPU workers: thread DEVICE_TID), each kind's
median there too, and where its ops made calls into the GPU libraries
(args.library_calls), each kind's median count. With several traces, one
line per trace.

Usage: trace_ops.py TRACE.json [TRACE.json ...] [--from 8]"""

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict

COMPUTE = ("forward", "backward", "update")
DEVICE_TID = 6  # after the plan's six streams (exec_chrome_trace)


def op_kind(event):
    return event["name"].split()[0]


def summary(path, first):
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"trace_ops.py: {path}: {e}")
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    timed = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("iteration", -1) >= first]
    ops = [e for e in timed if e.get("tid") != DEVICE_TID]
    on_device = defaultdict(list)
    for e in timed:
        if e.get("tid") == DEVICE_TID:
            on_device[op_kind(e)].append(e["dur"])
    if not ops:
        sys.exit(f"trace_ops.py: {path}: no ops of iteration {first} or later")
    durations = defaultdict(list)
    for e in ops:
        durations[op_kind(e)].append(e["dur"])
    medians = {kind: statistics.median(d) / 1e3 for kind, d in durations.items()}
    compute = [e for e in ops if op_kind(e) in COMPUTE]
    others = Counter()
    for e in compute:
        for k in range(10):
            t = e["ts"] + e["dur"] * (k + 0.5) / 10
            others[min(2, sum(1 for o in compute if o["pid"] != e["pid"] and o["ts"] <= t < o["ts"] + o["dur"]))] += 1
    samples = sum(others.values()) or 1
    ends = defaultdict(list)
    for e in ops:
        if op_kind(e) == "allreduce":
            key = (e["args"]["iteration"], tuple(e["args"].get("layers", [])), e["args"].get("microbatch", -1))
            ends[key].append(e["ts"] + e["dur"])
    spreads = [max(v) - min(v) for v in ends.values() if len(v) > 1]
    device = {kind: statistics.median(d) / 1e3 for kind, d in on_device.items()}
    calls = {kind: statistics.median(e.get("args", {}).get("library_calls", 0) for e in ops if op_kind(e) == kind)
             for kind in durations}
    return (medians, [others[n] / samples for n in range(3)], statistics.median(spreads) / 1e3 if spreads else None,
            device, {kind: n for kind, n in calls.items() if n > 0})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--from", dest="first", type=int, default=8, help="the first iteration counted (default 8)")
    a = parser.parse_args()
    for path in a.traces:
        medians, others, spread, device, calls = summary(path, a.first)
        kinds = " ".join(f"{kind} {ms:.2f}" for kind, ms in sorted(medians.items()) if ms > 0)
        line = f"{path}: medians (ms) {kinds}; others computing 0/1/2+: " + "/".join(f"{x:.2f}" for x in others)
        if spread is not None:
            line += f"; AllReduce ends {spread:.2f} ms apart"
        if device:
            line += "; on the device (ms) " + " ".join(f"{kind} {ms:.2f}" for kind, ms in sorted(device.items()))
        if calls:
            line += "; library calls " + " ".join(f"{kind} {n:g}" for kind, n in sorted(calls.items()))
        print(line)


if __name__ == "__main__":
    main()
