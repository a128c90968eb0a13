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
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from gpu_check_gpus import several_gpus

MODELS = ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet20", "fortunes-gpt", "fortunes-lstm"]
# Every strategy run by the interpreter on four workers sharing the GPU.
STRATEGIES = ["single", "dp-ps", "dp-ring", "dp-overlap", "pipesgd", "cgdp", "pipedream", "pipedream-sync", "dualpipe",
              "gpipe", "dsp", "parallax"]
# validate on four workers sharing the GPU: every strategy on fmnist-cnn,
# three on the ResNet (both on Fashion-MNIST, like the runs above).
VALIDATED = [("fmnist-cnn", "all"), ("fmnist-resnet20", "single,dp-ring,gpipe")]
BATCHES = [64, 1024]
# The check's parts: the conformance tests; the same under memcheck (up to
# 4 min: a part of its own, so a short loan of a GPU can leave it for
# later); every strategy on four workers (with where a worker's iteration
# goes); the training step beside PyTorch's; the profiles; the GPU as a
# cluster and the predictions from it; validate; what needs two GPUs or
# more (gpu_check_gpus.py), reported as not run on a machine with one.
SECTIONS = ["tests", "memcheck", "strategies", "steps", "profiles", "cluster", "validate", "gpus"]
RUNS = 3
# Under memcheck, every kernel of every layer alone (the whole networks' five
# steps take minutes there), the interpreter's range passes on a small
# pipeline with batch normalization, the device store, GPipe's
# micro-batches adding into and stepping the store's arrays from streams of
# their own, PipeDream's stashes copied there and SpecTrain's predictions
# made there.
MEMCHECK_TESTS = ("CudaNetwork.EveryLayer*:CudaNetwork.ABatchNorm*:CudaNetwork.AnAdd*:CudaNetwork.Transformer*:"
                  "CudaEmbeddingBag.Conforms*:CudaEmbeddingBag.ARangePass*:"
                  "CudaNetwork.ResidualNetworkLayers*:CudaNetwork.LstmLayers*:CudaNetwork.ATimedPass*:CudaDevice.BatchNorms*:"
                  "CudaDeviceStore.*:EveryStrategy/CudaDeviceStrategies.*/gpipe:"
                  "EveryStrategy/CudaDeviceStrategies.*/pipedream:EveryStrategy/CudaDeviceStrategies.*/dualpipe_spectrain"
                  # not the test that fills the GPU's memory: the sanitizer needs room of its own
                  "-CudaDeviceStore.AnArrayTheGpuHasNoRoomForFreesTheIdleBuffersFirst")


def run(cmd, log, check=True, timeout=None):
    log.append("$ " + " ".join(cmd))
    started = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as e:
        done = subprocess.CompletedProcess(cmd, 127, "", str(e))
    except subprocess.TimeoutExpired as e:  # its output comes as bytes, whatever text=True says
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        done = subprocess.CompletedProcess(cmd, 124, out, f"timed out after {timeout} s")
    log.append(f"(exit {done.returncode}, {time.time() - started:.1f} s)")
    if done.returncode != 0 and check:
        log.append(done.stdout[-4000:] + done.stderr[-4000:])
    return done


GTEST_TEST_LINE = re.compile(r"^\[  (FAILED|SKIPPED) +\] ([A-Za-z_][\w/.]*)")


def gtest_summary(output):
    """gtest's totals (each run's, once, with how many runs gave them), then
    each test that failed or was skipped, named once over the repeats."""
    lines = output.splitlines()
    totals = [l[len("[  PASSED  ] "):] for l in lines if l.startswith("[  PASSED  ]")]
    named = {"FAILED": [], "SKIPPED": []}
    for line in lines:
        m = GTEST_TEST_LINE.match(line)
        if m and m.group(2) not in named[m.group(1)]:
            named[m.group(1)].append(m.group(2))
    if not totals and not any(named.values()):
        return " ".join(output.strip().splitlines()[-1:])
    parts = [f"passed {t}" + (f" (×{totals.count(t)})" if totals.count(t) > 1 else "") for t in dict.fromkeys(totals)]
    parts += [f"{kind.lower()} {len(tests)}: {', '.join(tests)}" for kind, tests in named.items() if tests]
    return "; ".join(parts)


