#!/usr/bin/env python3
"""Predictions for the seed papers' own settings, next to what the papers report.

Runs `trainsim predict --json -` for each setting and prints the Markdown
tables of docs/results.md. Usage:
    python3 analysis/scripts/seed_predictions.py [--trainsim build/tools/trainsim]
"""
import argparse
import json
import subprocess
import sys


def predict(trainsim, model, batch, cluster, strategies, settings=()):
    args = [trainsim, "predict", "--model", model, "--batch", str(batch), "--cluster", cluster,
            "--strategies", ",".join(strategies), "--json", "-"]
    for s in settings:
        args += ["--set", s]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"trainsim failed ({' '.join(args)}): {done.stderr.strip()}")
    return {r["strategy"]: r for r in json.loads(done.stdout)["results"]}


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def seed000(trainsim):
    """DualPipe (seed 000 §4.2, Fig. 10): 4 P40s, batch 128; Data P. splits the batch (32 per GPU).

    DualPipe is its schedule (spectrain=false), as the paper's throughput figure
    times it; the last column adds SpecTrain's predictions, which trainsim costs."""
    models = ["vgg16-cifar10", "resnet152-cifar10", "inception-v4-cifar10", "snn", "transformer", "residual-lstm"]
    rows, dp_ratio, pd_ratio = [], [], []
    for model in models:
        single = predict(trainsim, model, 128, "p40x4-pcie3", ["single"])["single"]["samples_per_s"]
        dp = predict(trainsim, model, 32, "p40x4-pcie3", ["dp-ps"])["dp-ps"]["samples_per_s"]
        pipes = predict(trainsim, model, 128, "p40x4-pcie3", ["pipedream-sync", "dualpipe"],
                        ["dualpipe.spectrain=false"])
        pd, dual = pipes["pipedream-sync"]["samples_per_s"], pipes["dualpipe"]["samples_per_s"]
        spectrain = predict(trainsim, model, 128, "p40x4-pcie3", ["dualpipe"])["dualpipe"]["samples_per_s"]
        dp_ratio.append(dual / dp)
        pd_ratio.append(dual / pd)
        rows.append([model, f"{dp / single:.2f}", f"{pd / single:.2f}", f"{dual / single:.2f}",
                     f"{dual / dp:.2f}", f"{dual / pd:.2f}", f"{spectrain / single:.2f}"])
    mean = lambda xs: sum(xs) / len(xs)
    rows.append(["**mean (max)**", "", "", "", f"{mean(dp_ratio):.2f} ({max(dp_ratio):.2f})",
                 f"{mean(pd_ratio):.2f} ({max(pd_ratio):.2f})", ""])
    rows.append(["*paper, 4 GPUs*", "FCN/RNN mean 0.385", "", "", "2.64 (15.77)", "1.68 (2.18)", ""])
    return table(["model", "Data P. / single", "PipeDream / single", "DualPipe / single",
                  "DualPipe / Data P.", "DualPipe / PipeDream", "with SpecTrain / single"], rows)


def seed003(trainsim):
    """CGDP (seed 003 Table 2): P100 x4 over NVLink, ms per iteration at 1, 2, 4 GPUs."""
    paper = {"alexnet": ([157.2, 174.3, 202.7], [157.4, 163.6, 167.1]),
             "vgg16": ([345.6, 383.7, 445.6], [345.2, 361.5, 369.1])}
    batch = {"alexnet": 256, "vgg16": 32}
    rows = []
    for model, (bvlc, trl) in paper.items():
        for label, strategy, setting, measured in (("typical DP (dp-ps, host)", "dp-ps", "server=host", bvlc),
                                                   ("CGDP", "cgdp", None, trl)):
            ms = []
            for workers in (1, 2, 4):
                settings = [f"workers={workers}"] + ([setting] if setting else [])
                r = predict(trainsim, model, batch[model], "p100x4-nvlink-power8", [strategy], settings)
                ms.append(r[strategy]["iteration_s"] * 1e3)
            rows.append([model, label, *(f"{m:.1f}" for m in ms), " / ".join(f"{m}" for m in measured),
                         f"{ms[2] - ms[0]:+.1f}", f"{measured[2] - measured[0]:+.1f}"])
    return table(["model", "strategy", "1 GPU", "2 GPUs", "4 GPUs", "paper (1/2/4)",
                  "4 - 1 GPU", "paper 4 - 1"], rows)


