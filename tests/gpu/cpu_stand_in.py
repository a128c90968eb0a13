#!/usr/bin/env python3
"""A stand-in for `trainsim` under gpu_check.py on a machine without a GPU.

Runs each command gpu_check.py gives on this machine's CPU workers instead
(cuda:GxW as cpu:W, cuda:G as cpu:1), smaller (batches of 16, runs of 10
iterations, validate's of 3 in one round, few repeats, fp32), so that every section of the check renders
its report from real outputs of trainsim's: what a GPU machine would find
wrong in the report's code shows here. The real binary is $TRAINSIM_REAL."""

import os
import sys


def on_cpu(device):
    if not device.startswith("cuda"):
        return device
    return "cpu:" + device.split("x", 1)[1] if "x" in device else "cpu:1"


def main():
    real = os.environ["TRAINSIM_REAL"]
    args, given = [], sys.argv[1:]
    i = 0
    while i < len(given):
        flag = given[i]
        value = given[i + 1] if i + 1 < len(given) else None
        if flag in ("--device", "--devices"):
            args += [flag, on_cpu(value)]
        elif flag == "--precision":
            pass  # the CPU computes in fp32 only
        elif flag == "--batch":
            args += [flag, "16"]
        elif flag == "--iterations":  # a run's trace is read from its 8th iteration
            args += [flag, "10" if given[:1] == ["run"] else "3"]
        elif flag in ("--rounds", "--max-rounds", "--repeats"):
            args += [flag, "1"]
        else:
            args.append(flag)
            i += 1
            continue
        i += 2
    if given[:1] == ["profile"] and "--repeats" not in given:
        args += ["--repeats", "2"]
    os.execv(real, [real] + args)


if __name__ == "__main__":
    main()
