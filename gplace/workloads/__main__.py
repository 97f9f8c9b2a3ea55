"""Command line of the workload zoo.

  python -m gplace.workloads export --out DIR [--size tiny] [--step train]
  python -m gplace.workloads table [--size paper] [--step train]
  python -m gplace.workloads list
"""

from __future__ import annotations

import argparse
import sys

from gplace import workloads
from gplace.errors import GplaceError
from gplace.workloads import zoo


def _parse(argv):
  parser = argparse.ArgumentParser(
      prog="python -m gplace.workloads",
      description="Capture the workload zoo into gplace graphs.")
  commands = parser.add_subparsers(dest="command", required=True)
  commands.add_parser("list", help="print the workload names")
  for command, text in (("export", "capture and save .npz graphs"),
                        ("table", "capture and print a markdown table")):
    sub = commands.add_parser(command, help=text)
    if command == "export":
      sub.add_argument("--out", required=True, help="output directory")
    sub.add_argument("--size", default="tiny", choices=workloads.SIZES)
    sub.add_argument("--step", default="train",
                     choices=workloads.STEPS + ("both",))
    sub.add_argument("--names", default="",
                     help="comma-separated workload names (default: all)")
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = _parse(argv)
  if args.command == "list":
    print("\n".join(workloads.names()))
    return 0
  names = [n for n in args.names.split(",") if n] or None
  steps = workloads.STEPS if args.step == "both" else (args.step,)
  out_dir = getattr(args, "out", None)
  unknown = [n for n in names or () if n not in workloads.names()]
  if unknown:
    print(f"error: unknown workload(s) {', '.join(unknown)}; choose from: "
          f"{', '.join(workloads.names())}.", file=sys.stderr)
    return 2
  print(zoo.TABLE_HEADER, flush=True)
  progress = lambda row: print(zoo.format_table([row]).splitlines()[-1],
                               flush=True)
  try:
    for step in steps:
      zoo.zoo_rows(args.size, step, names, out_dir=out_dir, progress=progress)
  except GplaceError as err:
    print(f"error: {err}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
