#!/usr/bin/env python3
"""A rank of `mpirun -np 2 trainsim run`, then of `trainsim run --launcher
mpi`, killed mid-run (SIGKILL): mpirun, and the launcher, exit within 10 s
with a failing status (the launcher's 1) and a line naming the lost rank and
its host (the launcher's also the iteration), and no process of the run is
left behind. Usage: kill_rank.py TRAINSIM MPIEXEC (ctest: mpi_kill_rank)."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from mpi_env import mpi_env


def ranks_of(marker):
    """pid -> rank of the live processes whose command line holds `marker`."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if marker.encode() not in cmdline or not cmdline[0].endswith(b"trainsim"):
                continue
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for entry in environ:
            if entry.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[int(pid)] = int(entry.split(b"=")[1])
    return found


def kill_rank_one(command, marker, env):
    """Starts `command` (two ranks whose command lines hold `marker`), kills
    rank 1 three seconds into training; returns (seconds until the command
    exited, its status, its standard error, processes left behind)."""
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ranks = {}
    deadline = time.monotonic() + 60
    while len(ranks) < 2 and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.2)
        ranks = ranks_of(marker)
    if len(ranks) < 2:
        job.kill()
        sys.exit(f"the two ranks never started: {job.communicate()}")
    time.sleep(3)  # training under way
    victim = next(pid for pid, rank in ranks.items() if rank == 1)
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    try:
        _, err = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit(f"{command[0]} still running 30 s after a rank was killed")
    took = time.monotonic() - killed
    left = ranks_of(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    if took > 10:
        sys.exit(f"{command[0]} took {took:.1f} s to stop after rank 1 was killed")
    if left:
        sys.exit(f"processes left behind: {sorted(left)}")
    return took, job.returncode, err


def main():
    trainsim, mpiexec = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as folder:
        args = ["run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2", "--iterations",
                "100000", "--batch", "16", "--quiet", "--json"]
        # mpirun started by hand: its own status and its own line.
        marker = os.path.join(folder, "killed.json")  # names this run's processes
        took, status, err = kill_rank_one([mpiexec, "-np", "2", "--oversubscribe", trainsim, *args, marker], marker,
                                          mpi_env())
        if status == 0:
            sys.exit("mpirun exited 0 after a rank was killed")
        lines = [line for line in err.splitlines() if "rank 1" in line and "signal 9" in line]
        if not lines:
            sys.exit(f"no line names the lost rank and the signal:\n{err}")
        print(f"rank 1 killed: mpirun stopped in {took:.1f} s, status {status}: {lines[0].strip()}")
        # --launcher mpi: status 1 and one line naming the rank, its host and the iteration.
        marker = os.path.join(folder, "launched.json")
        took, status, err = kill_rank_one([trainsim, *args, marker, "--launcher", "mpi", "--mpirun", mpiexec], marker,
                                          None)
        lines = [line for line in err.splitlines()
                 if re.search(r"rank 1 on host \S+ was lost to signal 9 .*after iteration \d+ of 100000", line)]
        if status != 1 or len(lines) != 1:
            sys.exit(f"--launcher mpi: status {status} (1 expected) and no one line naming rank, host and "
                     f"iteration:\n{err}")
        print(f"rank 1 killed: trainsim --launcher mpi stopped in {took:.1f} s, status {status}: {lines[0].strip()}")


if __name__ == "__main__":
    main()
