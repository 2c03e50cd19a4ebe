"""Where a peer row's training time goes on each side: rollout against epochs of minibatch
steps, for purerl and the peer's lean side (rejax, Brax or Stoix) at the same setting.

    python benchmarks/peer_phases.py --peer-python ../rejax-venv/bin/python
    python benchmarks/peer_phases.py --peer-python ... --setting breakout --num-seeds 8
    python benchmarks/peer_phases.py --peer brax --peer-python ../brax-venv/bin/python \
        --setting inverted_pendulum --total-timesteps 655360 --repeats 1
    python benchmarks/peer_phases.py --peer stoix --peer-python ../stoix-venv/bin/python \
        --setting cartpole --total-timesteps 1310720 --repeats 1

Each side trains the row's program (the driver's setting, rejax lean, Brax lean or Stoix
lean: no evaluation inside the program) at 1, 2 and 4 epochs (Brax's `num_updates_per_batch`),
everything else as the setting has it, the sides taking turns (purerl, the peer, ...)
`--repeats` times. A side's training seconds per
env step (compile excluded, the fastest of its repeats) are fitted by least squares as
`rollout + epochs x epoch`: the intercept is the rollout's share (env steps, the policy's
forward pass, the values, GAE and what else runs once per update), the slope one epoch of
minibatch steps (forward, backward and the optimizer over the whole batch). Writes
`results/peer_phases_<peer>_<setting>.json` (`_<N>seeds` with `--num-seeds N`) and prints both
sides' fits and their ratios.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from harness import BENCHMARKS, REPO, git_state, machine, package_versions
from other_peers import PEERS, run_side, side_python

EPOCHS = (1, 2, 4)
# each peer's side without evaluation inside its program, and its settings
LEAN_SIDES = {"rejax": "rejax-lean", "brax": "brax-lean", "stoix": "stoix-lean"}
SETTINGS = {"rejax": ("breakout", "cartpole"), "brax": ("inverted_pendulum", "hopper"),
            "stoix": ("cartpole", "cartpole-64tanh", "cartpole-purejaxrl")}


def fit(epochs: list, seconds_per_step: list) -> dict:
    """The least-squares fit of seconds per env step against epochs.

    Args:
        epochs: the epochs of each run.
        seconds_per_step: its training seconds per env step.

    Returns:
        `{"rollout_us", "epoch_us"}`: microseconds per env step, once and per epoch.
    """
    slope, intercept = np.polyfit(epochs, seconds_per_step, 1)
    return {"rollout_us": round(1e6 * float(intercept), 3),
            "epoch_us": round(1e6 * float(slope), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", choices=sorted(LEAN_SIDES), default="rejax")
    parser.add_argument("--peer-python", required=True, help="the peer's venv's Python")
    parser.add_argument("--setting", help="a setting of the peer's driver (default: its first)")
    parser.add_argument("--num-seeds", type=int, default=1, help="vmapped seeds (rejax only)")
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    setting = args.setting or SETTINGS[args.peer][0]
    if setting not in SETTINGS[args.peer] or (args.peer != "rejax" and args.num_seeds != 1):
        parser.error(f"--peer {args.peer} takes --setting {' or '.join(SETTINGS[args.peer])}"
                     + ("" if args.peer == "rejax" else " and one seed"))
    peer, sides = PEERS[args.peer], ("purerl", LEAN_SIDES[args.peer])
    best = {side: {e: float("inf") for e in EPOCHS} for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for num_epochs in EPOCHS:
                program = {"setting": setting, "total_timesteps": args.total_timesteps,
                           "num_epochs": num_epochs}
                if args.peer == "rejax":
                    program["num_seeds"] = args.num_seeds
                for side in sides:
                    work = Path(tmp) / f"{repeat}_{num_epochs}_{side}"
                    work.mkdir()
                    result = run_side(peer, side, side_python(peer, side, args.peer_python),
                                      program, work)
                    # all seeds' steps: us per env step of the whole program
                    per_step = result["train_s"] / (result["env_steps"] * args.num_seeds)
                    best[side][num_epochs] = min(best[side][num_epochs], per_step)
                    print(f"{side} {num_epochs} epochs: {1e6 * per_step:.2f} us/step", flush=True)
    fits = {side: {**fit(list(EPOCHS), [best[side][e] for e in EPOCHS]),
                   "train_us_by_epochs": {str(e): round(1e6 * best[side][e], 3) for e in EPOCHS}}
            for side in sides}
    ratios = {part: round(fits[sides[1]][part] / fits["purerl"][part], 3)
              for part in ("rollout_us", "epoch_us")}
    result = {"peer": args.peer, "setting": setting, "num_seeds": args.num_seeds,
              "total_timesteps": args.total_timesteps, "repeats": args.repeats, "fits": fits,
              "peer_over_purerl": ratios,
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "purerl": git_state(REPO),
              "versions": package_versions(args.peer_python, peer.packages)}
    seeds = f"_{args.num_seeds}seeds" if args.num_seeds > 1 else ""
    out = BENCHMARKS / "results" / f"peer_phases_{args.peer}_{setting}{seeds}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"fits": fits, "peer_over_purerl": ratios}, indent=2))


if __name__ == "__main__":
    main()
