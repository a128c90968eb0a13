#!/usr/bin/env python3
"""A validation's plans priced again: for every strategy of a
trainsim.validation/1 (`validate --json`), `trainsim simulate` on the
profile and cluster that validate measured (`--profile-out`,
`--cluster-out`) with the settings that ran, beside the measured time;
`--cluster-field KEY=VALUE` changes a field of the cluster first
(`link_kernel_s_per_byte=0`, or a nested one by its dotted path,
`device.compute_rate_while_communicating=1`), so one measurement prices
two models.

Usage: resimulate.py TRAINSIM VALIDATION.json PROFILE.json CLUSTER.json
[--cluster-field KEY=VALUE ...]"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def setting_text(value):
    return json.dumps(value) if isinstance(value, (bool, dict, list)) else str(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainsim")
    parser.add_argument("validation")
    parser.add_argument("profile")
    parser.add_argument("cluster")
    parser.add_argument("--cluster-field", action="append", default=[], metavar="KEY=VALUE")
    a = parser.parse_args()
    report = json.load(open(a.validation))
    cluster = json.load(open(a.cluster))
    for field in a.cluster_field:
        path, _, value = field.partition("=")
        *parents, key = path.split(".")
        where = cluster
        for parent in parents:
            if not isinstance(where.get(parent), dict):
                sys.exit(f"resimulate.py: --cluster-field {field}: the cluster has no object '{parent}'")
            where = where[parent]
        try:
            where[key] = json.loads(value)
        except json.JSONDecodeError:
            sys.exit(f"resimulate.py: --cluster-field {field}: the value is not JSON (a number, true, \"text\", ...)")
    with tempfile.TemporaryDirectory() as folder:
        cluster_file = os.path.join(folder, "cluster.json")
        json.dump(cluster, open(cluster_file, "w"))
        print("| strategy | measured | simulated at validate | simulated now | error now |")
        print("|---|---|---|---|---|")
        errors = []
        for result in report["results"]:
            config = result["config"]
            if "skipped" in result or config.get("workers", config.get("stages", 1)) == 1:
                continue  # one worker: validate prices it from the profiles taken alone
            settings = [x for key, value in config.items() if key != "workers"
                        for x in ("--set", f"{key}={setting_text(value)}")]
            done = subprocess.run([a.trainsim, "simulate", "--profile", a.profile, "--cluster", cluster_file,
                                   "--strategy", result["strategy"].split(":")[0], *settings, "--iterations",
                                   str(report["iterations"]), "--json", "-", "--quiet"], capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{result['strategy']}: {done.stderr.strip()}")
            now_s = json.loads(done.stdout)["iteration_s"]
            error = now_s / result["measured_s"] - 1
            errors.append(abs(error))
            print(f"| {result['strategy']} | {result['measured_s'] * 1e3:.2f} ms | "
                  f"{result['predicted_simulated_s'] * 1e3:.2f} ms | {now_s * 1e3:.2f} ms | {error * 100:+.1f}% |")
        print(f"\nmedian |error| {statistics.median(errors) * 100:.1f}% over {len(errors)} strategies")


if __name__ == "__main__":
    main()
