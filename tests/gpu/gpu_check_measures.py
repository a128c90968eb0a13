"""gpu_check.py's sections that measure the GPU and predict from it: the
training step beside PyTorch's, the profiles, the GPU as a cluster (and
the predictions beside the strategies' runs), and validate."""

import json
import os
import shutil
import statistics
import sys

from gpu_check_util import forget, last_line, num, spread, step_s, validation_lines

MODELS = ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet20", "fortunes-gpt", "fortunes-lstm"]
BATCHES = [64, 1024]
RUNS = 3
# validate on four workers sharing the GPU: every strategy on fmnist-cnn,
# three on the ResNet (both on Fashion-MNIST, like the runs above).
VALIDATED = [("fmnist-cnn", "all"), ("fmnist-resnet20", "single,dp-ring,gpipe")]


def torch_steps(model_name, batch, params, tf32=False, steps=50, warmups=10):
    """Median of PyTorch's eager training steps, CUDA events around each; TF32 products when `tf32`."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
    from torch_models import MODELS as TORCH_MODELS, trainable_parameters
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True  # trainsim picks cuDNN's algorithms by timing them too
    model = TORCH_MODELS[model_name]().cuda()
    count = trainable_parameters(model)
    if params is not None and count != params:  # None: trainsim's count unknown (zoo show failed)
        raise ValueError(f"{model_name}: PyTorch's model has {count} parameters, trainsim's {params}")
    if model_name.startswith("fortunes"):  # 64 bytes in, the next byte at every position out
        x = torch.randint(0, 256, (batch, 64), device="cuda")
        y = torch.zeros((batch, 64), dtype=torch.long, device="cuda")
    else:  # Fashion-MNIST images
        x = torch.rand((batch, 1, 28, 28), device="cuda") * 2 - 1
        y = torch.zeros(batch, dtype=torch.long, device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for i in range(warmups + steps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=False)
        logits = model(x)
        loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
        opt.step()
        stop.record()
        torch.cuda.synchronize()
        if i >= warmups:
            times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times), torch.__version__


def step_table(ck, ours, params, tf32, torch_state):
    """The table's rows of trainsim's step beside PyTorch's; torch_state
    carries PyTorch's version and the one error that stopped it."""
    rows = []
    for model in MODELS:
        for batch in BATCHES:
            theirs = []
            if torch_state.get("error") is None:
                try:
                    for _ in range(RUNS):
                        t, torch_state["version"] = torch_steps(model, batch, params.get(model), tf32)
                        theirs.append(t)
                except ImportError:
                    torch_state["error"] = "no PyTorch"
                except ValueError as e:  # the models disagree: a finding, the others still timed
                    ck.failed = True
                    rows.append(f"- {e}")
                except Exception as e:  # PyTorch without CUDA, or built for another CUDA
                    first = (str(e).splitlines() or [""])[0][:200]
                    torch_state["error"] = f"PyTorch failed: {type(e).__name__}: {first}"
            mine = ours.get((model, batch, int(tf32)), [])
            ratio = f"{statistics.median(mine) / statistics.median(theirs):.2f}" if mine and theirs else "n/a"
            rows.append(f"| {model} | {batch} | {spread(mine) if mine else 'failed'} | "
                        f"{spread(theirs) if theirs else torch_state.get('error') or 'no PyTorch'} | {ratio} |")
    return rows


