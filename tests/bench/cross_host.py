#!/usr/bin/env python3
"""Prediction against measurement across emulated hosts: `trainsim cluster
emulate up` (root), then `trainsim validate --launcher mpi --emulated` once
per run (every rank profiles, the ranks measure their links and hosts
together, every strategy runs across them in rounds), then `down`. Prints a
markdown table per run and, over the runs, each strategy's error range.

Usage: cross_host.py TRAINSIM [--hosts 4] [--workers-per-host 1]
[--link 200mbit] [--mtu 9000] [--burst BYTES] [--runs 3] [--model fmnist-mlp] [--strategies LIST]
[--iterations 30] [--rounds 5] [--max-rounds 8] [--budget 300] [--json-dir DIR]

With --json-dir each run's validation, measured profile and measured cluster
are kept there (validation-*.json, profile-*.json, cluster-*.json), which
tests/bench/resimulate.py prices again."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Every strategy, Pipe-SGD with each codec, Parallax in each mode.
STRATEGIES = ("single,dp-ps,dp-ring,dp-overlap,pipesgd,pipesgd:compression=trunc16,pipesgd:compression=quant8,cgdp,"
              "pipedream,pipedream-sync,dualpipe,gpipe,dsp,parallax,parallax:mode=ps,parallax:mode=ar")
NAME = "xhost"


def run(command, timeout):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done


def percent(x):
    return f"{x * 100:+.1f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainsim")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--workers-per-host", type=int, default=1)
    parser.add_argument("--link", default="200mbit")
    parser.add_argument("--mtu", type=int, help="the emulated links' MTU (default: emulate up's)")
    parser.add_argument("--burst", type=int, help="the emulated links' tbf bucket in bytes (default: emulate up's)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", default="fmnist-mlp")
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-rounds", type=int, default=8)
    parser.add_argument("--budget", type=float, default=300)
    parser.add_argument("--json-dir", help="keep each run's trainsim.validation/1 here")
    a = parser.parse_args()
    t = a.trainsim
    workers = a.hosts * a.workers_per_host
    run([t, "cluster", "emulate", "up", "--hosts", str(a.hosts), "--workers-per-host", str(a.workers_per_host),
         "--link", a.link, "--name", NAME, *(["--mtu", str(a.mtu)] if a.mtu else []),
         *(["--burst", str(a.burst)] if a.burst else [])], 120)
    reports = []
    try:
        folder = a.json_dir or tempfile.mkdtemp()
        os.makedirs(folder, exist_ok=True)
        for r in range(a.runs):
            path = os.path.join(folder, f"validation-{a.hosts}x{a.workers_per_host}-{a.link}-{r + 1}.json")
            run([t, "validate", "--launcher", "mpi", "--emulated", NAME, "--model", a.model, "--devices",
                 f"cpu:{workers}", "--strategies", a.strategies, "--iterations", str(a.iterations), "--rounds",
                 str(a.rounds), "--max-rounds", str(a.max_rounds), "--budget", str(a.budget), "--json", path,
                 "--profile-out", path.replace("validation-", "profile-"), "--cluster-out",
                 path.replace("validation-", "cluster-"), "--quiet"], 3600)
            reports.append(json.load(open(path)))
            print(f"run {r + 1} of {a.runs}: {path}", file=sys.stderr)
    finally:
        subprocess.run([t, "cluster", "emulate", "down", "--name", NAME], capture_output=True)
    print(f"{a.model}, {a.hosts} emulated hosts x {a.workers_per_host} at {a.link}"
          f"{f' (MTU {a.mtu})' if a.mtu else ''}{f' (bucket {a.burst} B)' if a.burst else ''}, {a.runs} runs of validate "
          f"--launcher mpi:\n")
    print("| strategy | predicted (simulated) | measured | ± (each run) | error (each run) |")
    print("|---|---|---|---|---|")
    errors, judged = [], []
    for entry in [x["strategy"] for x in reports[0]["results"]]:
        results = [next(x for x in rep["results"] if x["strategy"] == entry) for rep in reports]
        ran = [x for x in results if "skipped" not in x]
        if not ran:
            print(f"| {entry} | not run: {results[0]['skipped'][:120]} | | | |")
            continue
        p = [x["predicted_simulated_s"] * 1e3 for x in ran]
        m = [x["measured_s"] * 1e3 for x in ran]
        u = [x["uncertainty"] for x in ran]
        e = [x["error_simulated"] for x in ran]
        errors += [abs(v) for v in e]
        judged += [abs(x["error_simulated"]) for x in ran if x["verdict"] != "too noisy to judge"]
        print(f"| {entry} | {min(p):.2f}-{max(p):.2f} ms | {min(m):.2f}-{max(m):.2f} ms | "
              f"{', '.join('?' if v is None else f'{v * 100:.1f}%' for v in u)} | {', '.join(percent(v) for v in e)} |")
    medians = [rep["median_abs_error_simulated"] for rep in reports]
    print(f"\nmedian |error| per run: {', '.join(f'{v * 100:.1f}%' for v in medians)}; over every run's strategies "
          f"{statistics.median(errors) * 100:.1f}%, largest {max(errors) * 100:.1f}%; judged (uncertainty within "
          f"3%): {len(judged)} of {len(errors)}, largest {max(judged) * 100 if judged else 0:.1f}%")
    probes = [rep["machine_variability"] for rep in reports]
    print(f"machine: capacity probe's half-width per run {', '.join('?' if v is None else f'{v * 100:.1f}%' for v in probes)}")


if __name__ == "__main__":
    main()
