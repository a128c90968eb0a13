#!/usr/bin/env python3
"""`trainsim run --launcher mpi` on an emulated cluster, the launcher killed
mid-run (SIGKILL) and the cluster torn down at once: within 10 s no process
of the run is left (mpirun, its daemons, the ranks: mpirun alone would wait
for ever on daemons it can no longer reach), and `down` leaves no link of
the cluster behind. Exits 77 (ctest: skipped) with the reason where
namespaces cannot be made. Usage: kill_launcher.py TRAINSIM MPIEXEC (ctest:
mpi_kill_launcher)."""

import os
import signal
import subprocess
import sys
import tempfile
import time

from kill_rank import ranks_of
from mpi_env import emulate_up_or_skip

NAME = "tskl"


def processes_naming(text):
    """pids of the live processes whose command line holds `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(int(pid))
        except OSError:
            continue
    return found


def main():
    trainsim, mpiexec = sys.argv[1], sys.argv[2]
    emulate_up_or_skip(trainsim, NAME, "--hosts", "2", "--link", "200mbit")
    left = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            marker = os.path.join(folder, "launched.json")  # names this run's ranks
            launcher = subprocess.Popen(
                [trainsim, "run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2",
                 "--iterations", "100000", "--batch", "16", "--quiet", "--json", marker, "--launcher", "mpi",
                 "--emulated", NAME, "--mpirun", mpiexec],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while len(ranks_of(marker)) < 2 and time.monotonic() < deadline and launcher.poll() is None:
                time.sleep(0.2)
            if len(ranks_of(marker)) < 2:
                launcher.kill()
                sys.exit("the two ranks never started")
            time.sleep(3)  # training under way
            launcher.send_signal(signal.SIGKILL)
            launcher.wait()
            killed = time.monotonic()
            subprocess.run([trainsim, "cluster", "emulate", "down", "--name", NAME], capture_output=True, timeout=120)
            while time.monotonic() < killed + 10:
                left = ranks_of(marker).keys() | set(processes_naming(f"/run/trainsim-emulate/{NAME}/"))
                if not left:
                    break
                time.sleep(0.5)
            took = time.monotonic() - killed
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        subprocess.run([trainsim, "cluster", "emulate", "down", "--name", NAME], capture_output=True, timeout=120)
    if left:
        sys.exit(f"processes left behind 10 s after the launcher was killed: {sorted(left)}")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    if f"{NAME}-v" in links or f"{NAME}-br" in links:
        sys.exit(f"links of {NAME} left behind:\n{links}")
    print(f"launcher killed, cluster torn down: nothing of the run left after {took:.1f} s")


if __name__ == "__main__":
    main()
