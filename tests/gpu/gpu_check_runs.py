"""gpu_check.py's sections that run trainsim's code on the GPU: the
conformance tests, the same under memcheck, and every strategy on four
workers sharing the GPU (with where a worker's iteration goes)."""

import json
import os
import shutil
import sys

from gpu_check_util import DEVICE_TID, compute_busy_s, forget, gtest_summary, last_line, num

# Every strategy run by the interpreter on four workers sharing the GPU.
STRATEGIES = ["single", "dp-ps", "dp-ring", "dp-overlap", "pipesgd", "cgdp", "pipedream", "pipedream-sync", "dualpipe",
              "gpipe", "dsp", "parallax"]
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
# A run of 30 iterations took at most 18 s on the CPU's stand-in; a hung
# strategy stops here rather than with the loan.
RUN_TIMEOUT_S = 120


def tests(ck):
    ck.report += ["", "## Tests", ""]
    # The tools tests' validate on the GPU reads Fashion-MNIST from the check's folder.
    env = {"TRAINSIM_TEST_FASHION_MNIST": ck.args.data_dir} if ck.args.data_dir else None
    binaries = [("gpu_tests", [f"--gtest_repeat={ck.args.test_repeat}"], 150 * ck.args.test_repeat),
                ("exec_tests", ["--gtest_filter=CudaNetwork*:Devices*"], 60),
                ("tools_tests", ["--gtest_filter=ProfileDeviceCli*"], 90)]
    for binary, flags, timeout in binaries:
        done = ck.run([os.path.join(ck.args.build, "tests", binary)] + flags, timeout=timeout, env=env)
        ck.failed |= done.returncode != 0
        ck.report.append(f"- `{binary} {' '.join(flags)}`: exit {done.returncode}: {gtest_summary(done.stdout)}")
        if done.returncode != 0:
            ck.report.append("```\n" + done.stdout[-3000:] + "\n```")
        ck.flush()


def memcheck(ck):
    ck.report += ["", "## Memcheck", ""]
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(sanitizer):
        ck.report.append(f"- not run: no compute-sanitizer here ({sanitizer})")
        return
    done = ck.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "1",
                   os.path.join(ck.args.build, "tests", "gpu_tests"), "--gtest_filter=" + MEMCHECK_TESTS], timeout=240)
    ck.failed |= done.returncode != 0
    summary = [l for l in (done.stdout + done.stderr).splitlines() if "ERROR SUMMARY" in l]
    ck.report.append(f"- `compute-sanitizer --tool memcheck gpu_tests --gtest_filter={MEMCHECK_TESTS}`: exit "
                     f"{done.returncode}: " + "; ".join(dict.fromkeys(summary[-1:] + [gtest_summary(done.stdout)])))


def run_json(ck, name, given):
    """trainsim run with `given`, its JSON kept under --out as run-NAME.json: (the JSON or None, the run)."""
    path = os.path.join(ck.out, f"run-{name}.json")
    forget(path)
    done = ck.run([ck.trainsim, "run", *given, "--json", path, "--quiet", "--no-evaluate"], timeout=RUN_TIMEOUT_S)
    ck.failed |= done.returncode != 0
    if done.returncode != 0 or not os.path.exists(path):
        return None, done
    with open(path) as f:
        return json.load(f), done


def losses_text(j):
    losses = j["loss_per_iteration"]
    return f"{num(losses[0], '.3f')} | {num(losses[-1], '.3f')}"


def run_row(ck, label, given):
    """One run on four workers sharing the GPU as a row of the table; its iteration, or None."""
    j, done = run_json(ck, label, [*given, "--devices", "cuda:0x4", "--batch", "64", "--iterations", "30"])
    if j is None:
        ck.report.append(f"| {label} | failed: {last_line(done)} | | | |")
    else:
        memory = ", ".join(num(m["peak_bytes"], ".1f", 2**-20, "?") for m in j.get("device_memory", []))
        ck.report.append(f"| {label} | {losses_text(j)} | {num(j['iteration_s'], '.2f', 1e3)} ms | {memory} |")
    ck.flush()
    return None if j is None else j["iteration_s"]


