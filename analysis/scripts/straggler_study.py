#!/usr/bin/env python3
"""Seed 001's straggler study (Table 2) in the simulator.

ResNet-164 in K = 3 blocks on p40x4-pcie3; every compute op slowed by x% with
probability 1/3; slowdown = iteration time with stragglers / without - 1,
mean over three seeds. Prints the Markdown table of docs/results.md. Usage:
    python3 analysis/scripts/straggler_study.py [--trainsim build/tools/trainsim]
"""
import argparse
import json
import subprocess
import sys

SCHEDULES = (("GPipe", "gpipe", []), ("1F1B (PipeDream)", "pipedream", []),
             ("DSP(1,1,0; 4,2,0)", "dsp", ['queues={"p":[1,1,0],"m":[4,2,0]}']),
             ("DSP(2,2,0; 8,4,0)", "dsp", ['queues={"p":[2,2,0],"m":[8,4,0]}']))
PAPER = {"FR (paper)": [9.0, 28.5, 97.1, 359.2], "best DSP (paper)": [6.0, 16.0, 32.1, 53.4]}
PERCENTS = (20, 50, 100, 150)


def iteration_s(trainsim, strategy, settings, straggler, seed):
    args = [trainsim, "simulate", "--model", "resnet164", "--cluster", "p40x4-pcie3", "--strategy", strategy,
            "--set", "stages=3", "--iterations", "100", "--seed", str(seed), "--json", "-"]
    for s in settings:
        args += ["--set", s]
    if straggler:
        args += ["--straggler", straggler]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"trainsim failed ({' '.join(args)}): {done.stderr.strip()}")
    return json.loads(done.stdout)["iteration_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainsim", default="build/tools/trainsim")
    args = parser.parse_args()
    print("| schedule | " + " | ".join(f"x = {x}%" for x in PERCENTS) + " |")
    print("|---|" + "---|" * len(PERCENTS))
    for label, strategy, settings in SCHEDULES:
        clean = iteration_s(args.trainsim, strategy, settings, "", 1)
        cells = []
        for x in PERCENTS:
            runs = [iteration_s(args.trainsim, strategy, settings, f"0.3333333:{1 + x / 100}", seed) for seed in (1, 2, 3)]
            cells.append(f"{100 * (sum(runs) / len(runs) / clean - 1):.1f}%")
        print(f"| {label} | " + " | ".join(cells) + " |")
    for label, values in PAPER.items():
        print(f"| *{label}* | " + " | ".join(f"{v:.1f}%" for v in values) + " |")


if __name__ == "__main__":
    main()
