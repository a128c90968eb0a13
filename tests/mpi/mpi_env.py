"""What the MPI test scripts share: the environment they start mpirun with
(root may run it: CI's containers run as root; no shared-memory single copy:
ptrace rules refuse it there; more ranks than cores; Open MPI's daemons
without the shared-memory topology, which crashed one in about ten starts
here), and the check that runs over MPI train as the threads do."""

import json
import os
import subprocess
import sys

SKIPPED = 77  # ctest's SKIP_RETURN_CODE for the emulated clusters' tests

# A rank names a file in the folder it is given after its rank and the cores
# it may run on (their output, forwarded by mpirun, may interleave).
CORES_SEEN = ("import os, sys; open(os.path.join(sys.argv[1], os.environ['OMPI_COMM_WORLD_RANK'] + ' ' + "
              "str(len(os.sched_getaffinity(0)))), 'w').close()")


def mpi_env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1",
                OMPI_MCA_rtc_hwloc_vmhole="none")


def expect_same_losses(threads, others, what, tolerance=1e-5):
    """Exits naming `what` and the first iteration where a run's losses (its
    --json, each of `others` as (how, path)) leave the threads' run's by more
    than `tolerance` (relative), or where its test accuracy differs (both
    null under --no-evaluate); returns the threads' run's summary."""
    a = json.load(open(threads))
    for how, path in others:
        b = json.load(open(path))
        for i, (x, y) in enumerate(zip(a["loss_per_iteration"], b["loss_per_iteration"], strict=True)):
            if abs(x - y) > tolerance * max(1.0, abs(x)):
                sys.exit(f"{what}: iteration {i} loss {y} ({how}), {x} with threads")
        x, y = a["test_accuracy"], b["test_accuracy"]
        if (x is None) != (y is None) or (x is not None and abs(x - y) > 1e-6):
            sys.exit(f"{what}: test accuracy {y} ({how}), {x} with threads")
    return a


def emulate_up_or_skip(trainsim, name, *options):
    """`trainsim cluster emulate up --name NAME OPTIONS`; exits 77 (skipped)
    with the reason where the machine does not permit or lack what it needs
    (privilege, namespaces, the bridge or tbf modules), 1 on another failure."""
    up = subprocess.run([trainsim, "cluster", "emulate", "up", *options, "--name", name], capture_output=True,
                        text=True, timeout=120)
    if up.returncode == 0:
        return up
    unavailable = ["needs root", "ip netns add", "Operation not permitted", "RTNETLINK answers",
                   "qdisc not found", "not supported", "tc (iproute2) is missing"]
    if any(reason in up.stderr for reason in unavailable):
        print(f"skipped: {up.stderr.strip()}")
        sys.exit(SKIPPED)
    sys.exit(f"cluster emulate up failed:\n{up.stderr}")