def strategies(ck):
    ck.report += ["", "## Every strategy on four workers sharing the GPU", "",
                  "`trainsim run --model fmnist-cnn --devices cuda:0x4 --batch 64 --iterations 30` (fmnist-cnn on "
                  "Fashion-MNIST, momentum SGD): each worker's forwards, backwards, gradient sums and SGD steps on "
                  "the GPU, its messages on the host; each worker's most device memory held (its networks and "
                  "store, of a quarter of the GPU's). pipesgd with `--momentum 0.4`: its gradients one iteration "
                  "stale add momentum of about 0.5, and with 0.9 SGD does not settle (trainsim run says so and "
                  "suggests 0.4; on the CPU too).", "",
                  "| strategy | first loss | last loss | iteration | memory per worker (MiB) |", "|---|---|---|---|---|"]
    ck.forget_measured()  # this call's runs alone, not an earlier call's
    for strategy in STRATEGIES:
        settles = ["--momentum", "0.4"] if strategy == "pipesgd" else []
        iteration = run_row(ck, strategy, ["--model", "fmnist-cnn", "--strategy", strategy] + settles + ck.data)
        if iteration is not None:
            ck.keep_measured(strategy, iteration)
    # text-bag's sparse table: each backward's rows built on the host from
    # the ids and dy it brings back, the servers' or the ring's sums
    # stepped there; its dense layers on the GPU.
    ck.report += ["", "text-bag under Parallax's three modes, the same way (`--dataset synthetic`: its 50,000 x 64 "
                  "table's gradient as sparse rows, the dense layers' on the GPU):", "",
                  "| mode | first loss | last loss | iteration | memory per worker (MiB) |", "|---|---|---|---|---|"]
    for mode in ("hybrid", "ps", "ar"):
        run_row(ck, mode, ["--model", "text-bag", "--strategy", "parallax", "--set", f"mode={mode}", "--dataset",
                           "synthetic"])
    iteration_breakdown(ck)
    nsys_breakdown(ck)
    for precision in ("tf32", "bf16"):
        j, done = run_json(ck, precision, ["--model", "fmnist-cnn", "--strategy", "single", "--devices", "cuda:0",
                                           "--precision", precision, "--batch", "64", "--iterations", "30"] + ck.data)
        if j is not None:
            ck.report += ["", f"With `--precision {precision}`, `single` on `cuda:0` (one worker): first loss "
                          f"{num(j['loss_per_iteration'][0], '.3f')}, last {num(j['loss_per_iteration'][-1], '.3f')}, "
                          f"iteration {num(j['iteration_s'], '.2f', 1e3)} ms."]
        else:
            ck.report += ["", f"`--precision {precision}` failed: {last_line(done)}"]
        ck.flush()
    processes(ck)


def iteration_breakdown(ck):
    """Where a GPU worker's iteration goes: the time its compute stream's ops
    take per iteration, beside the iteration; the rest is time between them."""
    ck.report += ["", "Where the iteration goes (`--trace`): per iteration from the 8th, the median time worker 0's "
                  "compute stream spends in its ops on the host (queuing their kernels; the rest of the iteration is "
                  "between them) and its forwards' and backwards' kernels on the GPU (CUDA events, from each op's "
                  "first kernel to its last), and each op kind's median on the host "
                  "(`tests/bench/trace_ops.py --from 8`, ms) and its median calls into the GPU libraries (CUDA's "
                  "runtime, cuBLAS, cuDNN, NCCL; a kernel's launch not counted):", ""]
    for strategy in ("single", "dp-ring", "gpipe"):
        trace = os.path.join(ck.out, f"trace-{strategy}.json")
        j, done = run_json(ck, f"trace-{strategy}", ["--model", "fmnist-cnn", "--strategy", strategy, "--devices",
                                                     "cuda:0x4", "--batch", "64", "--iterations", "30", "--trace",
                                                     trace] + ck.data)
        if j is None or not os.path.exists(trace):
            ck.report.append(f"- {strategy}: failed: {last_line(done)}")
            continue
        ops = ck.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench",
                                                   "trace_ops.py"), trace, "--from", "8"], timeout=60)
        kinds = ops.stdout.strip().split(": ", 1)[-1] if ops.returncode == 0 else "trace_ops.py failed"
        host, gpu = compute_busy_s(trace, 8), compute_busy_s(trace, 8, DEVICE_TID)
        ck.report.append(f"- {strategy}: iteration {num(j['iteration_s'], '.2f', 1e3)} ms, worker 0 in its compute ops "
                         f"{num(host, '.2f', 1e3, 'nan')} ms of it on the host, their kernels " +
                         (f"{gpu * 1e3:.2f} ms on the GPU" if gpu is not None else "not timed (no GPU in the trace)") +
                         f"; {kinds}")
        ck.flush()