def step_s(profile):
    return sum(l["forward_s"] + l["backward_s"] + l.get("update_s", 0.0) for l in profile["layers"])


DEVICE_TID = 6  # a worker's thread of its compute ops' work on the GPU (exec_chrome_trace), after the plan's 6 streams


def compute_busy_s(trace_path, first, tid=0):
    """Median over iterations from `first` of the time worker 0's compute stream spends in its ops (tid 0: the
    host's, queuing their kernels; DEVICE_TID: their kernels on the GPU)."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    busy = {}
    for e in events:
        it = e.get("args", {}).get("iteration")
        if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == tid and it is not None and it >= first:
            busy[it] = busy.get(it, 0.0) + e["dur"] * 1e-6
    return statistics.median(busy.values()) if busy else None


def spread(values):
    return f"{statistics.median(values) * 1e3:.3f} ms (runs {', '.join(f'{v * 1e3:.3f}' for v in values)})"


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
    if count != params:
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


def validation_lines(model, v):
    """validate's JSON as the report's table of each strategy."""
    lines = [f"{model}, batch 64 per worker, {v['rounds']} rounds ({v['stopped']}); median |error| simulated "
             f"{v['median_abs_error_simulated'] * 100:.1f}%, analytic {v['median_abs_error_analytic'] * 100:.1f}%; "
             "GPU busy: each worker's kernels over an iteration, the median over the workers; memory: the "
             "analytic prediction's fullest device and the most a worker held (MiB):", "",
             "| strategy | measured | simulated | error | analytic | error | verdict | GPU busy | memory predicted, held |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in v["results"]:
        if r.get("skipped"):
            lines.append(f"| {r['strategy']} | not run: {r['skipped']} | | | | | | | |")
            continue
        busy = f"{r['device_busy'] * 100:.0f}%" if r.get("device_busy") is not None else "not timed"
        held = r.get("measured_memory_bytes")
        memory = f"{r.get('predicted_memory_bytes', 0) / 2**20:.1f}, " + ("?" if held is None else f"{held / 2**20:.1f}")
        lines.append(f"| {r['strategy']} | {r['measured_s'] * 1e3:.3f} ms | {r['predicted_simulated_s'] * 1e3:.3f} ms | "
                     f"{r['error_simulated'] * 100:+.1f}% | {r['predicted_analytic_s'] * 1e3:.3f} ms | "
                     f"{r['error_analytic'] * 100:+.1f}% | {r['verdict']} | {busy} | {memory} |")
    return lines + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="trainsim's build folder")
    parser.add_argument("--out", default="docs/gpu-check", help="where the report and measurements go")
    parser.add_argument("--commit", default="unknown", help="the trainsim commit measured")
    parser.add_argument("--data-dir", default="", help="Fashion-MNIST's folder for trainsim run (default: Debian's)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="what to run, in this order, separated by commas (a subset of the default: " +
                             ", ".join(SECTIONS) + ")")
    parser.add_argument("--test-repeat", type=int, default=RUNS,
                        help=f"how many times the tests section runs the GPU tests (default {RUNS})")
    parser.add_argument("--validate-models", default=",".join(m for m, _ in VALIDATED),
                        help="the models the validate section validates, separated by commas (a subset of the "
                             "default: " + ", ".join(m for m, _ in VALIDATED) + ")")
    parser.add_argument("--validate-budget", type=int, default=200,
                        help="seconds after which validate starts no round, per model (default 200; the check "
                             "stops a model's validate 100 s later)")
    args = parser.parse_args()
    validated = [(m, s) for m, s in VALIDATED if m in args.validate_models.split(",")]
    unknown = set(args.validate_models.split(",")) - {m for m, _ in VALIDATED}
    if unknown or args.test_repeat < 1 or args.validate_budget < 1:
        print(f"gpu-check: --validate-models takes {', '.join(m for m, _ in VALIDATED)}; --test-repeat and "
              f"--validate-budget at least 1", file=sys.stderr)
        return 2
    sections = set(args.sections.split(","))
    if not sections <= set(SECTIONS):
        print(f"gpu-check: --sections names {', '.join(sorted(sections - set(SECTIONS)))}; the sections are "
              f"{', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    trainsim = os.path.join(args.build, "tools", "trainsim")
    log, report, failed = [], [], False

    def flush():
        """The report so far, with its commands, so a check cut short keeps what it measured."""
        with open(os.path.join(args.out, "gpu-check.md"), "w") as f:
            f.write("\n".join(report + ["", "## Commands", "", "```"] + log + ["```", ""]))

    smi = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], log)
    gpu = smi.stdout.strip()
    if smi.returncode != 0 or not gpu:
        print(f"gpu-check: no GPU answers here ({smi.stderr.strip() or 'nvidia-smi printed nothing'})",
              file=sys.stderr)
        return 2
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    measured = {}  # strategy -> its run's iteration seconds, for the predictions of the cluster section
    listed = run([trainsim, "devices"], log, check=False)
    nccl = next((line for line in listed.stdout.splitlines() if line.startswith("NCCL")),
                f"NCCL: not listed by trainsim devices (exit {listed.returncode})")
    report += ["# GPU check", "", f"- GPU, driver, memory: {gpu}", f"- {nccl}", f"- trainsim commit: {args.commit}",
               f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
               f"- sections: {', '.join(s for s in SECTIONS if s in sections)}"]
    if "tests" in sections:
        report += ["", "## Tests", ""]
        tests = [("gpu_tests", [f"--gtest_repeat={args.test_repeat}"]),
                 ("exec_tests", ["--gtest_filter=CudaNetwork*:Devices*"]),
                 ("tools_tests", ["--gtest_filter=ProfileDeviceCli*"])]
        for binary, flags in tests:  # a hang ends here, not with the loan
            done = run([os.path.join(args.build, "tests", binary)] + flags, log, timeout=120 * args.test_repeat)
            failed |= done.returncode != 0
            report.append(f"- `{binary} {' '.join(flags)}`: exit {done.returncode}: {gtest_summary(done.stdout)}")
            if done.returncode != 0:
                report.append("```\n" + done.stdout[-3000:] + "\n```")

    flush()
    if "memcheck" in sections:
        report += ["", "## Memcheck", ""]
        sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        if not os.path.exists(sanitizer):
            report.append(f"- not run: no compute-sanitizer here ({sanitizer})")
        else:
            done = run([sanitizer, "--tool", "memcheck", "--error-exitcode", "1",
                        os.path.join(args.build, "tests", "gpu_tests"), "--gtest_filter=" + MEMCHECK_TESTS], log,
                       timeout=240)
            failed |= done.returncode != 0
            summary = [l for l in (done.stdout + done.stderr).splitlines() if "ERROR SUMMARY" in l]
            report.append(f"- `compute-sanitizer --tool memcheck gpu_tests --gtest_filter={MEMCHECK_TESTS}`: exit "
                          f"{done.returncode}: " + "; ".join(dict.fromkeys(summary[-1:] + [gtest_summary(done.stdout)])))

    flush()
    if "strategies" in sections:
        report += ["", "## Every strategy on four workers sharing the GPU", "",
                   "`trainsim run --model fmnist-cnn --devices cuda:0x4 --batch 64 --iterations 30` (fmnist-cnn on "
                   "Fashion-MNIST, momentum SGD): each worker's forwards, backwards, gradient sums and SGD steps on "
                   "the GPU, its messages on the host; each worker's most device memory held (its networks and "
                   "store, of a quarter of the GPU's).", "",
                   "| strategy | first loss | last loss | iteration | memory per worker (MiB) |", "|---|---|---|---|---|"]

        def run_row(label, given):
            """One run on four workers sharing the GPU as a row of the table; its iteration, or None."""
            nonlocal failed
            done = run([trainsim, "run", *given, "--devices", "cuda:0x4", "--batch", "64", "--iterations", "30",
                        "--json", "-", "--quiet", "--no-evaluate"], log, timeout=300)
            failed |= done.returncode != 0
            if done.returncode != 0:
                report.append(f"| {label} | failed: {(done.stderr.strip().splitlines() or ['?'])[-1]} | | | |")
                return None
            j = json.loads(done.stdout)
            losses = j["loss_per_iteration"]
            memory = ", ".join("?" if m["peak_bytes"] is None else f"{m['peak_bytes'] / 2**20:.1f}"
                               for m in j.get("device_memory", []))
            report.append(f"| {label} | {losses[0]:.3f} | {losses[-1]:.3f} | {j['iteration_s'] * 1e3:.2f} ms | "
                          f"{memory} |")
            return j["iteration_s"]

        for strategy in STRATEGIES:
            iteration = run_row(strategy, ["--model", "fmnist-cnn", "--strategy", strategy] + data)
            if iteration is not None:
                measured[strategy] = iteration
        # text-bag's sparse table: each backward's rows built on the host from
        # the ids and dy it brings back, the servers' or the ring's sums
        # stepped there; its dense layers on the GPU.
        report += ["", "text-bag under Parallax's three modes, the same way (`--dataset synthetic`: its 50,000 x 64 "
                   "table's gradient as sparse rows, the dense layers' on the GPU):", "",
                   "| mode | first loss | last loss | iteration | memory per worker (MiB) |", "|---|---|---|---|---|"]
        for mode in ("hybrid", "ps", "ar"):
            run_row(mode, ["--model", "text-bag", "--strategy", "parallax", "--set", f"mode={mode}", "--dataset",
                           "synthetic"])

        # Where a GPU worker's iteration goes: the time its compute stream's ops
        # take per iteration, beside the iteration; the rest is time between them.
        report += ["", "Where the iteration goes (`--trace`): per iteration from the 8th, the median time worker 0's "
                   "compute stream spends in its ops on the host (queuing their kernels; the rest of the iteration is "
                   "between them) and its forwards' and backwards' kernels on the GPU (CUDA events, from each op's "
                   "first kernel to its last), and each op kind's median on the host "
                   "(`tests/bench/trace_ops.py --from 8`, ms):", ""]
        for strategy in ("single", "dp-ring", "gpipe"):
            trace = os.path.join(args.out, f"trace-{strategy}.json")
            done = run([trainsim, "run", "--model", "fmnist-cnn", "--strategy", strategy, "--devices", "cuda:0x4",
                        "--batch", "64", "--iterations", "30", "--json", "-", "--quiet", "--no-evaluate", "--trace", trace] + data, log,
                       timeout=300)
            failed |= done.returncode != 0
            if done.returncode != 0:
                report.append(f"- {strategy}: failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            ops = run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench",
                                                    "trace_ops.py"), trace, "--from", "8"], log)
            kinds = ops.stdout.strip().split(": ", 1)[-1] if ops.returncode == 0 else "trace_ops.py failed"
            host, gpu = compute_busy_s(trace, 8), compute_busy_s(trace, 8, DEVICE_TID)
            report.append(f"- {strategy}: iteration {json.loads(done.stdout)['iteration_s'] * 1e3:.2f} ms, worker 0 "
                          f"in its compute ops {host * 1e3 if host is not None else float('nan'):.2f} ms of it on the "
                          "host, their kernels " + (f"{gpu * 1e3:.2f} ms on the GPU" if gpu is not None else
                                                    "not timed (no GPU in the trace)") + f"; {kinds}")

        # The CUDA API calls and kernels of `single`'s run, where Nsight Systems
        # is installed: which calls (copies, synchronizations, allocations) the
        # iteration's time goes to, beyond the kernels.
        nsys = shutil.which("nsys") or next((p for p in ("/usr/local/cuda/bin/nsys", "/opt/nvidia/nsight-systems/bin/nsys")
                                             if os.path.exists(p)), None)
        if nsys:
            base = os.path.join(args.out, "nsys-single")
            done = run([nsys, "profile", "--force-overwrite=true", "--trace=cuda", "-o", base, trainsim, "run", "--model",
                        "fmnist-cnn", "--strategy", "single", "--devices", "cuda:0", "--batch", "64", "--iterations", "30",
                        "--quiet", "--no-evaluate"] + data, log, timeout=300)
            stats = run([nsys, "stats", "--report", "cuda_api_sum,cuda_gpu_kern_sum", "--format", "csv", base + ".nsys-rep"],
                        log, check=False) if done.returncode == 0 else done
            report += ["", "`single` on `cuda:0` under Nsight Systems (30 iterations; `nsys stats --report "
                       "cuda_api_sum,cuda_gpu_kern_sum`, the first 12 rows of each):", "", "```"]
            for block in stats.stdout.strip().split("\n\n"):
                report += block.splitlines()[:13] + [""]
            report.append("```")
        else:
            report += ["", "(Nsight Systems is not installed here: no CUDA API breakdown of `single`.)"]

        for precision in ("tf32", "bf16"):
            done = run([trainsim, "run", "--model", "fmnist-cnn", "--strategy", "single", "--devices", "cuda:0",
                        "--precision", precision, "--batch", "64", "--iterations", "30", "--json", "-", "--quiet", "--no-evaluate"] + data,
                       log, timeout=300)
            failed |= done.returncode != 0
            if done.returncode == 0:
                losses = json.loads(done.stdout)["loss_per_iteration"]
                report += ["", f"With `--precision {precision}`, `single` on `cuda:0` (one worker): first loss "
                           f"{losses[0]:.3f}, last {losses[-1]:.3f}, iteration "
                           f"{json.loads(done.stdout)['iteration_s'] * 1e3:.2f} ms."]
            else:
                report += ["", f"`--precision {precision}` failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"]

        # One process per worker (--launcher mpi: mpirun starts the ranks, their
        # messages and AllReduce over MPI on the host), both workers on the GPU,
        # beside the same run's two workers in one process.
        if shutil.which("mpirun"):
            dp_ring = ["run", "--model", "fmnist-cnn", "--strategy", "dp-ring", "--devices", "cuda:0x2", "--batch", "64",
                    "--iterations", "30", "--quiet", "--no-evaluate"] + data
            runs = {}
            for name, extra in (("threads", []), ("ranks", ["--launcher", "mpi"])):
                path = os.path.join(args.out, f"dp-ring-{name}.json")
                done = run([trainsim] + dp_ring + ["--json", path] + extra, log, timeout=300)
                failed |= done.returncode != 0
                if done.returncode == 0:
                    with open(path) as f:
                        runs[name] = json.load(f)
                else:
                    report += ["", f"dp-ring on `cuda:0x2` ({name}) failed: "
                               f"{(done.stderr.strip().splitlines() or ['?'])[-1]}"]
            if len(runs) == 2:
                a, b = runs["threads"]["loss_per_iteration"], runs["ranks"]["loss_per_iteration"]
                gap = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
                report += ["", f"dp-ring on `cuda:0x2`, its two workers as processes (`--launcher mpi`) beside threads "
                           f"of one process: last loss {b[-1]:.3f} and {a[-1]:.3f}, largest relative gap of a loss "
                           f"{gap:.1e}; iteration {runs['ranks']['iteration_s'] * 1e3:.2f} ms and "
                           f"{runs['threads']['iteration_s'] * 1e3:.2f} ms."]
        else:
            report += ["", "(mpirun is not installed here: no GPU workers across processes.)"]

    flush()
    if "steps" in sections:
        report += ["", "## Training step: trainsim's GPU device and PyTorch", "",
                   f"trainsim: `cuda_step_bench`, {RUNS} repetitions, each the mean of its CUDA-event-timed "
                   "passes (every forward with the loss, every backward, momentum SGD with the gradients zeroed) "
                   f"after 10 warm-up passes. PyTorch: {RUNS} runs, each the median of 50 eager steps "
                   "(CUDA events around zero_grad, forward, loss, backward and SGD step) after 10 warm-ups. "
                   "fp32 with TF32 off, cuDNN's algorithms chosen by timing them (cudnn.benchmark), the batch "
                   "resident on the GPU.", "",
                   "| model | batch | trainsim step | PyTorch step | trainsim / PyTorch |", "|---|---|---|---|---|"]
        bench = run([os.path.join(args.build, "tests", "bench", "cuda_step_bench"), "--benchmark_format=json",
                     f"--benchmark_repetitions={RUNS}", "--benchmark_min_time=0.5"], log)
        failed |= bench.returncode != 0
        ours = {}
        if bench.returncode == 0:
            for b in json.loads(bench.stdout)["benchmarks"]:
                if b.get("run_type") == "iteration" and not b.get("error_occurred"):
                    _, model, batch, precision = b["name"].split("/")[:4]  # precision 0 fp32, 1 TF32, 2 bf16
                    ours.setdefault((model.replace("_", "-"), int(batch), int(precision)), []).append(b["real_time"] * 1e-6)
        torch_version = None
        params = {m: json.loads(run([trainsim, "zoo", "show", m, "--json"], log).stdout)["param_count"] for m in MODELS}

        def step_rows(tf32):
            nonlocal failed, torch_version
            rows = []
            for model in MODELS:
                for batch in BATCHES:
                    theirs = []
                    try:
                        for r in range(RUNS):
                            t, torch_version = torch_steps(model, batch, params[model], tf32)
                            theirs.append(t)
                    except ImportError:
                        pass
                    except ValueError as e:
                        failed = True
                        rows.append(f"- {e}")
                    mine = ours.get((model, batch, int(tf32)), [])
                    ratio = f"{statistics.median(mine) / statistics.median(theirs):.2f}" if mine and theirs else "n/a"
                    rows.append(f"| {model} | {batch} | {spread(mine) if mine else 'failed'} | "
                                f"{spread(theirs) if theirs else 'no PyTorch'} | {ratio} |")
            return rows

        report += step_rows(False)
        report += ["", "With TF32 products on both sides (trainsim's `CudaPrecision::tf32`, `trainsim run --precision "
                   "tf32`: cuBLAS's TF32 tensor-op math and cuDNN's default math; PyTorch's "
                   "`torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`), otherwise as above:",
                   "", "| model | batch | trainsim step | PyTorch step | trainsim / PyTorch |", "|---|---|---|---|---|"]
        report += step_rows(True)
        report += ["", "trainsim's step with bf16 products (`CudaPrecision::bf16`, `trainsim run --precision bf16`: "
                   "cuBLAS's products on bfloat16-rounded inputs with fp32 sums, CUBLAS_COMPUTE_32F_FAST_16BF; cuDNN's "
                   "convolutions as under TF32) beside its fp32 and TF32 steps, the same benchmark (PyTorch has no "
                   "such mode for fp32 tensors on the GPU):", "",
                   "| model | batch | fp32 | TF32 | bf16 products | bf16 / TF32 |", "|---|---|---|---|---|---|"]
        for model in MODELS:
            for batch in BATCHES:
                steps = [ours.get((model, batch, p), []) for p in (0, 1, 2)]
                ratio = f"{statistics.median(steps[2]) / statistics.median(steps[1]):.2f}" if steps[1] and steps[2] else "n/a"
                report.append(f"| {model} | {batch} | " + " | ".join(spread(s) if s else "failed" for s in steps) +
                              f" | {ratio} |")
        if torch_version:
            report += ["", f"PyTorch {torch_version}."]

    flush()
    if "profiles" in sections:
        report += ["", "## Profiles", "",
                   f"`trainsim profile --device cuda:0` (20 timed passes after 3 warm-ups), {RUNS} runs; the "
                   "step here is the sum of the layers' medians.", ""]
        for model in MODELS:
            for batch in BATCHES:
                steps = []
                for r in range(RUNS):
                    path = os.path.join(args.out, f"{model}-b{batch}-run{r + 1}.json")
                    done = run([trainsim, "profile", "--device", "cuda:0", "--model", model, "--batch", str(batch),
                                "--out", path, "--quiet"], log)
                    if done.returncode != 0:
                        failed = True
                        continue
                    with open(path) as f:
                        steps.append(step_s(json.load(f)))
                report.append(f"- {model}, batch {batch}: {spread(steps) if steps else 'failed'}")
        for model in MODELS:
            path = os.path.join(args.out, f"{model}-b{BATCHES[-1]}-run1.json")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                layers = json.load(f)["layers"]
            report += ["", f"{model}, batch {BATCHES[-1]}, run 1, per layer (µs):", "",
                       "| layer | forward | backward | update |", "|---|---|---|---|"]
            report += [f"| {l['name']} | {l['forward_s'] * 1e6:.1f} | {l['backward_s'] * 1e6:.1f} | "
                       f"{l.get('update_s', 0) * 1e6:.1f} |" for l in layers]

    flush()
    if "cluster" in sections:
        report += ["", "## The GPU as a cluster", ""]
        for workers in (1, 4):
            path = os.path.join(args.out, f"cuda{workers}-measured.json")
            done = run([trainsim, "profile", "--device", f"cuda:0x{workers}", "--model", "fmnist-cnn", "--out",
                        os.devnull, "--cluster-out", path, "--quiet"], log)
            if done.returncode != 0:
                failed = True
                continue
            with open(path) as f:
                c = json.load(f)
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
            report.append(f"- {workers} worker(s): {d['peak_flops_per_s'] / 1e12:.2f} TFLOP/s fp32 and "
                          f"{d['memory_bytes_per_s'] / 1e9:.0f} GB/s memory per worker; a boundary between workers "
                          f"(two device copies and an event) {link['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s after "
                          f"{link['latency_s'] * 1e6:.1f} µs; "
                          f"host link {h['link_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s after "
                          f"{h['link_latency_s'] * 1e6:.1f} µs; launch + sync {h['stream_sync_s'] * 1e6:.1f} µs; "
                          f"{collective}" +
                          (f"; fmnist-cnn's pass with all {workers} at once at "
                           f"{d['compute_rate_while_shared']:.2f} of its rate alone"
                           if 'compute_rate_while_shared' in d else ""))
        cluster4 = os.path.join(args.out, "cuda4-measured.json")
        profile = os.path.join(args.out, "fmnist-cnn-b64-run1.json")
        if os.path.exists(cluster4) and os.path.exists(profile):
            done = run([trainsim, "predict", "--profile", profile, "--cluster", cluster4, "--method", "both"], log)
            failed |= done.returncode != 0
            report += ["", "## Predictions from these measurements (fmnist-cnn, batch 64 per worker, 4 workers "
                       "sharing the GPU: the simulated rows share it, the analytic ones are bounded by its work)",
                       "", "```", done.stdout.strip(), "```"]
            report += ["", "Each strategy's run above beside its simulation from this profile and cluster, the four "
                       "workers sharing the GPU (`shared_devices` 1 and the measured `compute_rate_while_shared`) "
                       "and, as before they did, priced as four GPUs (the same cluster without them):", "",
                       "| strategy | measured | simulated, one GPU shared | error | simulated as four GPUs | error |",
                       "|---|---|---|---|---|---|"]
            with open(cluster4) as f:
                apart = json.load(f)
            apart.pop("shared_devices", None)
            apart["device"].pop("compute_rate_while_shared", None)
            cluster_apart = os.path.join(args.out, "cuda4-apart.json")
            with open(cluster_apart, "w") as f:
                json.dump(apart, f, indent=2)
            simulated = {}
            for name, path in (("shared", cluster4), ("apart", cluster_apart)):
                done = run([trainsim, "predict", "--profile", profile, "--cluster", path, "--method", "simulated",
                            "--iterations", "30", "--json", "-"], log)
                failed |= done.returncode != 0
                if done.returncode == 0:
                    simulated[name] = {r["strategy"]: r["iteration_s"] for r in json.loads(done.stdout)["results"]}
            for strategy, seconds in measured.items():
                cells = []
                for name in ("shared", "apart"):
                    s = simulated.get(name, {}).get(strategy)
                    cells += [f"{s * 1e3:.3f} ms", f"{(s - seconds) / seconds * 100:+.1f}%"] if s else ["?", "?"]
                report.append(f"| {strategy} | {seconds * 1e3:.3f} ms | " + " | ".join(cells) + " |")

    flush()
    if "validate" in sections:
        # validate on virtual GPU workers: each strategy's runs beside its
        # predictions from profiles and clusters measured in the same rounds.
        report += ["", "## validate on four workers sharing the GPU", "",
                   "`trainsim validate --devices cuda:0x4 --batch 64 --rounds 5 --max-rounds 5 --budget "
                   f"{args.validate_budget} --iterations 20 --repeats 10` "
                   "(errors: (predicted − measured) / measured; the prediction shares the GPU among the workers):", ""]
        for model, strategies in validated:
            path = os.path.join(args.out, f"validate-{model}.json")
            done = run([trainsim, "validate", "--model", model, "--devices", "cuda:0x4", "--strategies", strategies,
                        "--batch", "64", "--rounds", "5", "--max-rounds", "5", "--budget", str(args.validate_budget),
                        "--iterations", "20", "--repeats", "10", "--json", path, "--quiet"] + data, log,
                       timeout=args.validate_budget + 100)
            failed |= done.returncode != 0
            if done.returncode != 0 or not os.path.exists(path):
                report.append(f"- {model}: failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            with open(path) as f:
                report += validation_lines(model, json.load(f))
            flush()

    flush()
    if "gpus" in sections:
        lines, gpus_failed = several_gpus(run, trainsim, args.out, data, log, len(gpu.splitlines()), validation_lines)
        report += lines
        failed |= gpus_failed

    flush()
    print("\n".join(report))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
