"""Compares two runs of a named-check program (tests/rails/harness.rb's
"CHECK <name> pass <JSON>" / "CHECK <name> fail <error>" lines): MariaDB's
and Ladle's. Prints the counts, every check's outcome on both, and a diff
of what each check observed where the two differ.

    python3 compare_checks.py MARIADB_OUT LADLE_OUT KNOWN_DIFFERENCES

KNOWN_DIFFERENCES lists checks allowed to differ, one a line:
`<check name>  # <reason>`. With LADLE_RAILS_STRICT=1 the exit status is 1
when Ladle fails a check MariaDB passes or observes something else, for a
check not listed there, or when either run did not finish.
"""

import difflib
import json
import os
import sys


def load(path):
    """({name: (outcome, text)} in order, whether the run finished)."""
    checks, finished = {}, False
    if not os.path.exists(path):
        return checks, finished
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("TOTAL "):
            finished = True
        if not line.startswith("CHECK "):
            continue
        rest = line[len("CHECK "):]
        for outcome in ("pass", "fail"):
            marker = f" {outcome} "
            if marker in rest:
                name, text = rest.split(marker, 1)
                checks[name] = (outcome, text)
                break
    return checks, finished


def known(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition("#")
                out[name.strip()] = reason.strip()
    return out


def same(m, l):
    """Both passed observing the same, or both failed with the same
    exception class (servers word their messages differently)."""
    if m[0] == "fail" and l[0] == "fail":
        return m[1].split(":", 1)[0] == l[1].split(":", 1)[0]
    return m == l


def pretty(text):
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False).splitlines()
    except ValueError:
        return [text]


def main():
    maria, maria_done = load(sys.argv[1])
    ladle, ladle_done = load(sys.argv[2])
    allowed = known(sys.argv[3])
    count = lambda r, o: sum(1 for v in r.values() if v[0] == o)
    print(f"ActiveRecord checks: passed / failed")
    print(f"| | MariaDB | Ladle |")
    print(f"|---|---|---|")
    print(f"| total | {count(maria, 'pass')} / {count(maria, 'fail')} | {count(ladle, 'pass')} / {count(ladle, 'fail')} |")
    names = list(maria) + [n for n in ladle if n not in maria]
    bad = []
    print()
    for name in names:
        m, l = maria.get(name, ("missing", "")), ladle.get(name, ("missing", ""))
        agree = same(m, l)
        mark = "same" if agree else ("known" if name in allowed else "DIFFERS")
        print(f"{m[0]:>7} {l[0]:>7}  {mark:<7} {name}")
        if not agree and name not in allowed:
            bad.append(name)
    for name in names:
        m, l = maria.get(name, ("missing", "")), ladle.get(name, ("missing", ""))
        if same(m, l):
            continue
        print(f"\n== {name}" + (f"  (known: {allowed[name]})" if name in allowed else ""))
        if m[0] == "pass" and l[0] == "pass":
            diff = difflib.unified_diff(pretty(m[1]), pretty(l[1]), "mariadb", "ladle", lineterm="", n=1)
            print("\n".join(diff))
        else:
            print(f"  mariadb: {m[0]} {m[1][:700]}")
            print(f"  ladle:   {l[0]} {l[1][:700]}")
    if not maria_done or not ladle_done:
        print("\na run did not finish: " + ", ".join(n for n, d in (("mariadb", maria_done), ("ladle", ladle_done)) if not d))
        bad.append("(unfinished run)")
    if bad:
        shown = "; ".join(bad[:12]) + ("; ..." if len(bad) > 12 else "")
        print(f"\nLadle differs from MariaDB in {len(bad)} checks not listed as known: {shown}")
        if os.environ.get("LADLE_RAILS_STRICT") == "1":
            sys.exit(1)


main()