def nsys_breakdown(ck):
    """The CUDA API calls and kernels of `single`'s run, where Nsight Systems
    is installed: which calls (copies, synchronizations, allocations) the
    iteration's time goes to, beyond the kernels."""
    nsys = shutil.which("nsys") or next((p for p in ("/usr/local/cuda/bin/nsys", "/opt/nvidia/nsight-systems/bin/nsys")
                                         if os.path.exists(p)), None)
    if not nsys:
        ck.report += ["", "(Nsight Systems is not installed here: no CUDA API breakdown of `single`.)"]
        return
    base = os.path.join(ck.out, "nsys-single")
    done = ck.run([nsys, "profile", "--force-overwrite=true", "--trace=cuda", "-o", base, ck.trainsim, "run", "--model",
                   "fmnist-cnn", "--strategy", "single", "--devices", "cuda:0", "--batch", "64", "--iterations", "30",
                   "--quiet", "--no-evaluate"] + ck.data, timeout=RUN_TIMEOUT_S)
    stats = ck.run([nsys, "stats", "--report", "cuda_api_sum,cuda_gpu_kern_sum", "--format", "csv", base + ".nsys-rep"],
                   check=False, timeout=120) if done.returncode == 0 else done
    ck.report += ["", "`single` on `cuda:0` under Nsight Systems (30 iterations; `nsys stats --report "
                  "cuda_api_sum,cuda_gpu_kern_sum`, the first 12 rows of each):", "", "```"]
    for block in stats.stdout.strip().split("\n\n"):
        ck.report += block.splitlines()[:13] + [""]
    ck.report.append("```")
    ck.flush()


def processes(ck):
    """One process per worker (--launcher mpi: mpirun starts the ranks, their
    messages and AllReduce over MPI on the host), both workers on the GPU,
    beside the same run's two workers in one process."""
    if not shutil.which("mpirun"):
        ck.report += ["", "(mpirun is not installed here: no GPU workers across processes.)"]
        return
    dp_ring = ["--model", "fmnist-cnn", "--strategy", "dp-ring", "--devices", "cuda:0x2", "--batch", "64",
               "--iterations", "30"] + ck.data
    runs = {}
    for name, extra in (("threads", []), ("ranks", ["--launcher", "mpi"])):
        j, done = run_json(ck, f"dp-ring-{name}", dp_ring + extra)
        if j is not None:
            runs[name] = j
        else:
            ck.report += ["", f"dp-ring on `cuda:0x2` ({name}) failed: {last_line(done)}"]
    if len(runs) == 2:
        a, b = runs["threads"]["loss_per_iteration"], runs["ranks"]["loss_per_iteration"]
        gaps = [abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b) if x is not None and y is not None]
        ck.report += ["", f"dp-ring on `cuda:0x2`, its two workers as processes (`--launcher mpi`) beside threads "
                      f"of one process: last loss {num(b[-1], '.3f')} and {num(a[-1], '.3f')}, largest relative gap "
                      f"of a loss {num(max(gaps) if gaps else None, '.1e')}; iteration "
                      f"{num(runs['ranks']['iteration_s'], '.2f', 1e3)} ms and "
                      f"{num(runs['threads']['iteration_s'], '.2f', 1e3)} ms."]
