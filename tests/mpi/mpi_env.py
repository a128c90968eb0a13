"""What the MPI test scripts share: the environment they start mpirun with
(root may run it: CI's containers run as root; no shared-memory single copy:
ptrace rules refuse it there; more ranks than cores; Open MPI's daemons
without the shared-memory topology, which crashed one in about ten starts
here), and the check that runs over MPI train as the threads do."""

import json
import os
import sys


def mpi_env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1",
                OMPI_MCA_rtc_hwloc_vmhole="none")


def expect_same_losses(threads, others, what):
    """Exits naming `what` and the first iteration where a run's losses (its
    --json, each of `others` as (how, path)) leave the threads' run's by more
    than 1e-5; returns the threads' run's summary."""
    a = json.load(open(threads))
    for how, path in others:
        b = json.load(open(path))
        for i, (x, y) in enumerate(zip(a["loss_per_iteration"], b["loss_per_iteration"], strict=True)):
            if abs(x - y) > 1e-5 * max(1.0, abs(x)):
                sys.exit(f"{what}: iteration {i} loss {y} ({how}), {x} with threads")
        if abs(a["test_accuracy"] - b["test_accuracy"]) > 1e-6:
            sys.exit(f"{what}: test accuracy {b['test_accuracy']} ({how}), {a['test_accuracy']} with threads")
    return a
