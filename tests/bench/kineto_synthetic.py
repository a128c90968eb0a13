#!/usr/bin/env python3
"""Writes a large Kineto trace for the importer's speed and memory check.

Repeats the steps of a real trace (tests/data/kineto/...) one after another,
each copy shifted past the one before, its correlation, external and flow
ids and sequence numbers offset so that nothing links across copies, its
ProfilerStep spans renumbered, until the file holds at least --mb megabytes:

    python3 tests/bench/kineto_synthetic.py tests/data/kineto/hta_ns_resolution_V100x1_rank0.json.gz \\
        --mb 200 --out /tmp/big.json
    /usr/bin/time -f '%e s %M KB' build/tools/trainsim profile --import-kineto /tmp/big.json --summary
"""
import argparse
import gzip
import json
import sys

ID_KEYS = ("correlation", "External id", "external id", "Sequence number", "Ev Idx")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def shifted(event, shift_us, id_offset, step_offset):
    e = dict(event)
    if "ts" in e:
        e["ts"] = e["ts"] + shift_us
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] = e["id"] + id_offset
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_KEYS:
            if isinstance(args.get(key), int):
                args[key] = args[key] + id_offset
        e["args"] = args
    name = e.get("name", "")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        e["name"] = f"ProfilerStep#{int(name[len('ProfilerStep#'):]) + step_offset}"
    return e


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", help="a real trace to repeat (.json or .json.gz)")
    p.add_argument("--mb", type=float, default=200, help="size to reach, in MB (10^6 bytes)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    data = load(args.trace)
    events = [e for e in data["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in data["traceEvents"] if e.get("ph") == "M"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    start = min(e["ts"] for e in steps)
    end = max(e["ts"] + e["dur"] for e in steps)
    inside = [e for e in events if "ts" in e and start <= e["ts"] <= end + 1e6]
    max_id = 1 + max((v for e in inside for v in
                      [e.get("id") if isinstance(e.get("id"), int) else 0] +
                      [(e.get("args") or {}).get(k, 0) for k in ID_KEYS] if isinstance(v, int)), default=0)
    header = {k: v for k, v in data.items() if k != "traceEvents"}
    written, copies = 0, 0
    with open(args.out, "w", encoding="utf-8") as out:
        text = json.dumps(header)[:-1] + ', "traceEvents": ['
        out.write(text)
        written += len(text)
        first = True
        for e in meta:
            text = ("" if first else ",\n") + json.dumps(e)
            out.write(text)
            written += len(text)
            first = False
        while written < args.mb * 1e6:
            shift = copies * (end - start + 1000.0)
            for e in inside:
                text = ",\n" + json.dumps(shifted(e, shift, copies * max_id, copies * len(steps)))
                out.write(text)
                written += len(text)
            copies += 1
        out.write("]}\n")
    print(f"{args.out}: {written / 1e6:.1f} MB, {copies} copies of {len(steps)} steps "
          f"({copies * len(inside)} events)", file=sys.stderr)


if __name__ == "__main__":
    main()
