"""The learner's shuffles by each of `prng.permutations_from_bits`' paths: the time to make one
update's permutations (one per epoch) of a batch of each size.

    python benchmarks/shuffles.py                                  # 2^17, 2^20 + 1, 2^21, 2^23
    python benchmarks/shuffles.py --sizes 131072 --epochs 4 --out /tmp/shuffles.json

The paths: `packed` (one sort of packed uint32, the CPU plan up to 2^20 indices), `feistel`
(`prng.feistel_permutation`, the CPU plan beyond), `permutation` (`jax.random.permutation` of a
key per epoch, the plain plan's), each from a key as the learner makes them: its bits drawn,
then the permutations. Each is compiled once per size, called once, then `--repeats` times in
turn with the others (`throughput.timed`); the fastest call counts. A path is skipped where it
does not apply (`packed` above 2^20) or where one call would take minutes (`permutation` above
`--max-permutation-size`). Writes JSON (milliseconds per update's permutations).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
from throughput import timed  # this file's folder is first on sys.path

from purerl.core.prng import draw_bits, permutation_bits_shape, permutations_from_bits
from purerl.plan import CPU

RESULTS = Path(__file__).resolve().parent / "results"
IMPL = "unsafe_rbg"
KEY = jax.random.key(0, impl=IMPL)
PATHS = {  # name: (packed_bits, index_shuffle)
    "packed": (CPU.packed_sort_bits, False),
    "feistel": (0, True),
    "permutation": (0, False),
}


def shuffle_program(epochs: int, size: int, packed_bits: int, index_shuffle: bool):
    """`[epochs, size]` permutations of one path from a key, as the learner makes them (its
    bits drawn, then the permutations), compiled."""
    shape = permutation_bits_shape(epochs, size, IMPL, packed_bits, index_shuffle)

    def shuffle(key):
        (bits,) = draw_bits(key, shape)
        return permutations_from_bits(bits, size, IMPL, packed_bits, index_shuffle)

    return jax.jit(shuffle).lower(KEY).compile()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[2**17, 2**20 + 1, 2**21, 2**23])
    parser.add_argument("--epochs", type=int, default=4, help="permutations per update")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-permutation-size", type=int, default=2**21)
    parser.add_argument("--out", type=Path, default=RESULTS / "shuffles.json")
    args = parser.parse_args()

    rows = []
    for size in args.sizes:
        paths = {name: path for name, path in PATHS.items()
                 if not (name == "packed" and size > 2**path[0])
                 and not (name == "permutation" and size > args.max_permutation_size)}
        programs = {name: shuffle_program(args.epochs, size, *path)
                    for name, path in paths.items()}
        timed(programs, KEY, 1)  # warm
        best, _ = timed(programs, KEY, args.repeats)
        row = {"size": size, "epochs": args.epochs,
               **{name: round(1e3 * seconds, 2) for name, seconds in best.items()}}
        print(json.dumps(row), flush=True)
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"backend": jax.default_backend(), "jax": jax.__version__,
                                    "unit": "ms per update's permutations", "rows": rows},
                                   indent=2) + "\n")


if __name__ == "__main__":
    main()
