#!/usr/bin/env python3
"""Seed 000's performance breakdown (§4.3, Figure 11) in the simulator.

VGG16 and SNN on p40x4-pcie3: Data P. (parameter server on GPU 0, the batch
of 128 split 32 per GPU), PipeDream as seed 000 ran it (barrier per time unit)
and DualPipe's schedule (batch 128 per mini-batch, SpecTrain's predictions
left out as the paper's figures leave them). Each worker's wall time splits into
compute, exposed communication, idle waiting on transfers and idle from
imbalance; the table gives the average over workers as shares of the wall
time. Prints the Markdown table of docs/results.md. Usage:
    python3 analysis/scripts/seed000_breakdown.py [--trainsim build/tools/trainsim]
"""
import argparse
import json
import subprocess
import sys

# DualPipe's schedule as the paper's figures time it: SpecTrain's predictions,
# which trainsim costs, left out (spectrain=false), as in notebooks/seed000.
RUNS = (("Data P.", "dp-ps", 32, ()), ("PipeDream", "pipedream-sync", 128, ()),
        ("DualPipe", "dualpipe", 128, ("spectrain=false",)))
PARTS = ("compute", "exposed_comm", "idle_transfer", "idle_imbalance")


def simulate(trainsim, model, strategy, batch, settings):
    args = [trainsim, "simulate", "--model", model, "--batch", str(batch), "--cluster", "p40x4-pcie3",
            "--strategy", strategy, "--iterations", "60", "--json", "-"]
    for setting in settings:
        args += ["--set", setting]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"trainsim failed ({' '.join(args)}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainsim", default="build/tools/trainsim")
    args = parser.parse_args()
    print("| model | scheme | time per 128 samples | compute | exposed comm | idle on transfers | idle from imbalance |")
    print("|---|---|---|---|---|---|---|")
    for model in ("vgg16-cifar10", "snn"):
        for label, strategy, batch, settings in RUNS:
            d = simulate(args.trainsim, model, strategy, batch, settings)
            per_128 = d["iteration_s"] * 128 / (batch * (len(d["workers"]) if strategy == "dp-ps" else 1))
            totals = {p: sum(w["breakdown_s"][p] for w in d["workers"]) for p in PARTS}
            wall = sum(totals.values())
            shares = " | ".join(f"{100 * totals[p] / wall:.1f}%" for p in PARTS)
            print(f"| {model} | {label} | {per_128 * 1e3:.2f} ms | {shares} |")


if __name__ == "__main__":
    main()
