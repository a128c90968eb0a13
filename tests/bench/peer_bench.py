#!/usr/bin/env python3
"""`make peer-bench`: trainsim's training step on this CPU beside PyTorch's.

For each CPU-sized zoo model, one training step (forward, softmax
cross-entropy, backward, SGD update without momentum) at the batch
step_bench uses: trainsim's through exec's kernels
(`step_bench --benchmark_filter=BM_KernelStep/...`, Eigen, one thread) and
PyTorch's eager step of the same model (tests/peers/torch_models.py, its
trainable parameter count checked against the zoo's) with one thread, fp32,
the same batch and labels shapes. The two run in turns, model by model, for
--rounds rounds, so a change in the machine's load falls on both; the table
gives each side's median and range over the rounds and the ratio of the
medians. PyTorch is never a build or test dependency: the make target
installs it into a virtual environment of its own."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# (zoo model, batch): step_bench's BM_KernelStep captures.
MODELS = [("fmnist-mlp", 64), ("fmnist-cnn", 64), ("fmnist-resnet20", 16), ("fortunes-gpt", 16),
          ("fortunes-lstm", 16)]
CONTEXT = 64  # fortunes models: bytes per sample
LEARNING_RATE = 0.01


def trainsim_step_s(build, model):
    """Mean time of trainsim's step from one step_bench run (at least 1 s of steps), and
    the run's context (step_bench's blas_kernels: the kernels its products ran)."""
    name = "BM_KernelStep/" + model.replace("-", "_")
    done = subprocess.run([os.path.join(build, "tests", "bench", "step_bench"), f"--benchmark_filter={name}$",
                           "--benchmark_min_time=1", "--benchmark_format=json"], capture_output=True, text=True,
                          check=True)
    report = json.loads(done.stdout)
    bench = report["benchmarks"][0]
    scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[bench["time_unit"]]
    return bench["real_time"] * scale, report["context"]


def kernels_line(context):
    """Which kernels trainsim's matrix products ran, and whether the environment chose them."""
    kernels = context.get("blas_kernels", "unknown")
    forced = os.environ.get("OPENBLAS_CORETYPE")
    chosen = f", as OPENBLAS_CORETYPE={forced} in the environment says" if forced else ""
    return f"trainsim's matrix products: {kernels} kernels{chosen}"


def pytorch_step_s(torch, make_module, model, batch, seconds=1.0):
    """Mean time of PyTorch's eager step, over at least `seconds` after five warm-ups."""
    if model.startswith("fortunes"):
        x = torch.randint(0, 256, (batch, CONTEXT))
        y = torch.randint(0, 256, (batch, CONTEXT))
    else:
        x = torch.rand(batch, 1, 28, 28)
        y = torch.randint(0, 10, (batch,))
    module = make_module()
    opt = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=LEARNING_RATE)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        logits = module(x)
        loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
        opt.step()

    for _ in range(5):
        step()
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        step()
        steps += 1
    return (time.perf_counter() - started) / steps


def spread_ms(values):
    return f"{statistics.median(values) * 1e3:.2f} ms ({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="trainsim's build folder")
    parser.add_argument("--rounds", type=int, default=3, help="turns of both sides per model")
    parser.add_argument("--out", help="also write the table (markdown) here")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("peer-bench: PyTorch is not installed in this Python (make peer-bench installs it)", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
    from torch_models import MODELS as MODULES, trainable_parameters
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    trainsim = os.path.join(args.build, "tools", "trainsim")
    rows, context = [], {}
    for model, batch in MODELS:
        params = json.loads(subprocess.run([trainsim, "zoo", "show", model, "--json"], capture_output=True,
                                           text=True, check=True).stdout)["param_count"]
        if trainable_parameters(MODULES[model]()) != params:
            print(f"peer-bench: {model}: PyTorch's model has {trainable_parameters(MODULES[model]())} "
                  f"trainable parameters, the zoo's {params}", file=sys.stderr)
            return 1
        ours, theirs = [], []
        for r in range(args.rounds):
            step_s, context = trainsim_step_s(args.build, model)
            ours.append(step_s)
            theirs.append(pytorch_step_s(torch, MODULES[model], model, batch))
            print(f"{model} round {r + 1}: trainsim {ours[-1] * 1e3:.2f} ms, PyTorch {theirs[-1] * 1e3:.2f} ms",
                  file=sys.stderr, flush=True)
        rows.append(f"| {model} | {batch} | {spread_ms(ours)} | {spread_ms(theirs)} | "
                    f"{statistics.median(ours) / statistics.median(theirs):.2f} |")
    table = "\n".join([f"PyTorch {torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()}), "
                       f"{kernels_line(context)}; one thread each, {args.rounds} rounds:", "",
                       "| model | batch | trainsim step | PyTorch step | trainsim / PyTorch |",
                       "|---|---|---|---|---|"] + rows)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