def steps(ck):
    ck.report += ["", "## Training step: trainsim's GPU device and PyTorch", "",
                  f"trainsim: `cuda_step_bench`, {RUNS} repetitions, each the mean of its CUDA-event-timed "
                  "passes (every forward with the loss, every backward, momentum SGD with the gradients zeroed) "
                  f"after 10 warm-up passes. PyTorch: {RUNS} runs, each the median of 50 eager steps "
                  "(CUDA events around zero_grad, forward, loss, backward and SGD step) after 10 warm-ups. "
                  "fp32 with TF32 off, cuDNN's algorithms chosen by timing them (cudnn.benchmark), the batch "
                  "resident on the GPU.", "",
                  "| model | batch | trainsim step | PyTorch step | trainsim / PyTorch |", "|---|---|---|---|---|"]
    bench = ck.run([os.path.join(ck.args.build, "tests", "bench", "cuda_step_bench"), "--benchmark_format=json",
                    f"--benchmark_repetitions={RUNS}", "--benchmark_min_time=0.5"], timeout=300)
    ck.failed |= bench.returncode != 0
    with open(os.path.join(ck.out, "cuda_step_bench.json"), "w") as f:
        f.write(bench.stdout)
    ours = {}
    if bench.returncode == 0:
        for b in json.loads(bench.stdout)["benchmarks"]:
            if b.get("run_type") == "iteration" and not b.get("error_occurred"):
                _, model, batch, precision = b["name"].split("/")[:4]  # precision 0 fp32, 1 TF32, 2 bf16
                ours.setdefault((model.replace("_", "-"), int(batch), int(precision)), []).append(b["real_time"] * 1e-6)
    params = {}
    for m in MODELS:
        shown = ck.run([ck.trainsim, "zoo", "show", m, "--json"], timeout=30)
        ck.failed |= shown.returncode != 0
        if shown.returncode == 0:
            params[m] = json.loads(shown.stdout)["param_count"]
    torch_state = {}
    ck.report += step_table(ck, ours, params, False, torch_state)
    ck.flush()
    ck.report += ["", "With TF32 products on both sides (trainsim's `CudaPrecision::tf32`, `trainsim run --precision "
                  "tf32`: cuBLAS's TF32 tensor-op math and cuDNN's default math; PyTorch's "
                  "`torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`), otherwise as above:",
                  "", "| model | batch | trainsim step | PyTorch step | trainsim / PyTorch |", "|---|---|---|---|---|"]
    ck.report += step_table(ck, ours, params, True, torch_state)
    ck.report += ["", "trainsim's step with bf16 products (`CudaPrecision::bf16`, `trainsim run --precision bf16`: "
                  "each cuBLAS product's inputs rounded to bfloat16 on the GPU, fp32 sums; cuDNN's "
                  "convolutions as under TF32) beside its fp32 and TF32 steps, the same benchmark (PyTorch has no "
                  "such mode for fp32 tensors on the GPU):", "",
                  "| model | batch | fp32 | TF32 | bf16 products | bf16 / TF32 |", "|---|---|---|---|---|---|"]
    for model in MODELS:
        for batch in BATCHES:
            times = [ours.get((model, batch, p), []) for p in (0, 1, 2)]
            ratio = f"{statistics.median(times[2]) / statistics.median(times[1]):.2f}" if times[1] and times[2] else "n/a"
            ck.report.append(f"| {model} | {batch} | " + " | ".join(spread(s) if s else "failed" for s in times) +
                             f" | {ratio} |")
    if torch_state.get("version"):
        ck.report += ["", f"PyTorch {torch_state['version']}."]


