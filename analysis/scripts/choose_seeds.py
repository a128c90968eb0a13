#!/usr/bin/env python3
"""What `trainsim choose` picks for each seed paper's setting (docs/results.md).

Runs `trainsim choose --json -` per setting and prints the Markdown rows: the
top three feasible strategies in trainsim's order with their rank ("1=" for a
tie within 1% of samples/s), settings and samples/s, and how many were
excluded for memory. Usage:
    python3 analysis/scripts/choose_seeds.py [--trainsim build/tools/trainsim]
"""
import argparse
import json
import subprocess
import sys

SETTINGS = [  # (seed, model, per-device batch, cluster, the paper's winner)
    ("000", "vgg16-cifar10", 128, "p40x4-pcie3", "DualPipe (of Data P., PipeDream, DualPipe)"),
    ("000", "snn", 128, "p40x4-pcie3", "DualPipe"),
    ("003", "vgg16", 32, "p100x4-nvlink-power8", "CGDP over BVLC Caffe"),
    ("002", "alexnet", 256, "titanxp-4node-10gbe", "Pipe-SGD with compression"),
    ("002", "mnist-mlp", 128, "titanxp-4node-10gbe", "Pipe-SGD"),
    ("004", "lm", 128, "titanxp-8x6-ib100", "Parallax hybrid"),
    ("004", "resnet50", 64, "titanxp-8x6-ib100", "MPI (AllReduce) over PS"),
]


def count(value):
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def describe(entry):
    settings = " ".join(f"{key}={value}" for key, value in entry.get("settings", {}).items())
    name = entry["strategy"]
    rank = f"{entry['rank']}{'=' if entry.get('tied') else ''} " if "rank" in entry else ""
    return f"{rank}{name}{' (' + settings + ')' if settings else ''} {count(entry['prediction']['samples_per_s'])}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainsim", default="build/tools/trainsim")
    args = parser.parse_args()
    print("| seed setting | top three | the paper's winner |")
    print("|---|---|---|")
    for seed, model, batch, cluster, winner in SETTINGS:
        cmd = [args.trainsim, "choose", "--model", model, "--batch", str(batch), "--cluster", cluster, "--json", "-"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"trainsim failed ({' '.join(cmd)}): {done.stderr.strip()}")
        ranked = json.loads(done.stdout)["ranked"]
        feasible = [e for e in ranked if e["feasible"]]
        excluded = len(ranked) - len(feasible)
        top = ", ".join(describe(e) for e in feasible[:3])
        if excluded:
            top += f"; {excluded} excluded for memory"
        print(f"| {seed}: {model}, {batch}, {cluster} | {top} | {winner} |")


if __name__ == "__main__":
    main()
