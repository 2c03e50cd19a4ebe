"""Where a rejax row's training time goes on each side: rollout against epochs of minibatch
steps, for purerl and rejax lean at the same setting.

    python benchmarks/peer_phases.py --peer-python ../rejax-venv/bin/python
    python benchmarks/peer_phases.py --peer-python ... --setting cartpole --total-timesteps 50000

Each side trains the row's program (`peer_rejax.py`'s setting, one seed, rejax lean: no
evaluation inside the program) at 1, 2 and 4 epochs, everything else as the setting has it, the
sides taking turns (purerl, rejax lean, ...) `--repeats` times. A side's training seconds per
env step (compile excluded, the fastest of its repeats) are fitted by least squares as
`rollout + epochs x epoch`: the intercept is the rollout's share (env steps, the policy's
forward pass, the values, GAE and what else runs once per update), the slope one epoch of
minibatch steps (forward, backward and the optimizer over the whole batch). Writes
`results/peer_phases_<setting>.json` and prints both sides' fits and their ratios.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from other_peers import PEERS, purerl_python, run_side
from peers import BENCHMARKS, REPO, git_state, machine, package_versions

EPOCHS = (1, 2, 4)
SIDES = ("purerl", "rejax-lean")


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
    parser.add_argument("--peer-python", required=True, help="rejax's venv's Python")
    parser.add_argument("--setting", default="breakout", choices=("breakout", "cartpole"))
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    peer = PEERS["rejax"]
    best = {side: {e: float("inf") for e in EPOCHS} for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for num_epochs in EPOCHS:
                program = {"setting": args.setting, "num_seeds": 1,
                           "total_timesteps": args.total_timesteps, "num_epochs": num_epochs}
                for side in SIDES:
                    work = Path(tmp) / f"{repeat}_{num_epochs}_{side}"
                    work.mkdir()
                    python = (purerl_python(peer, args.peer_python) if side == "purerl"
                              else args.peer_python)
                    result = run_side(peer, side, python, program, work)
                    per_step = result["train_s"] / result["env_steps"]
                    best[side][num_epochs] = min(best[side][num_epochs], per_step)
                    print(f"{side} {num_epochs} epochs: {1e6 * per_step:.2f} us/step", flush=True)
    fits = {side: {**fit(list(EPOCHS), [best[side][e] for e in EPOCHS]),
                   "train_us_by_epochs": {str(e): round(1e6 * best[side][e], 3) for e in EPOCHS}}
            for side in SIDES}
    ratios = {part: round(fits["rejax-lean"][part] / fits["purerl"][part], 3)
              for part in ("rollout_us", "epoch_us")}
    result = {"setting": args.setting, "total_timesteps": args.total_timesteps,
              "repeats": args.repeats, "fits": fits, "peer_over_purerl": ratios,
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "purerl": git_state(REPO),
              "versions": package_versions(args.peer_python, peer.packages)}
    out = BENCHMARKS / "results" / f"peer_phases_{args.setting}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"fits": fits, "peer_over_purerl": ratios}, indent=2))


if __name__ == "__main__":
    main()
