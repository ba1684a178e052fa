"""Compare pgtail's per-row work in two source trees, as pairwise ratios over alternating runs.

Captures each case's transaction once (``bench/feed.py``'s capture, on a throwaway
server), then times ``bench/feed.py``'s ``timed`` in a fresh process per run with
``PYTHONPATH`` pointing at one tree or the other, alternating which goes first each
round, and prints per case and format the median µs per row of each tree and the
median of the pairwise ratios (new / base). On a shared, noisy machine the pairwise
median is the figure to trust.

    python bench/compare.py --base ../pgtail-before [--new .] [--rounds 3]
                            [--cases insert,update,delete,streamed] [--formats json,sql]

(cases: those of `bench/feed.py`: also update-full, update-key, small)
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# run in a child: time one case and format in the tree named by PGTAIL_TREE
_CHILD = """
import os, pickle, sys
tree = os.environ["PGTAIL_TREE"]
sys.path[:0] = [tree, os.path.join(tree, "bench")]
import pgtail
assert pgtail.__file__.startswith(tree), pgtail.__file__
from feed import timed
path, fmt, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "rb") as fh:
    proto, payloads = pickle.load(fh)
results = [timed(proto, payloads, fmt) for _ in range(repeat)]
per_row = 1e6 / results[0][2]
print(min(r[0] for r in results) * per_row + min(r[1] for r in results) * per_row)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the tree to compare against")
    parser.add_argument("--new", default=str(HERE.parent), help="default: this tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="passes per run (best taken)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cases", default="insert,update,delete,streamed")
    parser.add_argument("--formats", default="json,sql")
    args = parser.parse_args()
    trees = {"base": str(Path(args.base).resolve()), "new": str(Path(args.new).resolve())}
    sys.path.insert(0, str(HERE))
    from feed import capture

    with tempfile.TemporaryDirectory(prefix="pgtail-compare-") as tmp:
        captured = {}
        for case in args.cases.split(","):
            proto, payloads = capture(case, args.rows)
            captured[case] = Path(tmp, f"{case}.pkl")
            captured[case].write_bytes(pickle.dumps((proto, payloads)))
        times: dict[tuple[str, str, str], list[float]] = {}
        ratios: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds):
            order = ["base", "new"] if round_ % 2 == 0 else ["new", "base"]
            for case, path in captured.items():
                for fmt in args.formats.split(","):
                    got = {}
                    for which in order:
                        env = dict(os.environ, PGTAIL_TREE=trees[which])
                        out = subprocess.run(
                            [sys.executable, "-c", _CHILD, str(path), fmt, str(args.repeat)],
                            env=env,
                            check=True,
                            capture_output=True,
                            text=True,
                            cwd=tmp,
                        ).stdout
                        got[which] = float(out.strip().splitlines()[-1])
                        times.setdefault((case, fmt, which), []).append(got[which])
                    ratios.setdefault((case, fmt), []).append(got["new"] / got["base"])
    print(f"µs per row (feed + render), median of {args.rounds} alternating rounds")
    print(f"{'case':<10}{'format':<7}{'base':>8}{'new':>8}  new/base pairwise (median)")
    for (case, fmt), pair in ratios.items():
        base = statistics.median(times[(case, fmt, "base")])
        new = statistics.median(times[(case, fmt, "new")])
        shown = ", ".join(f"{r:.3f}" for r in pair)
        print(f"{case:<10}{fmt:<7}{base:>8.2f}{new:>8.2f}  {shown} ({statistics.median(pair):.3f})")


if __name__ == "__main__":
    main()
