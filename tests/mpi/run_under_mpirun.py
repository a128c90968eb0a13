#!/usr/bin/env python3
"""`trainsim run` started by mpirun, and `trainsim run --launcher mpi`
starting mpirun itself: one worker per rank over MPI gives the losses and
test accuracy of the same run with its workers as threads of one process,
and only rank 0 writes the summary; a checkpoint written across ranks
resumes across ranks as the run never stopped; with a GPU each (where two
answer) NCCL's AllReduce and a pipeline's boundaries by NCCL's send and
receive train as the threads do; `trainsim validate` under
mpirun runs its strategies across the ranks and rank 0 alone reports; one
rank failing alone ends the job with its error. Usage: run_under_mpirun.py
TRAINSIM MPIEXEC (ctest: mpi_run_cli)."""

import json
import os
import subprocess
import sys
import tempfile

from mpi_env import CORES_SEEN, expect_same_losses, mpi_env

STRATEGIES = ["dp-ring", "gpipe", "pipedream"]


def run(command, env=None):
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def main():
    trainsim, mpiexec = sys.argv[1], sys.argv[2]
    env = mpi_env()
    with tempfile.TemporaryDirectory() as folder:
        for strategy in STRATEGIES:
            args = ["run", "--model", "fmnist-mlp", "--strategy", strategy, "--devices", "cpu:2", "--iterations", "6",
                    "--batch", "16", "--quiet"]
            threads, ranks = os.path.join(folder, f"{strategy}-threads.json"), os.path.join(folder, f"{strategy}-mpi.json")
            run([trainsim, *args, "--json", threads])
            launched = os.path.join(folder, f"{strategy}-launched.json")
            run([mpiexec, "-np", "2", "--oversubscribe", trainsim, *args, "--json", ranks], env)
            # The launcher with its own defaults, not the test's environment.
            summary = run([trainsim, *args[:-1], "--json", launched, "--launcher", "mpi", "--mpirun", mpiexec]).stdout
            if strategy not in summary or "iteration" not in summary:
                sys.exit(f"{strategy}: rank 0's summary did not come through the launcher:\n{summary}")
            a = expect_same_losses(threads, (("mpirun", ranks), ("--launcher mpi", launched)), strategy)
            print(f"{strategy}: {len(a['loss_per_iteration'])} losses equal (mpirun, --launcher mpi), "
                  f"accuracy {a['test_accuracy']}")
        # A checkpoint across ranks: 4 iterations under mpirun, then resumed to 6 under
        # mpirun, train as 6 on threads (gpipe: synchronous).
        args = ["run", "--model", "fmnist-mlp", "--strategy", "gpipe", "--devices", "cpu:2", "--batch", "16",
                "--quiet"]
        checkpoints = os.path.join(folder, "checkpoints")
        threads, resumed = os.path.join(folder, "whole.json"), os.path.join(folder, "resumed.json")
        run([trainsim, *args, "--iterations", "6", "--json", threads])
        run([mpiexec, "-np", "2", "--oversubscribe", trainsim, *args, "--iterations", "4", "--checkpoint", checkpoints,
             "--checkpoint-every", "2"], env)
        run([mpiexec, "-np", "2", "--oversubscribe", trainsim, *args, "--iterations", "6", "--resume", checkpoints,
             "--json", resumed], env)
        expect_same_losses(threads, (("mpirun after --resume", resumed),), "gpipe checkpoint")
        print("gpipe: 4 iterations across ranks, a checkpoint, resumed to 6: the losses of 6 on threads")
        # validate started by mpirun: rank 0 alone writes the comparison, with
        # every strategy asked run across the ranks (single on rank 0 alone).
        report = os.path.join(folder, "validation.json")
        printed = run([mpiexec, "-np", "2", "--oversubscribe", trainsim, "validate", "--model", "fmnist-mlp",
                       "--devices", "cpu:2", "--strategies", "single,dp-ring,pipedream", "--rounds", "1",
                       "--iterations", "5", "--repeats", "3", "--json", report, "--worst-ops", "0"], env).stdout
        v = json.load(open(report))
        ran = [r["strategy"] for r in v["results"] if "skipped" not in r and r["measured_s"] > 0]
        if ran != ["single", "dp-ring", "pipedream"] or v["workers"] != 2 or printed.count("median |error|") != 1:
            sys.exit(f"validate under mpirun ran {ran} on {v['workers']} workers; printed:\n{printed}")
        print("validate under mpirun: single, dp-ring and pipedream ran across the ranks; rank 0 wrote once")
        # Under mpirun, --devices must give one worker per rank.
        wrong = subprocess.run([mpiexec, "-np", "2", "--oversubscribe", trainsim, "run", "--model", "fmnist-mlp",
                                "--strategy", "dp-ring", "--devices", "cpu:3", "--iterations", "2", "--quiet"], capture_output=True, text=True, env=env, timeout=300)
        if wrong.returncode == 0 or "one worker per rank" not in wrong.stderr:
            sys.exit(f"cpu:3 under 2 ranks was not refused as it should be:\n{wrong.stderr}")
        # One rank failing alone (its --resume names no checkpoint) while the
        # other trains and waits for it: the job ends on its error, naming it,
        # instead of the failing rank waiting in MPI_Finalize for the other.
        args = ["run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2", "--iterations", "4",
                "--batch", "16", "--quiet"]
        alone = subprocess.run([mpiexec, "-np", "1", trainsim, *args, ":", "-np", "1", trainsim, *args, "--resume",
                                os.path.join(folder, "none")], capture_output=True, text=True, env=env, timeout=120)
        if alone.returncode == 0 or "--resume" not in alone.stderr:
            sys.exit(f"one rank's error did not end the job with it:\n{alone.stderr}")
        print("one rank failing alone: the job ended on its error")
        # GPU workers across ranks: each rank checks its own GPU, and where none
        # answers (this machine) the run fails with that reason, naming --devices.
        gpu_run = ["run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cuda:0x2", "--iterations",
                   "2", "--quiet"]
        for how, command, with_env in (("mpirun", [mpiexec, "-np", "2", "--oversubscribe", trainsim, *gpu_run], env),
                                       ("--launcher mpi", [trainsim, *gpu_run, "--launcher", "mpi", "--mpirun",
                                                           mpiexec], None)):
            gpus = subprocess.run(command, capture_output=True, text=True, env=with_env, timeout=300)
            if gpus.returncode == 0:
                print(f"cuda:0x2 across 2 ranks ({how}) trained: this machine has a GPU")
            elif "--devices: 'cuda:0'" not in gpus.stderr:  # the rank's check of its GPU, not a refusal of --devices
                sys.exit(f"cuda:0x2 on 2 ranks ({how}) did not fail on its GPU alone:\n{gpus.stderr}")
        # A GPU each (cuda:0,1): the ranks' library AllReduce goes by NCCL
        # between the GPUs, and trains as the threads' NCCL does. Where GPU 0
        # or 1 is missing, the rank checking it fails, naming it.
        nccl_run = ["run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--set", "algorithm=mpi", "--devices",
                    "cuda:0,1", "--iterations", "4", "--batch", "16", "--quiet", "--no-evaluate"]
        nccl_ranks = os.path.join(folder, "nccl-ranks.json")
        gpus = subprocess.run([mpiexec, "-np", "2", "--oversubscribe", trainsim, *nccl_run, "--json", nccl_ranks],
                              capture_output=True, text=True, env=env, timeout=300)
        if gpus.returncode == 0:
            nccl_threads = os.path.join(folder, "nccl-threads.json")
            run([trainsim, *nccl_run, "--json", nccl_threads])
            expect_same_losses(nccl_threads, (("NCCL across ranks", nccl_ranks),), "dp-ring cuda:0,1", tolerance=1e-4)
            print("cuda:0,1 across 2 ranks: NCCL's AllReduce between the ranks trains as between threads")
            # A stage each: the boundaries go from GPU to GPU by NCCL's send
            # and receive, and train as the threads' stages on the two GPUs.
            pipe_run = ["run", "--model", "fmnist-mlp", "--strategy", "1f1b", "--devices", "cuda:0,1", "--iterations",
                        "4", "--batch", "16", "--quiet", "--no-evaluate"]
            pipe_ranks, pipe_threads = os.path.join(folder, "1f1b-ranks.json"), os.path.join(folder, "1f1b-threads.json")
            run([mpiexec, "-np", "2", "--oversubscribe", trainsim, *pipe_run, "--json", pipe_ranks], env)
            run([trainsim, *pipe_run, "--json", pipe_threads])
            expect_same_losses(pipe_threads, (("NCCL's send and receive across ranks", pipe_ranks),), "1f1b cuda:0,1",
                               tolerance=1e-4)
            print("cuda:0,1 across 2 ranks: 1f1b's boundaries by NCCL between the ranks train as between threads")
        elif "--devices: 'cuda:0'" not in gpus.stderr and "--devices: 'cuda:1'" not in gpus.stderr:
            sys.exit(f"cuda:0,1 on 2 ranks did not fail on a missing GPU alone:\n{gpus.stderr}")
        # The launcher leaves each rank every core (Open MPI binds each of two
        # ranks to one), the executor pinning the workers' threads: its mpirun
        # command run as built, the ranks replaced by a probe of their cores.
        wrapper, seen_in = os.path.join(folder, "mpirun-probing-cores"), os.path.join(folder, "cores-seen")
        os.mkdir(seen_in)
        probe = [sys.executable, "-c", CORES_SEEN, seen_in]
        with open(wrapper, "w") as out:
            out.write(f"#!{sys.executable}\nimport os, sys\nargs = sys.argv[1:]\nat = args.index('-np') + 2\n"
                      f"os.execvp({mpiexec!r}, [{mpiexec!r}, *args[:at], *{probe!r}])\n")
        os.chmod(wrapper, 0o755)
        run([trainsim, *args, "--launcher", "mpi", "--mpirun", wrapper])
        cores = len(os.sched_getaffinity(0))
        seen = sorted(os.listdir(seen_in))
        if seen != [f"{rank} {cores}" for rank in (0, 1)]:
            sys.exit(f"the launcher's ranks saw (rank cores) {seen}, not this process's {cores} each")
        print(f"--launcher mpi: each of 2 ranks sees the {cores} cores")
        # A rank mpirun bound to one core, whose worker's threads would take
        # two (a computer of two cores or more), is told so; unbound, or
        # started by the launcher, it is told only where this process itself
        # may run on one core.
        alone = ["run", "--model", "fmnist-mlp", "--strategy", "single", "--devices", "cpu:1", "--iterations", "2",
                 "--batch", "16", "--quiet", "--no-evaluate"]
        online, usable = os.cpu_count(), len(os.sched_getaffinity(0))
        for how, command, told in (
                ("bound to a core", [mpiexec, "-np", "1", "--bind-to", "core", trainsim, *alone], online >= 2),
                ("bound to none", [mpiexec, "-np", "1", "--bind-to", "none", trainsim, *alone], usable == 1 < online),
                ("started by the launcher", [trainsim, *alone, "--launcher", "mpi", "--mpirun", mpiexec],
                 usable == 1 < online)):
            said = run(command, env).stderr
            if ("--bind-to none" in said) != told:
                sys.exit(f"a rank {how} was {'not ' if told else ''}told of its cores:\n{said}")
        print("a rank mpirun bound to one core is told so, an unbound one not")
        # One rank has no link to another to measure: validate and profile's
        # cluster are refused in one line, not failed on a cluster of no link.
        for what, command in (
                ("validate", ["validate", "--model", "fmnist-mlp", "--devices", "cpu:1", "--quiet"]),
                ("profile --cluster-out", ["profile", "--model", "fmnist-mlp", "--device", "cpu:1", "--quiet", "--out",
                                           os.path.join(folder, "one.json"), "--cluster-out",
                                           os.path.join(folder, "one-cluster.json")])):
            one = subprocess.run([mpiexec, "-np", "1", trainsim, *command], capture_output=True, text=True, env=env,
                                 timeout=120)
            if one.returncode == 0 or "one rank" not in one.stderr or "(a value > 0)" in one.stderr:
                sys.exit(f"{what} of one rank under mpirun was not refused in one line:\n{one.stderr}")
        print("validate and profile --cluster-out of one rank under mpirun: refused")
        # --no-evaluate reaches the ranks the launcher starts.
        unscored = os.path.join(folder, "unscored.json")
        run([trainsim, "run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2", "--iterations",
             "3", "--batch", "16", "--quiet", "--no-evaluate", "--json", unscored, "--launcher", "mpi", "--mpirun",
             mpiexec])
        if json.load(open(unscored))["test_accuracy"] is not None:
            sys.exit("--no-evaluate under the launcher: the ranks scored the test set")
    print("ok")


if __name__ == "__main__":
    main()
