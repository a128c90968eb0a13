#!/usr/bin/env python3
"""The cores an emulated cluster's links take: on the hosts of `trainsim
cluster emulate up --name NAME` (root), one TCP flow from every host to the
next at once, host i to host i + 1 as a ring's steps send, with blocking
sockets (no process spins), and the computer's /proc/stat over the flows:
the links' rate, and the kernel's core time (system, interrupts, softirq)
per byte moved. The emulated hosts share one computer's cores, so this is
core time a worker's compute loses while the links carry a collective.

Usage: link_kernel_cost.py NAME [--megabytes 300] [--runs 3]"""

import argparse
import json
import os
import subprocess
import sys
import time

STATE = "/run/trainsim-emulate/{}/state.json"
PORT = 5555
CHUNK = 1 << 20

# One end of a flow, run inside a host's namespace: `rx ADDRESS` receives
# until the sender closes; `tx ADDRESS MEGABYTES` sends.
END = """
import socket, sys
mode, address = sys.argv[1], sys.argv[2]
if mode == "rx":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, %d))
    s.listen(1)
    print("listening", flush=True)
    c = s.accept()[0]
    buffer = bytearray(%d)
    while c.recv_into(buffer):
        pass
else:
    c = socket.create_connection((address, %d))
    chunk = b"x" * %d
    for _ in range(int(sys.argv[3])):
        c.sendall(chunk)
    c.close()
""" % (PORT, CHUNK, PORT, CHUNK)


def address_of(namespace):
    out = subprocess.run(["ip", "netns", "exec", namespace, "ip", "-4", "-o", "addr", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[out.index("inet") + 1].split("/")[0]


def cpu_jiffies():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return {"user": user + nice, "kernel": system + irq + softirq, "idle": idle + iowait, "all": sum(fields)}


def one_run(namespaces, megabytes):
    hosts = len(namespaces)
    addresses = [address_of(n) for n in namespaces]
    receivers = []
    for i in range(hosts):
        to = (i + 1) % hosts
        p = subprocess.Popen(["ip", "netns", "exec", namespaces[to], sys.executable, "-c", END, "rx", addresses[to]],
                             stdout=subprocess.PIPE, text=True)
        receivers.append(p)
    for p in receivers:
        if p.stdout.readline().strip() != "listening":
            sys.exit("link_kernel_cost: a receiver did not start")
    before, start = cpu_jiffies(), time.monotonic()
    senders = [subprocess.Popen(["ip", "netns", "exec", namespaces[i], sys.executable, "-c", END, "tx",
                                 addresses[(i + 1) % hosts], str(megabytes)]) for i in range(hosts)]
    for p in senders + receivers:
        if p.wait(timeout=600) != 0:
            sys.exit("link_kernel_cost: a flow failed")
    wall = time.monotonic() - start
    after = cpu_jiffies()
    hz = os.sysconf("SC_CLK_TCK")
    d = {k: after[k] - before[k] for k in after}
    moved = hosts * megabytes * CHUNK
    return {"wall_s": wall, "bytes_per_s": moved / wall, "busy": 1 - d["idle"] / d["all"],
            "kernel_core_s": d["kernel"] / hz, "user_core_s": d["user"] / hz,
            "kernel_s_per_byte": d["kernel"] / hz / moved}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the emulated cluster (trainsim cluster emulate up --name)")
    parser.add_argument("--megabytes", type=int, default=300, help="MiB each flow sends")
    parser.add_argument("--runs", type=int, default=3)
    a = parser.parse_args()
    try:
        state = json.load(open(STATE.format(a.name)))
    except OSError as e:
        sys.exit(f"link_kernel_cost: {e.filename}: {e.strerror} (trainsim cluster emulate up --name {a.name} first)")
    namespaces = state["namespaces"]
    print(f"{len(namespaces)} emulated hosts at {state['link']} (MTU {state.get('mtu', 1500)}), "
          f"one flow host i -> i + 1 each, {a.megabytes} MiB per flow, {os.cpu_count()} cores:")
    print("| run | links' rate, all flows | cores busy | kernel core-s | ns of kernel per byte | user core-s |")
    print("|---|---|---|---|---|---|")
    for r in range(a.runs):
        x = one_run(namespaces, a.megabytes)
        print(f"| {r + 1} | {x['bytes_per_s'] / 1e6:.0f} MB/s | {x['busy'] * 100:.0f}% | {x['kernel_core_s']:.2f} | "
              f"{x['kernel_s_per_byte'] * 1e9:.2f} | {x['user_core_s']:.2f} |")


if __name__ == "__main__":
    main()
