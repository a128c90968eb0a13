#!/usr/bin/env python3
"""A stand-in for `trainsim` (and `cuda_step_bench`) under gpu_check.py on a
machine without a GPU.

Runs each command gpu_check.py gives on this machine's CPU workers instead
(cuda:GxW as cpu:W, cuda:G as cpu:1, cuda:G,H as cpu:2), smaller (batches of 16, runs of 10
iterations, validate's of 3 in one round, few repeats, fp32), so that every section of the check renders
its report from real outputs of trainsim's: what a GPU machine would find
wrong in the report's code shows here. The real binary is $TRAINSIM_REAL.
Called as cuda_step_bench, it runs the real one ($TRAINSIM_REAL_BENCH),
whose every benchmark fails without a GPU, and gives its JSON with each
failure made a run of a stand-in time (1, 2 or 3 ms by repetition): the
names and the format are the benchmark's, the times are not measured."""

import json
import os
import subprocess
import sys


def on_cpu(device):
    if not device.startswith("cuda"):
        return device
    if "," in device:  # a GPU each
        return f"cpu:{len(device.split(','))}"
    return "cpu:" + device.split("x", 1)[1] if "x" in device else "cpu:1"


def bench(given):
    done = subprocess.run([os.environ["TRAINSIM_REAL_BENCH"], *given], capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(done.returncode)
    out = json.loads(done.stdout)
    for b in out["benchmarks"]:
        if b.get("error_occurred"):
            b.pop("error_message", None)
            b.update(error_occurred=False, iterations=1, time_unit="us",
                     real_time=1000.0 * (1 + b.get("repetition_index", 0) % 3), cpu_time=0.0)
    print(json.dumps(out))


def main():
    if os.path.basename(sys.argv[0]) == "cuda_step_bench":
        return bench(sys.argv[1:])
    real = os.environ["TRAINSIM_REAL"]
    args, given = [], sys.argv[1:]
    if given[:1] == ["devices"]:  # the machine as a GPU's would list it, its CPU's line as it is
        listed = subprocess.run([real, "devices"], capture_output=True, text=True).stdout.splitlines()
        print("\n".join([line for line in listed if not line.startswith("no GPU")] +
                        ["cuda:0  gpu         132   1.0 MiB  Stand-in GPU"]))
        return 0
    i = 0
    while i < len(given):
        flag = given[i]
        value = given[i + 1] if i + 1 < len(given) else None
        if flag in ("--device", "--devices"):
            args += [flag, on_cpu(value)]
        elif flag == "--precision":
            pass  # the CPU computes in fp32 only
        elif flag == "--set" and value == "algorithm=mpi" and "--launcher" not in given:
            pass  # NCCL's AllReduce between GPUs of one process: threads on the CPU have none
        elif flag == "--strategies" and "--launcher" not in given:  # likewise, the project's ring in its place
            args += [flag, value.replace(":algorithm=mpi", ":algorithm=ring")]
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
