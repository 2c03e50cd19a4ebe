"""Action masks (`purerl.envs.suites.base`): an illegal action is never sampled, in training,
evaluation or the evaluate CLI, and the policy learns among the legal ones."""

import json
import subprocess
import sys

from conftest import REPO, cli_env

TINY = ["+env=gymnax", "env.name=custom_envs:AlternatingMask", "ppo.num_steps=10",
        "ppo.anneal_lr=false", "ppo.lr=0.01", "total_timesteps=2000",
        "network.hidden_sizes=[16]", "eval.every=5", "eval.num_episodes=4"]


def test_illegal_actions_never_taken_and_the_legal_best_learned(cli, tmp_path):
    result = cli(*TINY, f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    returns = [row["episode_return"] for row in rows if "episode_return" in row]
    # an illegal action costs -10; action 0, legal on odd steps only, earns 1 (best: 5)
    assert returns and min(returns) >= 0.0
    evals = [row for row in rows if any(key.startswith("eval") for key in row)]
    # the mean and each member's (`eval_return_per_member/<T>`, a list)
    evaluated_returns = [v for row in evals for key, value in row.items()
                         if key.startswith("eval_return")
                         for v in (value if isinstance(value, list) else [value])]
    assert evaluated_returns and min(evaluated_returns) >= 0.0
    assert returns[-1] >= 4.5
    evaluated = subprocess.run(
        [sys.executable, "-m", "purerl.evaluate", f"run={tmp_path}", "episodes=8",
         "temperatures=[1.0]"], cwd=REPO, env=cli_env(), capture_output=True, text=True,
        timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    row = evaluated.stdout.strip().splitlines()[-1].split("|")  # temperature | return | ...
    assert float(row[0]) == 1.0 and float(row[1]) >= 0.0


def test_a_mask_of_the_wrong_size_is_one_line(cli, tmp_path):
    result = cli("+env=gymnax", "env.name=custom_envs:mask_of_three", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "its action mask has 3 entries" in result.stderr
    assert "Traceback" not in result.stderr
