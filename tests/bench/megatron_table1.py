#!/usr/bin/env python3
"""Megatron-LM's Table 1 (Narayanan et al., SC21) against `trainsim llm`'s
closed form: every row's model, tensor- and pipeline-parallel sizes, GPUs
and global batch on DGX A100 machines, the published per-GPU throughput
beside the predicted one. Prints a Markdown table and the mean absolute
percentage error.

With --simulate, each row's pipeline also runs event by event (`trainsim
llm --profile-out --cluster-out`, then `trainsim simulate --strategy 1f1b`):
the simulated iteration beside the closed form's pipeline and optimizer
step, and the simulation's own time.

Usage: megatron_table1.py TRAINSIM [--gemm-efficiency E] [--micro-batch B]
[--recompute full|selective|none] [--interleave V] [--zero-bubble] [--simulate]
[--simulate-job]

With --simulate-job, each row's whole job (every GPU, its tensor-, pipeline-
and data-parallel collectives) is simulated beside the closed form
(`trainsim llm --simulate-job`), where its plan holds at most the plan limit
of ops."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# model, t, p, GPUs, global batch, published teraFLOP/s per GPU: transcribed
# from the paper's Table 1 (its abstract also gives the last row: 502
# petaFLOP/s on 3,072 GPUs, 52% of peak).
TABLE_1 = [
    ("megatron-1.7b", 1, 1, 32, 512, 137),
    ("megatron-3.6b", 2, 1, 64, 512, 138),
    ("megatron-7.5b", 4, 1, 128, 512, 142),
    ("megatron-18.4b", 8, 1, 256, 1024, 135),
    ("megatron-39.1b", 8, 2, 512, 1536, 138),
    ("megatron-76.1b", 8, 4, 1024, 1792, 140),
    ("megatron-145.6b", 8, 8, 1536, 2304, 148),
    ("megatron-310.1b", 8, 16, 1920, 2160, 155),
    ("megatron-529.6b", 8, 35, 2520, 2520, 163),
    ("megatron-1008b", 8, 64, 3072, 3072, 163),
]


def llm_command(a, model, t, p, d, batch):
    """`trainsim llm` for one row on DGX A100 machines, with the script's assumptions."""
    return [a.trainsim, "llm", "--model", model, "--machine", "dgx-a100", "--tp", str(t), "--pp", str(p), "--dp",
            str(d), "--micro-batch", a.micro_batch, "--recompute", a.recompute, "--interleave", a.interleave,
            "--global-batch", str(batch), "--gemm-efficiency", a.gemm_efficiency] + (
                ["--zero-bubble"] if a.zero_bubble else [])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainsim")
    parser.add_argument("--gemm-efficiency", default="0.8")
    parser.add_argument("--micro-batch", default="1")
    parser.add_argument("--recompute", default="full")
    parser.add_argument("--interleave", default="1")
    parser.add_argument("--zero-bubble", action="store_true", help="ZB-H1's schedule instead of 1F1B")
    parser.add_argument("--simulate", action="store_true", help="also run each row's pipeline in the simulator")
    parser.add_argument("--simulate-job", action="store_true", help="simulate each row's whole job")
    a = parser.parse_args()
    if a.simulate:
        return simulate_rows(a)
    if a.simulate_job:
        return simulate_jobs(a)
    print(f"| model | t | p | d | GPUs | batch | published TFLOP/s a GPU | predicted | error | bubble | "
          f"data-parallel all-reduce |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for model, t, p, gpus, batch, published in TABLE_1:
        d = gpus // (t * p)
        cmd = llm_command(a, model, t, p, d, batch) + ["--json", "-"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"| {model} | failed: {done.stderr.strip()} |")
            continue
        step = json.loads(done.stdout)["step"]
        predicted = step["flops_per_gpu_per_s"] / 1e12
        error = predicted / published - 1
        errors.append(abs(error))
        print(f"| {model} | {t} | {p} | {d} | {gpus} | {batch} | {published} | {predicted:.0f} | {error:+.1%} | "
              f"{step['bubble_s'] / step['iteration_s']:.1%} | {step['data_parallel_s'] / step['iteration_s']:.1%} |")
    if errors:
        print(f"\nmean absolute percentage error {sum(errors) / len(errors):.1%} over {len(errors)} rows")
    return 0 if len(errors) == len(TABLE_1) else 1


def simulate_rows(a):
    schedule = "zb-h1" if a.zero_bubble else "1f1b"
    print(f"| model | p | micro-batches | closed form (pipeline + optimizer) | simulated {schedule} | gap | "
          f"simulation took |")
    print("|---|---|---|---|---|---|---|")
    gaps = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, t, p, gpus, batch, _ in TABLE_1:
            d = gpus // (t * p)
            profile, cluster = os.path.join(tmp, "p.json"), os.path.join(tmp, "c.json")
            if a.interleave != "1" and (p == 1 or (batch // d) % p != 0):
                continue  # interleaving needs a pipeline and micro-batches in groups of p
            cmd = llm_command(a, model, t, p, d, batch) + ["--profile-out", profile, "--cluster-out", cluster]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"| {model} | failed: {done.stderr.strip()} |")
                continue
            line = done.stdout.strip().splitlines()[-1]
            sim_args = line.split("trainsim simulate ", 1)[1].split()
            step = json.loads(subprocess.run(cmd + ["--json", "-"], capture_output=True, text=True).stdout)["step"]
            closed = step["pipeline_s"] + step["optimizer_s"]
            started = time.time()
            sim = subprocess.run([a.trainsim, "simulate"] + sim_args + ["--iterations", "3", "--json", "-", "--quiet"],
                                 capture_output=True, text=True)
            took = time.time() - started
            if sim.returncode != 0:
                print(f"| {model} | simulate failed: {sim.stderr.strip()} |")
                continue
            simulated = json.loads(sim.stdout)["iteration_s"]
            gap = simulated / closed - 1
            gaps.append(abs(gap))
            print(f"| {model} | {p} | {step['microbatches']} | {closed:.3f} s | {simulated:.3f} s | {gap:+.2%} | "
                  f"{took:.2f} s |")
    if gaps:
        print(f"\nlargest |gap| {max(gaps):.2%} over {len(gaps)} rows")
    return 0 if gaps else 1


def simulate_jobs(a):
    print("| model | GPUs | micro-batches | closed form | simulated job | gap | ops | simulation took |")
    print("|---|---|---|---|---|---|---|---|")
    gaps = []
    for model, t, p, gpus, batch, _ in TABLE_1:
        d = gpus // (t * p)
        done = subprocess.run(llm_command(a, model, t, p, d, batch) + ["--simulate-job"], capture_output=True,
                              text=True)
        if done.returncode != 0:
            print(f"| {model} | {gpus} | not simulated: {done.stderr.strip().removeprefix('trainsim: error: ')} |")
            continue
        line = done.stdout.strip().splitlines()[-1]
        closed = json.loads(subprocess.run(llm_command(a, model, t, p, d, batch) + ["--json", "-"],
                                           capture_output=True, text=True).stdout)["step"]
        # "the whole job simulated (G GPUs on M ... machines, N ops, in T): S an iteration, ..."
        ops = line.split(" machines, ", 1)[1].split(" ops", 1)[0]
        took = line.split(" ops, in ", 1)[1].split("):", 1)[0]
        simulated = line.split("): ", 1)[1].split(" an iteration", 1)[0]
        gap = line.split(" an iteration, ", 1)[1].split(" from", 1)[0]
        gaps.append(abs(float(gap.rstrip("%"))))
        print(f"| {model} | {gpus} | {closed['microbatches']} | {closed['iteration_s']:.3f} s | {simulated} | {gap} | "
              f"{ops} | {took} |")
    if gaps:
        print(f"\nlargest |gap| {max(gaps):.2f}% over {len(gaps)} rows")
    return 0 if gaps else 1


if __name__ == "__main__":
    sys.exit(main())
