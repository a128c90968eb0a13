#!/usr/bin/env python3
"""`make ddp-compare`: PyTorch DistributedDataParallel (gloo, CPU) across
emulated hosts beside trainsim's prediction of it and trainsim's own run.

`trainsim cluster emulate up` (root) makes the hosts; per run, one PyTorch
process per host trains fmnist-mlp (tests/peers/torch_models.py, batch 64
per process, SGD with momentum, one thread each) under DDP with its default
25 MB buckets and times each step, then every process times each layer's
forward, backward and update at once, and rank 0 writes them as a
trainsim.profile/1 of DDP's own compute. `trainsim profile --launcher mpi`
measures the hosts' links (the cluster file); `trainsim predict
--strategies dp-overlap --set bucket_bytes=25MB` prices DDP's step from
the two files; `trainsim run --launcher mpi --strategy dp-overlap` runs
trainsim's own. Prints per run the three steps and the two ratios
(predicted / DDP, DDP / trainsim), then `down`.

Usage: ddp_compare.py TRAINSIM PYTHON [--hosts 4] [--link 1gbit] [--runs 3]
[--steps 60]. PYTHON is an interpreter with torch (make ddp-compare gives
build/peer-venv's). Worker mode (--worker) is what each host runs."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "ddp"
BATCH = 64
PORT = 29517
BUCKET = "25MB"
REPEATS = 50


def median_time(fn, repeats=REPEATS, warmups=5):
    for _ in range(warmups):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def layer_times(torch, model):
    """Each layer of the Sequential, and the loss as trainsim's softmax layer:
    median forward, backward and SGD-with-momentum update seconds."""
    x = torch.rand(BATCH, 1, 28, 28)
    y = torch.randint(0, 10, (BATCH,))
    times = []
    first_params = True
    for layer in model:
        x_in = x.detach().requires_grad_(not first_params)
        out = layer(x_in)
        grad = torch.ones_like(out) / out.numel()

        def forward():
            layer(x_in)

        def backward():
            layer.zero_grad(set_to_none=True)
            if x_in.grad is not None:
                x_in.grad = None
            layer(x_in).backward(grad)

        params = [p for p in layer.parameters()]
        update = 0.0
        if params:
            layer(x_in).backward(grad)
            optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
            update = median_time(optimizer.step)
            first_params = False
        times.append((median_time(forward), median_time(backward) if params or x_in.requires_grad else 0.0, update))
        x = out.detach()
    logits = x.detach().requires_grad_(True)
    loss_fn = torch.nn.functional.cross_entropy

    def loss_backward():
        logits.grad = None
        loss_fn(logits, y).backward()

    times.append((median_time(lambda: loss_fn(logits, y)), median_time(loss_backward), 0.0))
    return times


def worker(a):
    """One host's process: DDP steps, then the layers timed; rank 0 writes both."""
    sys.path.insert(0, os.path.join(HERE, "..", "peers"))
    import torch
    import torch.distributed as dist
    from torch_models import fmnist_mlp

    torch.set_num_threads(1)
    torch.manual_seed(1)
    os.environ.update(MASTER_ADDR=a.master, MASTER_PORT=str(PORT), GLOO_SOCKET_IFNAME="eth0")
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    model = fmnist_mlp()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(BATCH, 1, 28, 28)
    y = torch.randint(0, 10, (BATCH,))
    steps = []
    for _ in range(a.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()  # returns once DDP's AllReduces are done
        optimizer.step()
        steps.append(time.perf_counter() - start)
    dist.barrier()
    layers = layer_times(torch, model)  # every process at once, as trainsim's ranks profile
    dist.barrier()
    if a.rank == 0:
        warm = max(1, a.steps // 5)
        json.dump({"step_s": statistics.median(steps[warm:]), "steps_s": steps, "layers": layers,
                   "torch": torch.__version__}, open(a.out, "w"))
    dist.destroy_process_group()


def run(command, timeout=900):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def torch_profile(trainsim_profile, layers):
    """trainsim's profile of fmnist-mlp with DDP's compute put in: the same
    layers (names, inputs, bytes, flops), PyTorch's times."""
    p = json.load(open(trainsim_profile))
    assert len(p["layers"]) == len(layers), "fmnist-mlp's layers and the PyTorch module's differ"
    for layer, (forward, backward, update) in zip(p["layers"], layers):
        layer.update(forward_s=forward, backward_s=backward, update_s=update)
        layer.pop("forward_fixed_s", None)
        layer.pop("backward_fixed_s", None)
    p["device"] = {"kind": "cpu", "name": "PyTorch eager, 1 thread"}
    p["source"] = "measured"
    return p


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainsim")
    parser.add_argument("python")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--link", default="1gbit")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--master", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:
        return worker(a)
    t, devices = a.trainsim, f"cpu:{a.hosts}"
    run([t, "cluster", "emulate", "up", "--hosts", str(a.hosts), "--link", a.link, "--name", NAME], 120)
    rows = []
    try:
        state = json.load(open(f"/run/trainsim-emulate/{NAME}/state.json"))
        master = state["subnet"].rsplit(".", 1)[0] + ".10"
        folder = tempfile.mkdtemp()
        for r in range(a.runs):
            out = os.path.join(folder, f"ddp-{r}.json")
            workers = [subprocess.Popen(["ip", "netns", "exec", ns, a.python, os.path.abspath(__file__), "x", "x",
                                         "--worker", "--rank", str(k), "--world", str(a.hosts), "--master", master,
                                         "--steps", str(a.steps), "--out", out], stderr=subprocess.PIPE, text=True)
                       for k, ns in enumerate(state["namespaces"])]
            for k, w in enumerate(workers):
                if w.wait(timeout=900) != 0:
                    sys.exit(f"DDP rank {k} failed:\n{w.stderr.read()[-3000:]}")
            ddp = json.load(open(out))
            profile, cluster = os.path.join(folder, f"p{r}.json"), os.path.join(folder, f"c{r}.json")
            run([t, "profile", "--launcher", "mpi", "--emulated", NAME, "--model", "fmnist-mlp", "--device", devices,
                 "--out", profile, "--cluster-out", cluster, "--quiet"])
            priced = os.path.join(folder, f"torch-p{r}.json")
            json.dump(torch_profile(profile, ddp["layers"]), open(priced, "w"))
            predicted = json.loads(run([t, "predict", "--profile", priced, "--cluster", cluster, "--strategies",
                                        "dp-overlap", "--set", f"bucket_bytes={BUCKET}", "--method", "simulated",
                                        "--json", "-"]).stdout)["results"][0]["iteration_s"]
            own = json.loads(run([t, "run", "--launcher", "mpi", "--emulated", NAME, "--model", "fmnist-mlp",
                                  "--strategy", "dp-overlap", "--set", f"bucket_bytes={BUCKET}", "--devices", devices,
                                  "--iterations", str(a.steps), "--momentum", "0.9", "--learning-rate", "0.01",
                                  "--json", "-", "--quiet"]).stdout)["iteration_s"]
            rows.append((ddp["step_s"], predicted, own))
            print(f"run {r + 1}: DDP {ddp['step_s'] * 1e3:.2f} ms, predicted {predicted * 1e3:.2f} ms, "
                  f"trainsim dp-overlap {own * 1e3:.2f} ms (torch {ddp['torch']})", file=sys.stderr)
    finally:
        subprocess.run([t, "cluster", "emulate", "down", "--name", NAME], capture_output=True)
    print(f"fmnist-mlp, batch {BATCH} per process, {a.hosts} emulated hosts at {a.link}, DDP (gloo, "
          f"{BUCKET} buckets) against trainsim's dp-overlap with the same buckets; {a.runs} runs:\n")
    print("| run | DDP step (measured) | DDP step (predicted) | predicted / measured | trainsim dp-overlap "
          "(measured) | DDP / trainsim |")
    print("|---|---|---|---|---|---|")
    for r, (ddp_s, predicted_s, own_s) in enumerate(rows):
        print(f"| {r + 1} | {ddp_s * 1e3:.2f} ms | {predicted_s * 1e3:.2f} ms | {predicted_s / ddp_s:.3f} | "
              f"{own_s * 1e3:.2f} ms | {ddp_s / own_s:.3f} |")


if __name__ == "__main__":
    main()