def profiles(ck):
    ck.report += ["", "## Profiles", "",
                  f"`trainsim profile --device cuda:0` (20 timed passes after 3 warm-ups), {RUNS} runs; the "
                  "step here is the sum of the layers' medians.", ""]
    for model in MODELS:
        for batch in BATCHES:
            times = []
            for r in range(RUNS):
                path = os.path.join(ck.out, f"{model}-b{batch}-run{r + 1}.json")
                forget(path)
                done = ck.run([ck.trainsim, "profile", "--device", "cuda:0", "--model", model, "--batch", str(batch),
                               "--out", path, "--quiet"], timeout=120)
                if done.returncode != 0:
                    ck.failed = True
                    continue
                with open(path) as f:
                    times.append(step_s(json.load(f)))
            ck.report.append(f"- {model}, batch {batch}: {spread(times) if times else 'failed'}")
            ck.flush()
    for model in MODELS:
        path = os.path.join(ck.out, f"{model}-b{BATCHES[-1]}-run1.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            layers = json.load(f)["layers"]
        ck.report += ["", f"{model}, batch {BATCHES[-1]}, run 1, per layer (µs):", "",
                      "| layer | forward | backward | update |", "|---|---|---|---|"]
        ck.report += [f"| {l['name']} | {l['forward_s'] * 1e6:.1f} | {l['backward_s'] * 1e6:.1f} | "
                      f"{l.get('update_s', 0) * 1e6:.1f} |" for l in layers]


def cluster_line(workers, c):
    d, h, col, link = c["device"], c["host"], c["collective"], c["intra_link"]
    if workers > 1:  # the workers' collectives run on the host, their gradients copied down and up
        # (absent fields as the simulator reads them: the link's figures, no packing)
        hop_bytes_per_s = col.get('hop_bytes_per_s', link['bandwidth_bytes_per_s'])
        hop_latency_s = col.get('hop_latency_s', link['latency_s'])
        collective = (f"a collective's ring hop on the host {hop_bytes_per_s / 1e9:.1f} GB/s after "
                      f"{hop_latency_s * 1e6:.1f} µs, its sums {col['reduce_bytes_per_s'] / 1e9:.1f} GB/s, "
                      f"the gradient's copies down and up with the packing "
                      f"{col.get('pack_bytes_per_s', 0) / 1e9:.1f} GB/s after "
                      f"{col.get('pack_latency_s', 0) * 1e6:.1f} µs a call")
    else:
        collective = f"on-device sum {col['reduce_bytes_per_s'] / 1e9:.0f} GB/s"
    return (f"- {workers} worker(s): {d['peak_flops_per_s'] / 1e12:.2f} TFLOP/s fp32 and "
            f"{d['memory_bytes_per_s'] / 1e9:.0f} GB/s memory, a worker alone; a boundary between workers "
            f"(two device copies and an event) {link['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s after "
            f"{link['latency_s'] * 1e6:.1f} µs; host link {h['link_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s after "
            f"{h['link_latency_s'] * 1e6:.1f} µs; launch + sync {h['stream_sync_s'] * 1e6:.1f} µs; {collective}" +
            (f"; fmnist-cnn's pass with all {workers} at once at {d['compute_rate_while_shared']:.2f} of its rate alone"
             if 'compute_rate_while_shared' in d else "") + host_per_op_text(d.get("host_per_op")))


def host_per_op_text(host):
    """A worker's host time per compute op by kind (fixed + per layer), as the executor took it."""
    if not host:
        return ""
    parts = [f"{kind} {t['fixed_s'] * 1e6:.1f} + {t['per_layer_s'] * 1e6:.1f}/layer µs"
             for kind, t in host.items()]
    return "; the host per compute op (single's ops through the executor): " + ", ".join(parts)


def cluster(ck):
    ck.report += ["", "## The GPU as a cluster", ""]
    for workers in (1, 4):
        path = os.path.join(ck.out, f"cuda{workers}-measured.json")
        forget(path)
        done = ck.run([ck.trainsim, "profile", "--device", f"cuda:0x{workers}", "--model", "fmnist-cnn", "--out",
                       os.devnull, "--cluster-out", path, "--quiet"], timeout=180)
        if done.returncode != 0:
            ck.failed = True
            continue
        with open(path) as f:
            ck.report.append(cluster_line(workers, json.load(f)))
        ck.flush()
    cluster4 = os.path.join(ck.out, "cuda4-measured.json")
    profile = os.path.join(ck.out, "fmnist-cnn-b64-run1.json")
    if not (os.path.exists(cluster4) and os.path.exists(profile)):
        ck.report += ["", "(No predictions: they take the profiles section's fmnist-cnn at batch 64 and the 4-worker "
                      "cluster above.)"]
        return
    done = ck.run([ck.trainsim, "predict", "--profile", profile, "--cluster", cluster4, "--method", "both"], timeout=120)
    ck.failed |= done.returncode != 0
    ck.report += ["", "## Predictions from these measurements (fmnist-cnn, batch 64 per worker, 4 workers "
                  "sharing the GPU: the simulated rows share it, the analytic ones are bounded by its work)",
                  "", "```", done.stdout.strip(), "```"]
    measured = ck.measured()
    ck.report += ["", "Each strategy's run above beside its simulation from this profile and cluster, the four "
                  "workers sharing the GPU (`shared_devices` 1 and the measured `compute_rate_while_shared`) "
                  "and, as before they did, priced as four GPUs (the same cluster without them):", "",
                  "| strategy | measured | simulated, one GPU shared | error | simulated as four GPUs | error |",
                  "|---|---|---|---|---|---|"]
    if not measured:
        ck.report.append("| (no runs: the strategies section keeps them under --out) | | | | | |")
    with open(cluster4) as f:
        apart = json.load(f)
    apart.pop("shared_devices", None)
    apart["device"].pop("compute_rate_while_shared", None)
    cluster_apart = os.path.join(ck.out, "cuda4-apart.json")
    with open(cluster_apart, "w") as f:
        json.dump(apart, f, indent=2)
    simulated = {}
    for name, path in (("shared", cluster4), ("apart", cluster_apart)):
        done = ck.run([ck.trainsim, "predict", "--profile", profile, "--cluster", path, "--method", "simulated",
                       "--iterations", "30", "--json", "-"], timeout=120)
        ck.failed |= done.returncode != 0
        if done.returncode == 0:
            simulated[name] = {r["strategy"]: r["iteration_s"] for r in json.loads(done.stdout)["results"]}
    for strategy, seconds in measured.items():
        cells = []
        for name in ("shared", "apart"):
            s = simulated.get(name, {}).get(strategy)
            cells += [f"{s * 1e3:.3f} ms", f"{(s - seconds) / seconds * 100:+.1f}%"] if s else ["?", "?"]
        ck.report.append(f"| {strategy} | {seconds * 1e3:.3f} ms | " + " | ".join(cells) + " |")


def validate(ck, validated, batches):
    """validate on virtual GPU workers: each strategy's runs beside its
    predictions from profiles and clusters measured in the same rounds, at
    each batch per worker. Two rounds at least, more while the budget lasts;
    validate rewrites its JSON after each round, so a run stopped at the time
    limit keeps its rounds."""
    budget = ck.args.validate_budget
    ck.report += ["", "## validate on four workers sharing the GPU", "",
                  f"`trainsim validate --devices cuda:0x4 --batch B --rounds 2 --max-rounds 5 --budget {budget} "
                  f"--iterations {ck.args.validate_iterations} --repeats 10`, B each of {', '.join(map(str, batches))} "
                  "(errors: (predicted − measured) / measured; the prediction shares the GPU among the workers):", ""]
    for (model, strategies), batch in [(v, b) for v in validated for b in batches]:
        path = os.path.join(ck.out, f"validate-{model}-b{batch}.json")
        # What its predictions read, for simulate to replay them elsewhere.
        measured = [os.path.join(ck.out, f"validate-{model}-b{batch}-{what}.json") for what in ("profile", "cluster")]
        traces = os.path.join(ck.out, f"validate-{model}-b{batch}-traces")  # each strategy's, simulated and measured
        for stale in [path] + measured:
            forget(stale)
        shutil.rmtree(traces, ignore_errors=True)
        done = ck.run([ck.trainsim, "validate", "--model", model, "--devices", "cuda:0x4", "--strategies", strategies,
                       "--batch", str(batch), "--rounds", "2", "--max-rounds", "5", "--budget", str(budget),
                       "--iterations", str(ck.args.validate_iterations), "--repeats", "10", "--json", path, "--profile-out", measured[0],
                       "--cluster-out", measured[1], "--trace-dir", traces, "--quiet"] + ck.data,
                      timeout=budget + 120)
        ck.failed |= done.returncode != 0
        if not os.path.exists(path):
            ck.report.append(f"- {model}: failed: {last_line(done)}")
            continue
        if done.returncode != 0:
            ck.report.append(f"- {model}: exit {done.returncode} ({last_line(done)}); the rounds its JSON holds:")
        with open(path) as f:
            ck.report += validation_lines(model, json.load(f))
        ck.flush()