def seed002(trainsim):
    """Pipe-SGD (seed 002 §4): 4 nodes x 1 Titan Xp on 10 GbE; time per iteration."""
    rows = []
    for model, batch in (("mnist-mlp", 128), ("cifar100-cnn", 100), ("alexnet", 256), ("resnet18", 256)):
        ps = predict(trainsim, model, batch, "titanxp-4node-10gbe", ["dp-ps"], ["server=host"])["dp-ps"]
        ring = predict(trainsim, model, batch, "titanxp-4node-10gbe", ["dp-ring"])["dp-ring"]
        pipes = {c: predict(trainsim, model, batch, "titanxp-4node-10gbe", ["pipesgd"], [f"compression={c}"])["pipesgd"]
                 for c in ("none", "trunc16", "quant8")}
        best = min(p["iteration_s"] for p in pipes.values())
        rows.append([model, *(f"{x['iteration_s'] * 1e3:.1f}" for x in (ps, ring, *pipes.values())),
                     f"{ps['iteration_s'] / best:.2f}"])
    rows.append(["*paper*", "", "", "", "", "", "up to 5.4"])
    return table(["model", "PS-Sync ms", "D-Sync ms", "Pipe-SGD ms", "Pipe-SGD+T ms", "Pipe-SGD+Q ms",
                  "PS-Sync / best Pipe-SGD"], rows)


def seed004(trainsim):
    """Parallax (seed 004 Table 1): 8 machines x 6 Titan Xp, 48 GPUs; samples (or words) per second."""
    # (model, batch per GPU, words per sample or None for images, paper PS, paper MPI)
    settings = (("resnet50", 64, None, 6.0e3, 8.1e3), ("inception-v3", 64, None, 3.9e3, 5.8e3),
                ("lm", 128, 20, 101.2e3, 39.0e3), ("nmt", 128, 50, 86.8e3, 67.2e3))
    rows = []
    for model, batch, words, paper_ps, paper_mpi in settings:
        rates = {}
        for mode in ("ps", "ar", "hybrid"):
            r = predict(trainsim, model, batch, "titanxp-8x6-ib100", ["parallax"], [f"mode={mode}"])["parallax"]
            rates[mode] = r["samples_per_s"] * (words or 1)
        unit = "words/s" if words else "samples/s"
        rows.append([model, unit, f"{rates['ps'] / 1e3:.1f}k", f"{rates['ar'] / 1e3:.1f}k",
                     f"{rates['hybrid'] / 1e3:.1f}k", f"{paper_ps / 1e3:.1f}k", f"{paper_mpi / 1e3:.1f}k",
                     "yes" if (rates["ps"] > rates["ar"]) == (paper_ps > paper_mpi) else "no"])
    return table(["model", "unit", "PS", "AllReduce (MPI)", "hybrid", "paper PS", "paper MPI",
                  "same winner"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainsim", default="build/tools/trainsim")
    args = parser.parse_args()
    for title, section in (("Seed 000: DualPipe on p40x4-pcie3", seed000),
                           ("Seed 003: CGDP on p100x4-nvlink-power8", seed003),
                           ("Seed 002: Pipe-SGD on titanxp-4node-10gbe", seed002),
                           ("Seed 004: Parallax on titanxp-8x6-ib100", seed004)):
        print(f"### {title}\n\n{section(args.trainsim)}\n")


if __name__ == "__main__":
    main()
