#!/usr/bin/env python3
"""Prediction against measurement across emulated hosts, by hand until
`validate --launcher mpi` exists: `trainsim cluster emulate up` (root), then
per round `trainsim profile --launcher mpi --emulated` (the layers and the
cluster as the ranks measure them), and per strategy `trainsim predict
--method simulated` and `trainsim run --launcher mpi --profile --cluster`
(the plan predict prices), then `down`. Prints a markdown table: the
predicted and measured iteration ranges over the rounds and each round's
error (predicted - measured) / measured.

Usage: cross_host.py TRAINSIM [--hosts 2] [--link 200mbit] [--rounds 3]
[--model fmnist-mlp] [--iterations 40]"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

STRATEGIES = [["dp-ring"], ["dp-overlap"], ["dp-ps"], ["pipesgd"], ["pipesgd", "--set", "compression=quant8"],
              ["gpipe"], ["pipedream"], ["pipedream-sync"], ["dualpipe"], ["dsp"]]
NAME = "xhost"


def run(command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainsim")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--link", default="200mbit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="fmnist-mlp")
    parser.add_argument("--iterations", type=int, default=40)
    a = parser.parse_args()
    t = a.trainsim
    devices = f"cpu:{a.hosts}"
    run([t, "cluster", "emulate", "up", "--hosts", str(a.hosts), "--link", a.link, "--name", NAME])
    results = {" ".join(s): [] for s in STRATEGIES}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for r in range(a.rounds):
                profile, cluster = os.path.join(folder, f"p{r}.json"), os.path.join(folder, f"c{r}.json")
                run([t, "profile", "--model", a.model, "--device", devices, "--launcher", "mpi", "--emulated", NAME,
                     "--out", profile, "--cluster-out", cluster, "--quiet"])
                link = json.load(open(cluster))["inter_link"]
                print(f"round {r + 1}: link {link['bandwidth_bytes_per_s'] / 1e6:.1f} MB/s, "
                      f"{link['latency_s'] * 1e6:.0f} us", file=sys.stderr)
                for s in STRATEGIES:
                    strategy, settings = s[0], s[1:]
                    predicted = json.loads(run([t, "predict", "--profile", profile, "--cluster", cluster, "--strategies",
                                                strategy, *settings, "--method", "simulated", "--json", "-"]).stdout)
                    measured = json.loads(run([t, "run", "--launcher", "mpi", "--emulated", NAME, "--model", a.model,
                                               "--strategy", strategy, *settings, "--devices", devices, "--iterations",
                                               str(a.iterations), "--profile", profile, "--cluster", cluster, "--json",
                                               "-", "--quiet"]).stdout)
                    results[" ".join(s)].append((predicted["results"][0]["iteration_s"], measured["iteration_s"]))
    finally:
        subprocess.run([t, "cluster", "emulate", "down", "--name", NAME], capture_output=True)
    print(f"{a.model}, {a.hosts} emulated hosts at {a.link}, {a.rounds} rounds:\n")
    print("| strategy | predicted (simulated) | measured | error per round |")
    print("|---|---|---|---|")
    errors = []
    for name, pairs in results.items():
        p, m = [x[0] for x in pairs], [x[1] for x in pairs]
        e = [(x - y) / y for x, y in pairs]
        errors += [abs(v) for v in e]
        label = name.replace("--set compression=", "")
        print(f"| {label} | {min(p) * 1e3:.2f}-{max(p) * 1e3:.2f} ms | {min(m) * 1e3:.2f}-{max(m) * 1e3:.2f} ms | "
              f"{', '.join(f'{v * 100:+.1f}%' for v in e)} |")
    print(f"\nmedian |error| {statistics.median(errors) * 100:.1f}%, largest {max(errors) * 100:.1f}%")


if __name__ == "__main__":
    main()
