#!/usr/bin/env python3
"""`make gpu-check`: what trainsim's GPU side does on this machine's GPU.

Runs the GPU conformance tests, profiles the zoo's chain models on the GPU
(three times each, for the spread), measures the GPU as a cluster of 1 and
4 workers, predicts every strategy from those measurements, validates them
on four workers sharing the GPU, runs what needs two GPUs where there are
two (NCCL between GPUs, a stage per GPU), and, where
PyTorch imports, times PyTorch's eager training step on the same model,
batch and precision (fp32, TF32 off) beside trainsim's. Writes OUT/gpu-check.md
(with the GPU's name and driver) and the JSON files it measured; exits 1 if
a test or a command failed."""

import argparse
import os
import sys
import time

import gpu_check_measures as measures
import gpu_check_runs as runs
from gpu_check_gpus import several_gpus
from gpu_check_util import Check, run, validation_lines

# The check's parts: the conformance tests; the same under memcheck (up to
# 4 min: a part of its own, so a short loan of a GPU can leave it for
# later); every strategy on four workers (with where a worker's iteration
# goes); the training step beside PyTorch's; the profiles; the GPU as a
# cluster and the predictions from it; validate; what needs two GPUs or
# more (gpu_check_gpus.py), reported as not run on a machine with one.
SECTIONS = ["tests", "memcheck", "strategies", "steps", "profiles", "cluster", "validate", "gpus"]


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="trainsim's build folder")
    parser.add_argument("--out", default="docs/gpu-check", help="where the report and measurements go")
    parser.add_argument("--commit", default="unknown", help="the trainsim commit measured")
    parser.add_argument("--data-dir", default="", help="Fashion-MNIST's folder for trainsim run (default: Debian's)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="what to run, in this order, separated by commas (a subset of the default: " +
                             ", ".join(SECTIONS) + ")")
    parser.add_argument("--test-repeat", type=int, default=measures.RUNS,
                        help=f"how many times the tests section runs the GPU tests (default {measures.RUNS})")
    parser.add_argument("--validate-models", default=",".join(m for m, _ in measures.VALIDATED),
                        help="the models the validate section validates, separated by commas (a subset of the "
                             "default: " + ", ".join(m for m, _ in measures.VALIDATED) + ")")
    parser.add_argument("--validate-batches", default="64,256",
                        help="the batches per worker each model is validated at, separated by commas (default "
                             "64,256: at 64 a GPU worker's ops are bound by the host's time queuing them, at 256 "
                             "more by the GPU's)")
    parser.add_argument("--validate-budget", type=int, default=200,
                        help="seconds after which validate starts no round past its second, per model (default "
                             "200; the check stops a model's validate 120 s later, keeping the rounds it finished)")
    parser.add_argument("--validate-iterations", type=int, default=50,
                        help="iterations validate trains per strategy and round (default 50; at 20 a run at "
                             "batch 64 lasted about 30 ms, and single's five rounds on an H200 ranged 0.93-1.53 ms "
                             "an iteration)")
    parser.add_argument("--packed-libraries", default="",
                        help="the libraries run_packed.sh took from the pack, for the report")
    return parser.parse_args()


def header(ck, sections):
    """The report's head: the GPU, its driver and memory, trainsim's view of
    the machine (its devices, NCCL), the commit; False where no GPU answers."""
    smi = ck.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], timeout=60)
    gpu = smi.stdout.strip()
    if smi.returncode != 0 or not gpu:
        print(f"gpu-check: no GPU answers here ({smi.stderr.strip() or 'nvidia-smi printed nothing'})",
              file=sys.stderr)
        return None
    listed = ck.run([ck.trainsim, "devices"], check=False, timeout=60)
    lines = listed.stdout.splitlines()
    nccl = next((line for line in lines if line.startswith("NCCL")),
                f"NCCL: not listed by trainsim devices (exit {listed.returncode})")
    versions = next((line for line in lines if "cuDNN" in line), "CUDA's versions: not listed")
    ck.report += ["# GPU check", "", f"- GPU, driver, memory: {gpu}", f"- {versions}", f"- {nccl}",
                  f"- trainsim commit: {ck.args.commit}",
                  f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
                  f"- sections: {', '.join(s for s in SECTIONS if s in sections)}"]
    if ck.args.packed_libraries:
        ck.report.append(f"- libraries from the pack (this machine lacks them): {ck.args.packed_libraries}")
    # Where trainsim's CUDA cannot use the GPU, every GPU test skips: that is a failure here.
    unusable = [line for line in lines if line.startswith("no GPU")]
    if listed.returncode != 0 or unusable:
        ck.failed = True
        ck.report.append(f"- trainsim sees no GPU it can use: {(unusable or [listed.stderr.strip()])[0]}")
    ck.report += ["", "`trainsim devices`:", "", "```", *lines, "```"]
    return gpu


def main():
    args = arguments()
    validated = [(m, s) for m, s in measures.VALIDATED if m in args.validate_models.split(",")]
    unknown = set(args.validate_models.split(",")) - {m for m, _ in measures.VALIDATED}
    batches = [int(b) for b in args.validate_batches.split(",") if b.isdigit() and int(b) > 0]
    if (unknown or args.test_repeat < 1 or args.validate_budget < 1 or args.validate_iterations < 10
            or len(batches) != len(args.validate_batches.split(","))):
        print(f"gpu-check: --validate-models takes {', '.join(m for m, _ in measures.VALIDATED)}; --test-repeat and "
              f"--validate-budget at least 1; --validate-iterations at least 10; --validate-batches positive integers "
              f"separated by commas",
              file=sys.stderr)
        return 2
    sections = set(args.sections.split(","))
    if not sections <= set(SECTIONS):
        print(f"gpu-check: --sections names {', '.join(sorted(sections - set(SECTIONS)))}; the sections are "
              f"{', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    ck = Check(args)
    gpu = header(ck, sections)
    if gpu is None:
        return 2
    ck.flush()
    parts = {"tests": runs.tests, "memcheck": runs.memcheck, "strategies": runs.strategies, "steps": measures.steps,
             "profiles": measures.profiles, "cluster": measures.cluster,
             "validate": lambda c: measures.validate(c, validated, batches)}
    for section in SECTIONS:
        if section not in sections:
            continue
        if section == "gpus":
            lines, gpus_failed = several_gpus(run, ck.trainsim, args.out,
                                              ck.data, ck.log, len(gpu.splitlines()), validation_lines)
            ck.report += lines
            ck.failed |= gpus_failed
        else:
            parts[section](ck)
        ck.flush()
    print("\n".join(ck.report))
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
