"""gpu_check.py's section for a machine with two GPUs or more: what needs
GPUs apart, each beside the same run on two workers sharing GPU 0.

- dp-ring's library AllReduce by NCCL between GPUs 0 and 1, the workers
  threads of one process (`--devices cuda:0,1 --set algorithm=mpi`);
- the same with a rank per GPU (`--launcher mpi`), NCCL between the ranks;
- 1f1b with a stage per GPU, its boundaries device to device where the two
  GPUs are peers (else through the host);
- the same with a rank per GPU (`--launcher mpi`), its boundaries by NCCL's
  send and receive between the ranks' GPUs.

The runs on one GPU (`cuda:0x2`) sum on the host, so the losses differ by
rounding alone; the table gives the largest relative gap of a loss and
both iterations. Then the GPUs probed as one machine (`profile
--cluster-out`: a boundary between them, the host's hop, NCCL's AllReduce
as a ring's hops), and `validate` with a GPU each: the layers profiled on
GPU 0, the GPUs probed so in every round, each strategy's runs beside its
predictions."""

import json
import os
import shutil

from gpu_check_util import forget, num

# validate with a GPU each: data parallelism and two pipelines.
# dp-ring twice: its ring on the host, and NCCL's AllReduce of the gradients
# where each GPU keeps them (priced by the probe's collective.library).
VALIDATED = "dp-ring,dp-ring:algorithm=mpi,gpipe,1f1b"

# (what, strategy, the two-GPU run's flags, the one-GPU run's flags)
RUNS = [
    ("dp-ring, NCCL between the GPUs (threads)", "dp-ring", ["--devices", "cuda:0,1", "--set", "algorithm=mpi"],
     ["--devices", "cuda:0x2"]),
    ("dp-ring, a rank per GPU, NCCL between the ranks", "dp-ring",
     ["--devices", "cuda:0,1", "--set", "algorithm=mpi", "--launcher", "mpi"], ["--devices", "cuda:0x2"]),
    ("1f1b, a stage per GPU", "1f1b", ["--devices", "cuda:0,1"], ["--devices", "cuda:0x2"]),
    ("1f1b, a rank per GPU, NCCL's send and receive between the ranks", "1f1b",
     ["--devices", "cuda:0,1", "--launcher", "mpi"], ["--devices", "cuda:0x2"]),
]


def last_line(done):
    return (done.stderr.strip().splitlines() or ["?"])[-1]


def several_gpus(run, trainsim, out, data, log, gpus, validation_lines):
    """The section's report lines and whether a command failed; `run` is
    gpu_check.py's (command, log, timeout), `gpus` how many answer,
    `validation_lines` renders validate's JSON."""
    lines = ["", "## Several GPUs", ""]
    if gpus < 2:
        return lines + [f"- not run: {gpus} GPU here. NCCL between GPUs (threads and ranks) and boundaries between "
                        "peer GPUs need two."], False
    lines += ["`trainsim run --model fmnist-cnn --batch 64 --iterations 30` on GPUs 0 and 1 beside the same run on two "
              "workers sharing GPU 0 (`cuda:0x2`, the AllReduce on the host):", "",
              "| run | last loss, two GPUs | iteration | last loss, `cuda:0x2` | iteration | largest relative gap of a loss |",
              "|---|---|---|---|---|---|"]
    failed = False
    base = ["run", "--model", "fmnist-cnn", "--batch", "64", "--iterations", "30", "--quiet", "--no-evaluate"] + data
    for index, (what, strategy, apart, shared) in enumerate(RUNS):
        if "--launcher" in apart and not shutil.which("mpirun"):
            lines.append(f"| {what} | not run: mpirun is not installed here | | | | |")
            continue
        results = []
        for name, flags in (("apart", apart), ("shared", shared)):
            path = os.path.join(out, f"gpus-{index}-{strategy}-{name}.json")
            forget(path)
            done = run([trainsim] + base + ["--strategy", strategy, "--json", path] + flags, log, timeout=300)
            failed |= done.returncode != 0
            if done.returncode != 0 or not os.path.exists(path):
                results.append(f"failed: {last_line(done)}")
                continue
            with open(path) as f:
                results.append(json.load(f))
        cells = []
        for r in results:
            cells += [r, ""] if isinstance(r, str) else [num(r['loss_per_iteration'][-1], '.3f'),
                                                        f"{num(r['iteration_s'], '.2f', 1e3)} ms"]
        gap = ""
        if all(isinstance(r, dict) for r in results):
            a, b = (r["loss_per_iteration"] for r in results)
            gaps = [abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b) if x is not None and y is not None]
            gap = num(max(gaps) if gaps else None, '.1e')
        lines.append(f"| {what} | " + " | ".join(cells) + f" | {gap} |")
    cluster_path = os.path.join(out, "cluster-gpus.json")
    forget(cluster_path)
    done = run([trainsim, "profile", "--model", "fmnist-cnn", "--batch", "64", "--device", "cuda:0,1", "--repeats", "10",
                "--out", os.path.join(out, "profile-gpus.json"), "--cluster-out", cluster_path, "--quiet"], log,
               timeout=300)
    failed |= done.returncode != 0
    if done.returncode == 0:
        with open(cluster_path) as f:
            c = json.load(f)
        k, link = c["collective"], c["intra_link"]
        library = k.get("library")
        lines += ["", f"`trainsim profile --model fmnist-cnn --device cuda:0,1 --cluster-out` (GPUs 0 and 1 as one "
                  f"machine): a boundary between them {link['latency_s'] * 1e6:.1f} µs and "
                  f"{link['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s; the collectives' host hop "
                  f"{k.get('hop_bytes_per_s', 0) / 1e9:.2f} GB/s; NCCL's AllReduce "
                  + (f"hops {library['hop_latency_s'] * 1e6:.1f} µs and {library['hop_bytes_per_s'] / 1e9:.2f} GB/s."
                     if library else "not measured.")]
    else:
        lines += ["", f"- `profile --device cuda:0,1 --cluster-out` failed: {last_line(done)}"]
    lines += ["", "`trainsim validate --devices cuda:0,1 --batch 64 --rounds 2 --max-rounds 5 --budget 200 "
              "--iterations 20 "
              "--repeats 10` (a worker on each GPU; errors: (predicted − measured) / measured):", ""]
    path = os.path.join(out, "validate-gpus.json")
    forget(path)
    done = run([trainsim, "validate", "--model", "fmnist-cnn", "--devices", "cuda:0,1", "--strategies", VALIDATED,
                "--batch", "64", "--rounds", "2", "--max-rounds", "5", "--budget", "200",
                "--iterations", "20", "--repeats", "10", "--json", path, "--quiet"] + data, log, timeout=320)
    failed |= done.returncode != 0
    if not os.path.exists(path):
        return lines + [f"- fmnist-cnn: failed: {last_line(done)}"], True
    if done.returncode != 0:  # stopped at its limit, or a strategy failed: the rounds its JSON kept
        lines.append(f"- fmnist-cnn: exit {done.returncode} ({last_line(done)}); the rounds its JSON holds:")
    with open(path) as f:
        lines += validation_lines("fmnist-cnn", json.load(f))
    return lines, failed
