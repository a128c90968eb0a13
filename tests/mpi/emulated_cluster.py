#!/usr/bin/env python3
"""`trainsim cluster emulate`: two hosts as network namespaces with shaped
links; `trainsim run` started by mpirun on them, with the options `up`
printed, and `trainsim run --launcher mpi --emulated NAME` (starting mpirun
itself) give the losses of the same run as threads of one process;
`profile --launcher mpi --emulated NAME --cluster-out` measures two
machines joined by the shaped link; `validate --launcher mpi` runs and
prices strategies across them;
`status` lists the cluster while it is up, and `down` leaves nothing behind.
Exits 77 (ctest: skipped) with the reason where namespaces cannot be made.
Usage: emulated_cluster.py TRAINSIM MPIEXEC (ctest: emulated_cluster)."""

import json
import os
import subprocess
import sys
import tempfile

from mpi_env import CORES_SEEN, emulate_up_or_skip, expect_same_losses, mpi_env

NAME = "tstemu"


def run(command, env=None, check=True):
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def main():
    trainsim, mpiexec = sys.argv[1], sys.argv[2]
    emulate_up_or_skip(trainsim, NAME, "--hosts", "2", "--link", "200mbit", "--burst", "40000")
    try:
        state = json.load(open(f"/run/trainsim-emulate/{NAME}/state.json"))
        namespaces = run(["ip", "netns", "list"]).stdout
        for ns in state["namespaces"]:
            if ns not in namespaces:
                sys.exit(f"namespace {ns} is missing after up")
        # Both ends of each link shaped, with the bucket asked for.
        for where, device in ((["ip", "netns", "exec", state["namespaces"][0]], "eth0"), ([], f"{NAME}-v1")):
            shown = run([*where, "tc", "qdisc", "show", "dev", device]).stdout
            if "tbf" not in shown or "rate 200Mbit burst 40000b" not in shown:
                sys.exit(f"{device} is not shaped to 200 Mbit/s with a 40000 B bucket: {shown}")
        # Jumbo frames by default, on the host's side and the switch's.
        for where in (["ip", "netns", "exec", state["namespaces"][1]], []):
            device = "eth0" if where else f"{NAME}-br"
            shown = run([*where, "ip", "link", "show", device]).stdout
            if " mtu 9000 " not in shown:
                sys.exit(f"{device} is not at MTU 9000: {shown}")
        status = run([trainsim, "cluster", "emulate", "status"]).stdout
        if f"{NAME}: 2 hosts" not in status or "MTU 9000, bucket 40000 B" not in status or "incomplete" in status:
            sys.exit(f"status does not list the cluster as up:\n{status}")
        env = mpi_env()
        # The hosts share this computer's cores: mpirun with the printed options
        # leaves each rank every core (Open MPI would bind each host's one rank to
        # its first core, the same for both).
        cores = len(os.sched_getaffinity(0))
        with tempfile.TemporaryDirectory() as seen_in:
            run([mpiexec, *state["mpirun_options"].split(), "-np", "2", "python3", "-c", CORES_SEEN, seen_in], env)
            seen = sorted(os.listdir(seen_in))
        if seen != [f"{rank} {cores}" for rank in (0, 1)]:
            sys.exit(f"ranks started with the printed options saw (rank cores) {seen}, not this machine's {cores}")
        # More ranks than the hosts' slots: one line before mpirun starts.
        over = run([trainsim, "run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:3",
                    "--iterations", "1", "--quiet", "--launcher", "mpi", "--emulated", NAME, "--mpirun", mpiexec],
                   check=False)
        if over.returncode != 2 or f"--emulated: cluster '{NAME}' has 2 slots (2 hosts of 1) for 3 ranks" not in over.stderr:
            sys.exit(f"3 ranks on 2 slots were not refused in one line ({over.returncode}):\n{over.stderr}")
        args = ["run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2", "--iterations", "4",
                "--batch", "16", "--quiet"]
        with tempfile.TemporaryDirectory() as folder:
            threads, hosts = os.path.join(folder, "threads.json"), os.path.join(folder, "hosts.json")
            launched = os.path.join(folder, "launched.json")
            run([trainsim, *args, "--json", threads])
            run([mpiexec, *state["mpirun_options"].split(), "-np", "2", trainsim, *args, "--json", hosts], env)
            # The launcher's own defaults, not the test's environment.
            run([trainsim, *args, "--json", launched, "--launcher", "mpi", "--emulated", NAME, "--mpirun", mpiexec])
            a = expect_same_losses(threads, (("mpirun", hosts), ("--launcher mpi", launched)),
                                   "dp-ring across 2 emulated hosts")
            print(f"dp-ring across 2 emulated hosts (mpirun, --launcher mpi): {len(a['loss_per_iteration'])} "
                  "losses equal")
            # The cluster measured across the hosts: two machines of one worker,
            # joined by the shaped link (200 Mbit/s: 25 MB/s less the headers).
            cluster_file = os.path.join(folder, "cluster.json")
            run([trainsim, "profile", "--model", "fmnist-mlp", "--device", "cpu:2", "--repeats", "3", "--out",
                 os.path.join(folder, "profile.json"), "--cluster-out", cluster_file, "--quiet", "--launcher", "mpi",
                 "--emulated", NAME, "--mpirun", mpiexec])
            cluster = json.load(open(cluster_file))
            link = cluster["inter_link"]["bandwidth_bytes_per_s"]
            if (cluster["machines"], cluster["devices_per_machine"]) != (2, 1):
                sys.exit(f"the measured cluster has {cluster['machines']} x {cluster['devices_per_machine']} devices, "
                         "not 2 machines of 1")
            if not 0.8 * 25e6 <= link <= 1.02 * 25e6:
                sys.exit(f"the measured link between the hosts carries {link / 1e6:.1f} MB/s, not the shaped 25 MB/s")
            # The ranks' sends leave into a socket buffer of 131072 B (5 ms of the
            # link, 128 KiB at least: emulated_socket_buffer_bytes), which the
            # simulator lets a send's stream move on past.
            buffer = cluster["inter_link"].get("send_buffer_bytes")
            if buffer != 131072:
                sys.exit(f"the measured cluster's send buffer is {buffer}, not the 131072 B the ranks were given")
            # The hosts share this computer's cores, and so does the kernel's work
            # for the bytes crossing their links (about 1 ns per byte here).
            kernel = cluster.get("link_kernel_s_per_byte", 0)
            if cluster.get("shared_cores", 0) < 1 or not 1e-11 <= kernel <= 1e-7:
                sys.exit(f"the measured cluster's shared cores {cluster.get('shared_cores')} and links' kernel time "
                         f"{kernel} s per byte: expected the cores and 1e-11 to 1e-7 s per byte")
            print(f"profile --cluster-out across the hosts: 2 machines x 1, link {link / 1e6:.1f} MB/s "
                  f"(shaped 25 MB/s), latency {cluster['inter_link']['latency_s'] * 1e6:.0f} us, "
                  f"the links' kernel {kernel * 1e9:.2f} ns per byte")
            # validate across the hosts: every strategy asked ran (single on rank 0, the
            # other rank sitting out), priced on the measured link; dp-ring's AllReduce
            # crosses the shaped link and sets its time.
            report = os.path.join(folder, "validation.json")
            run([trainsim, "validate", "--model", "fmnist-mlp", "--devices", "cpu:2", "--strategies",
                 "single,dp-ring,gpipe", "--rounds", "2", "--max-rounds", "2", "--iterations", "8", "--repeats", "5", "--json", report,
                 "--quiet", "--launcher", "mpi", "--emulated", NAME, "--mpirun", mpiexec])
            v = json.load(open(report))
            results = {r["strategy"]: r for r in v["results"]}
            for strategy in ("single", "dp-ring", "gpipe"):
                r = results.get(strategy, {})
                if "skipped" in r or len(r.get("measured_rounds_s", [])) != 2:
                    sys.exit(f"validate across the hosts did not run {strategy} twice: {r}")
            ring = results["dp-ring"]
            if ring["measured_s"] < 5 * results["single"]["measured_s"] or abs(ring["error_simulated"]) > 0.25:
                sys.exit(f"dp-ring across the shaped link: measured {ring['measured_s'] * 1e3:.2f} ms, predicted "
                         f"{ring['predicted_simulated_s'] * 1e3:.2f} ms, single {results['single']['measured_s'] * 1e3:.2f} ms")
            print(f"validate across the hosts: dp-ring measured {ring['measured_s'] * 1e3:.2f} ms, predicted "
                  f"{ring['predicted_simulated_s'] * 1e3:.2f} ms ({ring['error_simulated'] * 100:+.1f}%)")
    finally:
        run([trainsim, "cluster", "emulate", "down", "--name", NAME], check=False)
    left = [ns for ns in run(["ip", "netns", "list"]).stdout.split("\n") if ns.startswith(NAME)]
    if left or os.path.exists(f"/run/trainsim-emulate/{NAME}") or run(["ip", "link", "show", f"{NAME}-br"], check=False).returncode == 0:
        sys.exit(f"down left {left or 'its bridge or files'} behind")
    if f"{NAME}:" in run([trainsim, "cluster", "emulate", "status"]).stdout:
        sys.exit("status still lists the cluster after down")
    print("ok")


if __name__ == "__main__":
    main()
