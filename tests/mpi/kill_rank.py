#!/usr/bin/env python3
"""A rank of `mpirun -np 2 trainsim run` killed mid-run (SIGKILL): mpirun
exits within 10 s, with a failing status and a line naming the lost rank and
its host, and no process of the run is left behind. Usage: kill_rank.py
TRAINSIM MPIEXEC (ctest: mpi_kill_rank)."""

import os
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


def main():
    trainsim, mpiexec = sys.argv[1], sys.argv[2]
    env = mpi_env()
    with tempfile.TemporaryDirectory() as folder:
        marker = os.path.join(folder, "killed.json")  # names this run's processes
        job = subprocess.Popen([mpiexec, "-np", "2", "--oversubscribe", trainsim, "run", "--model", "fmnist-mlp",
                                "--strategy", "dp-ring", "--devices", "cpu:2", "--iterations", "100000", "--batch",
                                "16", "--quiet", "--json", marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
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
            sys.exit("mpirun still running 30 s after a rank was killed")
        took = time.monotonic() - killed
        left = ranks_of(marker)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if took > 10:
            sys.exit(f"mpirun took {took:.1f} s to stop after rank 1 was killed")
        if job.returncode == 0:
            sys.exit("mpirun exited 0 after a rank was killed")
        lines = [line for line in err.splitlines() if "rank 1" in line and "signal 9" in line]
        if not lines:
            sys.exit(f"no line names the lost rank and the signal:\n{err}")
        if left:
            sys.exit(f"processes left behind: {sorted(left)}")
        print(f"rank 1 killed: mpirun stopped in {took:.1f} s, status {job.returncode}: {lines[0].strip()}")


if __name__ == "__main__":
    main()
