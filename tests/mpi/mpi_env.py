"""The environment the MPI test scripts start mpirun with: root may run it
(CI's containers run as root), no shared-memory single copy (ptrace rules
refuse it there), more ranks than cores, and Open MPI's daemons without the
shared-memory topology, which crashed one in about ten starts here."""

import os


def mpi_env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1",
                OMPI_MCA_rtc_hwloc_vmhole="none")
