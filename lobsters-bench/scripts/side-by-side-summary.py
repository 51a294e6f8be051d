#!/usr/bin/env python3
"""Prints side-by-side.sh's table of MariaDB and Ladle figures with their
ratios, from the JSON reports and sysbench logs in OUT_DIR, and (with
--history) appends the run's main figures to the history CSV.

Ratios are Ladle/MariaDB throughout: above 1 is better for throughput,
below 1 is better for latency and CPU.
"""
import argparse
import csv
import datetime
import json
import os
import re
import socket

SERVERS = ("mariadb", "ladle")


def load_json(out, name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def field(report, *path):
    """report[path[0]][path[1]]..., or None when anything is missing."""
    value = report
    for key in path:
        if not isinstance(value, (dict, list)):
            return None
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def sysbench_figures(out, test, server):
    """queries/s, transactions/s and server CPU µs per query of one run."""
    try:
        with open(os.path.join(out, f"sysbench-{test}-{server}.log")) as f:
            log = f.read()
        with open(os.path.join(out, f"sysbench-{test}-{server}.cpu")) as f:
            before, after = (float(x) for x in f.read().split())
    except (OSError, ValueError):
        return {}

    def per_sec(label):
        m = re.search(rf"{label}:\s+(\d+)\s+\(([\d.]+) per sec", log)
        return (int(m.group(1)), float(m.group(2))) if m else (None, None)

    queries, qps = per_sec("queries")
    _, tps = per_sec("transactions")
    cpu_us = (after - before) * 1e6 / queries if queries else None
    return {"qps": qps, "tps": tps, "cpu_us_per_query": cpu_us}


def metrics(out, fixed_rate, sysbench_tests):
    """(key, label, {server: value}) in table order; keys name history columns."""
    rows = []

    def from_reports(key, label, name, *path):
        rows.append((key, label, {s: field(load_json(out, f"{name}-{s}"), *path) for s in SERVERS}))

    from_reports("vote_ops", "vote ops/s", "vote", "ops_per_s")
    from_reports(None, "vote read p95 ms", "vote", "read_p95_ms")
    from_reports(None, "vote write p95 ms", "vote", "write_p95_ms")
    from_reports("vote_cpu_ms_per_op", "vote server CPU ms/op", "vote", "server_cpu_ms_per_op")
    from_reports(None, "vote client CPU ms/op", "vote", "client_cpu_ms_per_op")
    from_reports("lobsters_max", "lobsters max pages/s", "lobsters", "max_pages_per_s")
    fixed = f"@{fixed_rate:g}/s"
    from_reports(None, f"lobsters {fixed} achieved/s", "lobsters-fixed", "runs", 0, "achieved_pages_per_s")
    from_reports(None, f"lobsters {fixed} p95 ms", "lobsters-fixed", "runs", 0, "p95_ms")
    from_reports("lobsters_cpu_ms_per_page", f"lobsters {fixed} server CPU ms/page",
                 "lobsters-fixed", "server_cpu_ms_per_page")
    from_reports(None, f"lobsters {fixed} client CPU ms/page", "lobsters-fixed", "client_cpu_ms_per_page")
    for test in sysbench_tests:
        short = test.replace("oltp_", "")
        figures = {s: sysbench_figures(out, test, s) for s in SERVERS}
        # Point selects are one query per transaction: queries/s is the
        # figure. The others' queries/s and tps differ by a constant factor:
        # only tps goes into the history.
        for key, label in (("qps", "queries/s"), ("tps", "tps"), ("cpu_us_per_query", "server CPU µs/query")):
            if short == "point_select" and key == "tps":
                continue
            history_key = None if short != "point_select" and key == "qps" else f"sysbench_{short}_{key}"
            rows.append((history_key, f"sysbench {short} {label}", {s: figures[s].get(key) for s in SERVERS}))
    return rows


def ratio(values):
    m, l = values["mariadb"], values["ladle"]
    return l / m if isinstance(m, (int, float)) and isinstance(l, (int, float)) and m else None


def print_table(rows):
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    print()
    print(f"{'metric':<40}{'MariaDB':>12}{'Ladle':>12}{'Ladle/MariaDB':>15}")
    for _, label, values in rows:
        r = ratio(values)
        print(f"{label:<40}{fmt(values['mariadb']):>12}{fmt(values['ladle']):>12}"
              f"{'n/a' if r is None else f'{r:.2f}x':>15}")
    print("(MariaDB runs --queries original, Ladle --queries natural; CPU from /proc over the"
          " measured interval; ratios below 1 are better for latency and CPU)")


def history_row(rows, args):
    """The run's line: date, commit, machine, then each keyed figure per
    server and its ratio (`*_ratio` columns are what the chart draws)."""
    row = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": args.commit,
        "host": socket.gethostname(),
        "cores": os.cpu_count(),
        "scale": args.scale,
        "fixed_rate": args.fixed_rate,
    }
    for key, _, values in rows:
        if key is None:
            continue
        for s in SERVERS:
            v = values[s]
            row[f"{key}_{s}"] = "" if v is None else round(v, 4)
        r = ratio(values)
        row[f"{key}_ratio"] = "" if r is None else round(r, 4)
    return row


def append_history(path, row):
    """Appends `row`; when the columns changed, rewrites the file with the
    union of old and new columns so older runs keep their figures."""
    old_rows, columns = [], []
    if os.path.exists(path):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            columns = list(reader.fieldnames or [])
            old_rows = list(reader)
    columns += [c for c in row if c not in columns]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(old_rows + [row])
    print(f"history: appended to {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out_dir")
    p.add_argument("--scale", type=float, required=True)
    p.add_argument("--fixed-rate", type=float, required=True)
    p.add_argument("--sysbench-tests", default="")
    p.add_argument("--history")
    p.add_argument("--commit", default="")
    args = p.parse_args()
    rows = metrics(args.out_dir, args.fixed_rate, args.sysbench_tests.split())
    print_table(rows)
    if args.history:
        append_history(args.history, history_row(rows, args))


if __name__ == "__main__":
    main()
