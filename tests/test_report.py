"""`python -m purerl.report` and the statistics behind it: rliable's numbers reproduced, the
run directories read, the report written, bad input refused in one line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from purerl.reports import aggregate

REFERENCE = json.loads((Path(__file__).parent / "rliable_reference.json").read_text())


def _aggregates(scores):
    return np.stack([aggregate.mean(scores), aggregate.median(scores), aggregate.iqm(scores),
                     aggregate.optimality_gap(scores)], axis=-1)


def _compare(ours, theirs):
    points, intervals = ours
    assert list(points) == list(theirs["points"])
    for key, point in points.items():
        np.testing.assert_allclose(np.ravel(point), np.ravel(theirs["points"][key]),
                                   rtol=0, atol=1e-6)
        np.testing.assert_allclose(intervals[key].reshape(2, -1),
                                   np.reshape(theirs["intervals"][key], (2, -1)),
                                   rtol=0, atol=1e-6)


@pytest.fixture(params=[aggregate.CHUNK_ELEMENTS, 100], ids=["one-chunk", "many-chunks"])
def chunked(request, monkeypatch):
    """The resamples drawn in one chunk and in many: the same stream, the same numbers."""
    monkeypatch.setattr(aggregate, "CHUNK_ELEMENTS", request.param)


def test_aggregates_and_intervals_equal_rliables(chunked):
    """Mean, median, IQM and optimality gap with their 95% stratified bootstrap intervals, as
    tests/rliable_reference.py had rliable 1.2.0 compute them after `np.random.seed(7)`."""
    groups = {k: np.asarray(v) for k, v in REFERENCE["groups"].items()}
    ours = aggregate.interval_estimates(groups, _aggregates, reps=REFERENCE["reps"],
                                        seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["aggregates"])


def test_probability_of_improvement_equals_rliables(chunked):
    groups = {k: np.asarray(v) for k, v in REFERENCE["groups"].items()}
    pairs = {pair: tuple(groups[name] for name in pair.split(",")) for pair in REFERENCE["pairs"]}
    ours = aggregate.interval_estimates(pairs, aggregate.probability_of_improvement,
                                        reps=REFERENCE["reps"], seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["improvement"])
    assert ours[0]["better,baseline"] > 0.95


def test_performance_profiles_and_iqm_curves_equal_rliables(chunked):
    groups = {k: np.asarray(v) for k, v in REFERENCE["groups"].items()}
    taus = np.asarray(REFERENCE["taus"])
    ours = aggregate.interval_estimates(
        groups, lambda s: aggregate.score_distribution(s, taus), reps=REFERENCE["reps"],
        seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["profiles"])
    curves = {k: np.asarray(v) for k, v in REFERENCE["curves"].items()}  # [N, M, steps]
    ours = aggregate.interval_estimates(
        curves, lambda s: aggregate.iqm(np.moveaxis(s, -1, -3)), reps=REFERENCE["reps"],
        seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["curves_iqm"])


def test_iqm_is_the_mean_of_the_middle_half():
    scores = np.array([[10.0], [1.0], [2.0], [3.0], [4.0], [-50.0], [5.0], [6.0]])
    assert aggregate.iqm(scores) == 3.5  # 2, 3, 4 and 5 of the eight
    assert aggregate.optimality_gap(np.array([[0.5], [2.0]])) == 0.25  # 2.0 counts as 1


# The report on run directories as runs write them ------------------------------------------

def write_run(run_dir: Path, finals, env: str = "CartPole-v1", status: str = "completed",
              sweep=None, curve_from: float = 0.0, **settings):
    """A finished run's summary.json and metrics.jsonl as `purerl.run` writes them, with the
    members' final returns `finals` (a sweep's: grid points x seeds, `sweep` its lists) and
    each member's return rising linearly from `curve_from` to its final return over 10
    updates of 512 steps, evaluated at updates 5 and 10 (eval return = final return + 1)."""
    from dataclasses import asdict

    from conftest import tiny_config

    from purerl.config import result_settings

    config = tiny_config(**{"env.name": env, "num_seeds": len(finals) // _points(sweep),
                            **{f"sweep.{k}": v for k, v in (sweep or {}).items()}, **settings})
    summary = {"env": env, "status": status, "num_seeds": config.num_seeds,
               "final_return": float(np.mean(finals)), "final_return_per_seed": list(finals),
               "config": result_settings(asdict(config))}
    if sweep:
        summary["members"] = [{"member": m, "hparams": config.sweep.grid()[m // config.num_seeds]}
                              for m in range(len(finals))]
    rows = []
    for update in range(1, 11):
        returns = [curve_from + (f - curve_from) * update / 10 for f in finals]
        row = {"update": update, "env_steps": 512 * update, "episode_return": np.mean(returns),
               "episode_return_per_member": returns}
        if update % 5 == 0:
            row["eval_return/1.0"] = np.mean(returns) + 1
            row["eval_return_per_member/1.0"] = [r + 1 for r in returns]
        rows.append(row)
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def _points(sweep):
    return int(np.prod([len(v) for v in (sweep or {}).values()]))


def report(*argv, out):
    from purerl.report import make_report, parse_args

    return make_report(parse_args([*map(str, argv), f"out={out}", "reps=2000"]))


def _group(result, label):
    return next(g for g in result["groups"] if g["label"] == label)


def test_a_hydra_multirun_grouped_by_a_setting(tmp_path):
    """Hydra jobs in numbered folders, 2 seeds each, found recursively and grouped by ppo.lr:
    every seed is a sample; the clearly better learning rate improves on the other."""
    multirun = tmp_path / "multirun" / "2026-12-04" / "10-00-00"
    rng = np.random.default_rng(0)
    for job, lr in enumerate([1e-3, 1e-3, 1e-3, 1e-4, 1e-4, 1e-4]):
        write_run(multirun / str(job), rng.normal(480 if lr == 1e-3 else 200, 10, size=2),
                  **{"ppo.lr": lr})
    (multirun / "multirun.yaml").write_text("hydra: {}\n")
    out = tmp_path / "report"
    result = report(multirun, "group_by=ppo.lr", out=out)
    assert [g["label"] for g in result["groups"]] == ["ppo.lr=0.0001", "ppo.lr=0.001"]
    better = _group(result, "ppo.lr=0.001")
    assert better["runs_per_env"] == 6 and better["envs"] == ["CartPole-v1"]
    scores = np.asarray(better["scores"])
    assert better["iqm"]["point"] == pytest.approx(aggregate.iqm(scores))
    low, high = better["iqm"]["interval"]
    assert low < better["iqm"]["point"] < high
    assert result["optimality_target"] == 475  # CartPole-v1's in conf/score_ranges.yaml
    (improvement,) = [r for r in result["improvement"] if r["x"] == "ppo.lr=0.001"]
    assert improvement["point"] > 0.95 and improvement["interval"][0] > 0.9
    for name in ("report.md", "report.json", "performance_profiles.png", "sample_efficiency.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "performance_profiles.png").read_bytes().startswith(b"\x89PNG")
    text = (out / "report.md").read_text()
    assert "| ppo.lr=0.001 | 6 x 1 |" in text and "Probability of improvement" in text
    assert json.loads((out / "report.json").read_text())["groups"] == result["groups"]


def test_a_sweeps_members_and_a_multi_seed_run_grouped_by_run(tmp_path):
    """By run: a vmapped sweep's grid points are groups of their seeds, a plain run's seeds
    one group; raw returns of one env; eval_return/1.0 read from the last evaluation."""
    sweep = write_run(tmp_path / "sweep", [400.0, 410.0, 420.0, 100.0, 110.0, 120.0],
                      sweep={"lr": [1e-3, 1e-4]})
    seeds = write_run(tmp_path / "seeds", [300.0, 310.0, 320.0])
    result = report(sweep, seeds, "metric=eval_return/1.0", out=tmp_path / "report")
    assert [g["label"] for g in result["groups"]] == ["sweep lr=0.001", "sweep lr=0.0001", "seeds"]
    assert _group(result, "sweep lr=0.001")["scores"] == [[401.0], [411.0], [421.0]]
    assert _group(result, "seeds")["mean"]["point"] == pytest.approx(311.0)
    assert result["normalized_by"] is None and result["samples"] == 9
    curve = result["curves"]["sweep lr=0.0001"]
    assert curve["env_steps"][0] == 5 * 512 and curve["env_steps"][-1] == 10 * 512  # evaluations
    assert curve["iqm"][-1] == pytest.approx(111.0)


def test_group_by_a_swept_setting_pools_sweep_members_with_plain_runs(tmp_path):
    sweep = write_run(tmp_path / "sweep", [400.0, 410.0, 100.0, 110.0], sweep={"lr": [1e-3, 1e-4]})
    plain = write_run(tmp_path / "plain", [420.0, 430.0], **{"ppo.lr": 1e-3})
    result = report(sweep, plain, "group_by=ppo.lr", out=tmp_path / "report")
    assert _group(result, "ppo.lr=0.001")["scores"] == [[400.0], [410.0], [420.0], [430.0]]
    assert _group(result, "ppo.lr=0.0001")["runs"] == [str(sweep)]


def test_several_envs_normalized_by_the_presets_ranges(tmp_path):
    """Scores on CartPole and Acrobot become (return - random) / (target - random) with
    conf/score_ranges.yaml's ranges: a group's envs are its tasks."""
    write_run(tmp_path / "cartpole", [475.0, 22.5])  # the target and the random return
    write_run(tmp_path / "acrobot", [-100.0, -299.35], env="Acrobot-v1")
    result = report(tmp_path, "group_by=all", out=tmp_path / "report")
    (group,) = result["groups"]
    assert group["label"] == "all" and group["envs"] == ["Acrobot-v1", "CartPole-v1"]
    np.testing.assert_allclose(group["scores"], [[1.0, 1.0], [0.5, 0.0]])
    assert result["optimality_target"] == 1.0
    assert set(result["normalized_by"]) == {"Acrobot-v1", "CartPole-v1"}
    ranges = tmp_path / "ranges.yaml"
    ranges.write_text("CartPole-v1: {random: 0, target: 500}\n")
    result = report(tmp_path / "cartpole", f"normalize={ranges}", out=tmp_path / "report")
    assert result["groups"][0]["scores"] == [[0.95], [0.045]]


def test_runs_that_did_not_finish_are_skipped_and_named(tmp_path):
    write_run(tmp_path / "done", [1.0, 2.0])
    write_run(tmp_path / "failed", [5.0, 6.0], status="nonfinite")
    result = report(tmp_path, out=tmp_path / "report")
    assert [g["label"] for g in result["groups"]] == [str(tmp_path / "done")]
    assert result["skipped"] == [{"run": str(tmp_path / "failed"), "status": "nonfinite"}]
    assert "(nonfinite)" in (tmp_path / "report" / "report.md").read_text()



def test_tied_runs_draw_a_profile_that_steps_at_the_tie(tmp_path, monkeypatch):
    """Every run scores the same: the profile's thresholds span the tie, and its figure shows
    the step from 1 (below it) to 0 (at and above it), not an empty axes."""
    from purerl.logging import plots

    figures, save_png = {}, plots.save_png

    def save_and_keep(fig, path):
        figures[path.name] = fig
        save_png(fig, path)

    monkeypatch.setattr(plots, "save_png", save_and_keep)
    write_run(tmp_path / "tied", [500.0, 500.0, 500.0])
    result = report(tmp_path / "tied", out=tmp_path / "report")
    taus = np.asarray(result["profiles"]["taus"])
    (profile,) = result["profiles"]["groups"].values()
    assert taus[0] < 500.0 < taus[-1]
    assert np.array_equal(profile["fraction"], np.where(taus < 500.0, 1.0, 0.0))
    (line,) = figures["performance_profiles.png"].axes[0].lines
    assert np.ptp(line.get_xdata()) > 0 and set(line.get_ydata()) == {0.0, 1.0}

ERRORS = [
    ("missing", [], r"^no runs found in \S*missing: no such directory$"),
    ("empty", [], r"^no runs found in \S*empty \(a run directory holds summary.json\)$"),
    ("mixed", [], r"^the runs are of 2 envs \(Acrobot-v1, CartPole-v1\) and normalize=none: "),
    ("one", [], r"^group '\S+' has 1 run of CartPole-v1 \(\S+\): a confidence interval needs "),
    ("runs", ["metric=eval_return/0.5"], r"^metric=eval_return/0.5: \S+ has no such metric \(it "
     r"has final_return, eval_return/1.0\)$"),
    ("runs", ["metric=final"], r"^unknown metric=final: final_return, or eval_return/"),
    ("runs", ["group_by=ppo.lrr"], r"^unknown group_by=ppo.lrr: run, all, or a setting that "
     r"shapes the result, such as ppo.lr \(did you mean ppo.lr\?\)$"),
    ("runs", ["group_by=eval.every"], r"^unknown group_by=eval.every: "),
    ("asterix", [], r"^normalize=presets: \S+score_ranges.yaml has no score range \(random and "
     r"target\) of Asterix-MinAtar; give normalize=<file.yaml> with a line "),
]


@pytest.fixture
def bad_inputs(tmp_path):
    """Folders of runs that a report refuses, by name."""
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    write_run(tmp_path / "mixed" / "a", [1.0, 2.0])
    write_run(tmp_path / "mixed" / "b", [1.0, 2.0], env="Acrobot-v1")
    write_run(tmp_path / "one" / "a", [1.0])
    write_run(tmp_path / "runs" / "a", [1.0, 2.0])
    write_run(tmp_path / "asterix" / "a", [1.0, 2.0], env="Asterix-MinAtar")
    write_run(tmp_path / "asterix" / "b", [1.0, 2.0], env="Breakout-MinAtar")
    return tmp_path


@pytest.mark.parametrize("folder, argv, message", ERRORS)
def test_bad_input_is_one_line(bad_inputs, folder, argv, message):
    from purerl.config import ConfigError

    args = [folder, *argv] + (["normalize=none"] if folder == "mixed" else [])
    with pytest.raises(ConfigError) as error:
        report(*[bad_inputs / a if a == folder else a for a in args], out=bad_inputs / "out")
    assert re.search(message, str(error.value)), str(error.value)
    assert "\n" not in str(error.value)


def test_a_failed_write_names_the_path(bad_inputs):
    from purerl.storage.write_errors import WriteError

    (bad_inputs / "a_file").write_text("")
    with pytest.raises(WriteError, match=r"^cannot write \S+a_file/out: Not a directory$"):
        report(bad_inputs / "runs", out=bad_inputs / "a_file" / "out")


def test_the_command_line_prints_the_report_and_errors_in_one_line(bad_inputs, tmp_path):
    """`python -m purerl.report` as a user runs it: the report on stdout and in `out`; bad
    input one line on stderr, exit code 2, no traceback; `--help`."""
    import subprocess
    import sys

    from conftest import cli_env

    def command(*argv):
        return subprocess.run([sys.executable, "-m", "purerl.report", *map(str, argv)],
                              cwd=tmp_path, env=cli_env(), capture_output=True, text=True)

    result = command(bad_inputs / "runs", "reps=1000")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# purerl report")
    assert f"| {bad_inputs / 'runs' / 'a'} | 2 x 1 |" in result.stdout
    assert f"wrote report{os.sep}report.md" in result.stdout
    assert (tmp_path / "report" / "sample_efficiency.png").exists()
    result = command(bad_inputs / "one")
    assert result.returncode == 2 and not result.stdout
    assert result.stderr.startswith("purerl: error: group ") and result.stderr.count("\n") == 1
    assert command("--help").stdout.startswith("Command line: `python -m purerl.report DIR")


# A real run ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """A tiny CartPole run of 2 seeds in one program, evaluated every 4 of its 8 updates."""
    from conftest import tiny_config

    import purerl
    from purerl.config import LogConfig

    run_dir = tmp_path_factory.mktemp("two_seeds")
    config = tiny_config(num_seeds=2, **{"eval.every": 4, "eval.num_episodes": 2,
                                         "log": LogConfig(tensorboard=False, progress=False)})
    purerl.run(config, run_dir)
    return run_dir


def test_metrics_jsonl_keeps_each_seeds_values(two_seeds):
    """Every row has each seed's episode return and length beside their pooled mean, and an
    evaluated row each seed's eval return; summary.json has the run's settings."""
    rows = [json.loads(line) for line in (two_seeds / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((two_seeds / "summary.json").read_text())
    assert [r["update"] for r in rows] == list(range(1, 9))
    for row in rows:
        returns, lengths = row["episode_return_per_member"], row["episode_length_per_member"]
        assert len(returns) == len(lengths) == 2
        assert min(returns) <= row["episode_return"] <= max(returns)  # pooled over the seeds
        assert returns == lengths  # CartPole pays 1 per step
    evaluated = [r for r in rows if "eval_return/1.0" in r]
    assert [r["update"] for r in evaluated] == [4, 8]
    for row in evaluated:
        per_seed = row["eval_return_per_member/1.0"]
        assert np.mean(per_seed) == pytest.approx(row["eval_return/1.0"], rel=1e-6)
    np.testing.assert_allclose(rows[-1]["episode_return_per_member"],
                               summary["final_return_per_seed"], rtol=1e-6)
    assert summary["config"]["num_seeds"] == 2 and summary["config"]["env"]["num_envs"] == 4
    assert "resume" not in summary["config"]  # what may change on resume is left out


def test_a_report_of_a_real_run(two_seeds, tmp_path):
    result = report(two_seeds, "metric=eval_return/1.0", out=tmp_path)
    (group,) = result["groups"]
    rows = [json.loads(line) for line in (two_seeds / "metrics.jsonl").read_text().splitlines()]
    assert np.ravel(group["scores"]).tolist() == rows[-1]["eval_return_per_member/1.0"]
    assert result["curves"][group["label"]]["env_steps"][-1] == 512
