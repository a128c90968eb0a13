#!/usr/bin/env python3
"""Megatron-LM's Table 1 (Narayanan et al., SC21) against `trainsim llm`'s
closed form: every row's model, tensor- and pipeline-parallel sizes, GPUs
and global batch on DGX A100 machines, the published per-GPU throughput
beside the predicted one. Prints a Markdown table and the mean absolute
percentage error.

Usage: megatron_table1.py TRAINSIM [--gemm-efficiency E] [--micro-batch B]
[--recompute full|selective|none] [--interleave V]"""

import argparse
import json
import subprocess
import sys

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainsim")
    parser.add_argument("--gemm-efficiency", default="0.8")
    parser.add_argument("--micro-batch", default="1")
    parser.add_argument("--recompute", default="full")
    parser.add_argument("--interleave", default="1")
    a = parser.parse_args()
    print(f"| model | t | p | d | GPUs | batch | published TFLOP/s a GPU | predicted | error | bubble | "
          f"data-parallel all-reduce |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for model, t, p, gpus, batch, published in TABLE_1:
        d = gpus // (t * p)
        cmd = [a.trainsim, "llm", "--model", model, "--machine", "dgx-a100", "--tp", str(t), "--pp", str(p),
               "--dp", str(d), "--micro-batch", a.micro_batch, "--recompute", a.recompute, "--interleave",
               a.interleave, "--global-batch", str(batch), "--gemm-efficiency", a.gemm_efficiency, "--json", "-"]
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


if __name__ == "__main__":
    sys.exit(main())
