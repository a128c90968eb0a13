#!/usr/bin/env python3
"""A run killed with SIGKILL after a checkpoint, then resumed, trains as a
run never stopped: `trainsim run --checkpoint DIR --checkpoint-every 5`
(dp-ring on two threads, a synchronous strategy) killed once its first
checkpoint is on disk; `--resume DIR` up to 20 iterations past the
checkpoint gives the losses of a plain run of that length, bit for bit.

Usage: kill_and_resume.py TRAINSIM"""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = b"trainsim.checkpoint/1\n"


def next_iteration(path):
    """The iteration a checkpoint goes on from, from its header."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(MAGIC), path
    (length,) = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    return json.loads(data[start:start + length])["next_iteration"]


def main():
    trainsim = sys.argv[1]
    base = [trainsim, "run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2", "--batch",
            "8", "--seed", "3", "--quiet"]
    work = tempfile.mkdtemp(prefix="trainsim-kill-resume-")
    try:
        directory = os.path.join(work, "checkpoints")
        checkpoint = os.path.join(directory, "checkpoint")
        run = subprocess.Popen(base + ["--iterations", "100000", "--checkpoint", directory, "--checkpoint-every", "5"])
        deadline = time.monotonic() + 120
        while not os.path.exists(checkpoint):
            if run.poll() is not None:
                print(f"the run ended (status {run.returncode}) before its first checkpoint", file=sys.stderr)
                return 1
            if time.monotonic() > deadline:
                run.kill()
                print("no checkpoint within 120 s", file=sys.stderr)
                return 1
            time.sleep(0.01)
        run.send_signal(signal.SIGKILL)
        run.wait()
        assert run.returncode == -signal.SIGKILL, run.returncode
        done = next_iteration(checkpoint)
        total = done + 20
        print(f"killed after the checkpoint at iteration {done}; resuming to {total}")
        resumed = subprocess.run(base + ["--iterations", str(total), "--resume", directory, "--json", "-"],
                                 capture_output=True, text=True)
        if resumed.returncode != 0:
            print(f"--resume failed ({resumed.returncode}): {resumed.stderr}", file=sys.stderr)
            return 1
        plain = subprocess.run(base + ["--iterations", str(total), "--json", "-"], capture_output=True, text=True,
                               check=True)
        got = json.loads(resumed.stdout)["loss_per_iteration"]
        expected = json.loads(plain.stdout)["loss_per_iteration"]
        if got != expected:
            first = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b) if len(got) == len(expected) else -1
            print(f"the resumed run's losses differ from the plain run's (first at iteration {first}; "
                  f"{len(got)} against {len(expected)})", file=sys.stderr)
            return 1
        print(f"{total} losses equal to the plain run's, bit for bit")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
