"""benchmarks/harness.py and peers.py: reading a learning curve to a time to a return, and
how the runner pairs, runs and compares the sides of a peer."""

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import harness as curves  # noqa: E402

NAN = float("nan")


def test_first_reach_skips_points_without_episodes_and_below_the_threshold():
    steps = [100, 200, 300, 400]
    assert curves.reach_index([10.0, NAN, 475.0, 500.0], 475.0) == 2
    assert curves.first_reach(steps, [10.0, NAN, 475.0, 500.0], 475.0) == 300
    assert curves.first_reach(steps, [None, 474.9, NAN, 12.0], 475.0) is None


def test_time_to_return_adds_the_share_of_training_up_to_the_point():
    steps = [250, 500, 750, 1000]
    returns = [20.0, 480.0, 500.0, 500.0]
    # 500 of 1000 steps: half of 8 s of training after 3 s of start-up and compile
    assert curves.time_to_return(steps, returns, 475.0, before_train_s=3.0, train_s=8.0,
                                 total_steps=1000) == 7.0
    assert curves.time_to_return(steps, [1.0] * 4, 475.0, before_train_s=3.0, train_s=8.0,
                                 total_steps=1000) is None


def test_time_to_return_caps_at_the_whole_training():
    # an evaluation logged past the budget (rejax rounds its iterations up) is the end
    assert curves.time_to_return([0, 1200], [0.0, 11.0], 10.0, before_train_s=1.0,
                                 train_s=4.0, total_steps=1000) == 5.0


def test_tail_mean_is_the_last_twentieth_without_nans():
    values = [0.0] * 38 + [NAN, 300.0]
    assert curves.tail_mean(values) == 300.0  # the last 2 of 40 points, the NaN left out
    assert curves.tail_mean([1.0, 2.0, 3.0]) == 3.0  # at least one point
    assert curves.tail_mean([5.0, NAN]) is None


def test_launched_at_prefers_the_stamp_handed_down(monkeypatch):
    monkeypatch.delenv(curves.LAUNCHED_AT, raising=False)
    assert curves.launched_at(12.5) == 12.5
    monkeypatch.setenv(curves.LAUNCHED_AT, "100.25")
    assert curves.launched_at(12.5) == 100.25


def test_peak_rss_is_positive_mib():
    peak = curves.peak_rss_mib()
    assert peak > 1 and not math.isnan(peak)


def test_rounded_curves_hold_no_nan():
    assert curves.rounded([1.234, NAN, None, 500.0]) == [1.23, None, None, 500.0]


def test_budgets_as_the_peers_split_them():
    import peer_rejax
    import peer_sb3

    cartpole = peer_rejax.REJAX_SETTINGS["cartpole"]
    breakout = peer_rejax.REJAX_SETTINGS["breakout"]
    # rejax rounds evaluations and the iterations between them up
    assert peer_rejax.rejax_schedule(cartpole, lean=False) == (100, 2, 100_000)
    assert peer_rejax.rejax_schedule(cartpole, lean=True) == (200, 1, 100_000)
    assert peer_rejax.rejax_schedule(breakout, lean=False) == (20, 49, 1_003_520)
    assert peer_rejax.rejax_schedule(breakout, lean=True) == (977, 1, 1_000_448)
    # SB3 runs whole rollouts of 8 x 32 steps to at least the budget
    assert peer_sb3.budget({}) == (100_000, 100_096)
    assert peer_sb3.budget({"total_timesteps": 512}) == (512, 512)


def test_a_turn_that_never_reaches_is_counted():
    import peers

    def run(seconds):
        return {"setting": "cartpole-zoo", "time_to_return_s": seconds, "sps": 10}

    turns = [[{"sb3": run(None), "purerl": run(3.0)}], [{"sb3": run(2.0), "purerl": run(4.0)}]]
    (table,) = peers.comparisons(turns, [("sb3", "purerl")])
    lines = {line["what"][:20]: line for line in table["lines"]}
    reached = lines["time to the return t"]
    assert reached["what"].endswith("(reached in 1 of 2 turns by sb3, 2 by purerl)")
    assert reached["ratio"] == 1.75 and reached["turn_ratios"] is None  # medians 2 and 3.5
    assert lines["training, compile ex"]["turn_ratios"] == [1.0, 1.0]
    assert len(lines) == 2  # the measures neither side has are left out


def test_clock_time_to_return_reads_the_first_reaching_point():
    times = [105.0, 110.0, 130.0]
    assert curves.clock_time_to_return(times, [9.0, 10.0, 12.0], 10.0, launched=100.0) == 10.0
    assert curves.clock_time_to_return(times, [9.0, NAN, 2.0], 10.0, launched=100.0) is None


def test_rollout_curve_groups_monitor_episodes_by_the_rollout_they_ended_in(tmp_path):
    # 2 envs, rollouts of 2 x 4 = 8 steps, 24 steps in all
    (tmp_path / "0.monitor.csv").write_text(
        '#{"t_start": 100.0, "env_id": "CartPole-v1"}\nr,l,t\n3.0,3,1.0\n5.0,5,2.0\n')
    (tmp_path / "1.monitor.csv").write_text(
        '#{"t_start": 100.5, "env_id": "CartPole-v1"}\nr,l,t\n4.0,4,1.5\n')
    import peer_sb3

    t_start, episodes = peer_sb3.monitor_episodes(tmp_path)
    assert t_start == 100.0
    assert sorted(episodes) == [(0, 3.0, 3, 101.0), (0, 5.0, 5, 102.0), (1, 4.0, 4, 102.0)]
    steps, returns, times = peer_sb3.rollout_curve(episodes, n_envs=2, rollout_steps=8,
                                                 total_steps=24)
    # env 0 ends at global steps 6 and 16, env 1 at 8: rollouts 1, 2 and 1
    assert steps == [8, 16, 24]
    assert returns[:2] == [3.5, 5.0] and math.isnan(returns[2])
    assert times == [102.0, 102.0, None]


def test_moving_mean_trails_over_a_twentieth_of_the_points():
    values = [0.0] * 18 + [500.0, NAN]  # 20 points: a window of one
    assert curves.moving_mean(values)[18] == 500.0 and math.isnan(curves.moving_mean(values)[19])
    values = [0.0] * 38 + [500.0, 500.0]  # 40 points: a window of two
    assert curves.moving_mean(values)[-3:] == [0.0, 250.0, 500.0]


def test_reaching_reads_a_lucky_point_and_the_moving_mean_apart():
    steps = list(range(100, 4100, 100))  # 40 points, a window of two
    returns = [10.0] * 10 + [500.0] + [10.0] * 19 + [480.0] * 10
    rate = curves.reaching(steps, returns, 475.0, launched=0.0, before_train_s=2.0,
                           train_s=4.0, total_steps=4000)
    assert rate["reached_at_steps"] == 1100 and rate["time_to_return_s"] == 3.1
    assert rate["reached_smoothed_at_steps"] == 3200
    assert rate["time_to_return_smoothed_s"] == 5.2
    assert rate["time_to_return_from"] == "rate"
    times = [None] * 31 + [50.0] + [None] * 8  # a clock taken at some points only
    clock = curves.reaching(steps, returns, 475.0, launched=20.0, times=times)
    assert clock["time_to_return_s"] is None  # no clock taken by the lucky point
    assert clock["time_to_return_smoothed_s"] == 30.0


def test_stoix_splits_its_budget_into_evaluations_and_decays_lr_past_its_end():
    import peer_stoix

    cartpole = peer_stoix.settings_of({"setting": "cartpole"})
    # 1e7 // (1024 x 128) = 76 updates asked for, 20 calls of 3 run
    assert peer_stoix.stoix_schedule(cartpole) == (76, 3, 60)
    small = peer_stoix.settings_of({"setting": "cartpole-purejaxrl"})
    assert peer_stoix.stoix_schedule(small) == (976, 48, 960)
    # a cut budget keeps one update and no more evaluations than updates
    cut = peer_stoix.settings_of({"setting": "cartpole", "total_timesteps": 20_000})
    assert (cut["total_timesteps"], cut["num_evaluation"]) == (131_072, 1)
    assert peer_stoix.stoix_schedule(cut) == (1, 1, 1)
    assert peer_stoix.STOIX_SETTINGS["cartpole"]["total_timesteps"] == 10_000_000  # uncut


def test_stoix_overrides_name_only_what_differs_from_its_defaults():
    import peer_stoix

    assert peer_stoix.overrides(peer_stoix.STOIX_SETTINGS["cartpole"]) == []
    assert peer_stoix.overrides(peer_stoix.STOIX_SETTINGS["cartpole-64tanh"]) == [
        "network.actor_network.pre_torso.layer_sizes=[64,64]",
        "network.critic_network.pre_torso.layer_sizes=[64,64]",
        "network.actor_network.pre_torso.activation=tanh",
        "network.critic_network.pre_torso.activation=tanh"]
    small = peer_stoix.overrides(peer_stoix.STOIX_SETTINGS["cartpole-purejaxrl"])
    assert "arch.total_num_envs=4" in small and "system.num_minibatches=4" in small
    assert "system.actor_lr=0.00025" in small and "system.critic_lr=0.00025" in small
    assert not any(o.startswith("system.epochs") for o in small)  # 4 is Stoix's default
    # a program's epochs reach both sides
    two = {"setting": "cartpole", "num_epochs": 2}
    assert peer_stoix.overrides(peer_stoix.settings_of(two)) == ["system.epochs=2"]
    assert peer_stoix.purerl_config(two).ppo.num_epochs == 2


def test_covered_counts_nested_and_overlapping_spans_once_inside_the_window():
    import peer_stoix

    spans = [(1.0, 4.0), (2.0, 3.0), (3.5, 5.0), (8.0, 12.0), (20.0, 21.0)]
    # [1, 5] once (nested and overlapping), [8, 10] cut by the window's end
    assert peer_stoix.covered(spans, 0.0, 10.0) == 6.0
    assert peer_stoix.covered(spans, 4.5, 9.0) == 1.5
    assert peer_stoix.covered([], 0.0, 1.0) == 0.0


def test_purerl_matches_the_updates_and_lr_stoix_runs():
    import peer_stoix

    config = peer_stoix.purerl_config({"setting": "cartpole"})
    assert config.num_updates == 60 and config.batch_size == 1024 * 128
    assert config.ppo.num_minibatches == 16 and config.network.hidden_sizes == [256, 256]
    lr = config.schedules()["lr"]
    assert lr.kind == "linear" and abs(lr.end - 16 / 76) < 1e-12
    # at update u both give lr x (1 - u / 76)
    assert abs((1 + (lr.end - 1) * 30 / 60) - (1 - 30 / 76)) < 1e-12


def test_side_result_reads_the_run_and_its_curve():
    run = {"env_steps": 1000, "train_s": 4.0, "before_train_s": 2.0, "compile_s": 1.5,
           "steps": [250, 500, 750, 1000], "returns": [10.0, 480.0, NAN, 500.0], "times": None}
    result = curves.side_result({"setting": "x"}, "peer", "CartPole-v1", run, kind="k",
                                startup_s=0.5, launched=0.0, num_seeds=2)
    assert result["sps"] == 500  # both seeds' 1,000 steps in 4 s
    assert result["compile_s"] == 1.5 and result["num_seeds"] == 2 and result["setting"] == "x"
    assert result["time_to_return_s"] == 4.0  # 2 s before training + half of 4 s
    assert result["final_return"] == 500.0
    assert result["curve"] == {"kind": "k", "steps": [250, 500, 750, 1000],
                               "returns": [10.0, 480.0, None, 500.0]}
    assert "steps" in run  # the run is left as it was


def test_brax_splits_its_budget_into_stretches_between_evaluations():
    import peer_brax

    pendulum = peer_brax.BRAX_SETTINGS["inverted_pendulum"]
    hopper = peer_brax.BRAX_SETTINGS["hopper"]
    assert peer_brax.update_steps(pendulum) == 1024 * 32 * 5
    # 19 stretches of at least one 163,840-step update: 3.1M steps for the notebook's 2M
    assert peer_brax.brax_schedule(pendulum, pendulum["num_evals"]) == (19, 1, 3_112_960)
    assert peer_brax.brax_schedule(pendulum, 0) == (1, 13, 2_129_920)
    assert peer_brax.brax_schedule(hopper, hopper["num_evals"]) == (4, 7, 1_146_880)
    assert peer_brax.brax_schedule(hopper, 0) == (1, 25, 1_024_000)


def test_a_cut_brax_budget_keeps_at_most_an_evaluation_per_update():
    import peer_brax

    cut = peer_brax.settings_of({"setting": "inverted_pendulum", "total_timesteps": 327_680})
    assert cut["num_evals"] == 3 and cut["num_timesteps"] == 327_680
    assert peer_brax.brax_schedule(cut, cut["num_evals"]) == (2, 1, 327_680)
    assert peer_brax.settings_of({"setting": "hopper"}) == peer_brax.BRAX_SETTINGS["hopper"]


def test_purerl_matches_brax_update_layout():
    import peer_brax
    import pytest

    pendulum = peer_brax.BRAX_SETTINGS["inverted_pendulum"]
    assert peer_brax.purerl_num_steps(pendulum) == 80  # 16 unrolls of 5 steps per env
    assert peer_brax.purerl_num_steps(peer_brax.BRAX_SETTINGS["hopper"]) == 160
    config = peer_brax.purerl_config({"setting": "inverted_pendulum"}, 2_129_920)
    assert config.batch_size == peer_brax.update_steps(pendulum)
    assert config.batch_size // config.ppo.num_minibatches == 1024 * 5  # Brax's minibatch
    assert (config.ppo.num_epochs, config.ppo.gamma, config.ppo.clip_eps) == (4, 0.97, 0.3)
    assert config.env.name == "brax/inverted_pendulum" and config.env.backend == "positional"
    with pytest.raises(ValueError, match="not a multiple of num_envs"):
        peer_brax.purerl_num_steps(dict(pendulum, num_envs=3000))


def test_a_brax_row_scaled_up_for_a_gpu_keeps_its_minibatches_of_sequences():
    import peer_brax

    wide = peer_brax.settings_of({"setting": "inverted_pendulum", "num_envs": 65_536,
                                  "batch_size": 2048, "total_timesteps": 20_000_000})
    assert peer_brax.update_steps(wide) == 2048 * 32 * 5
    assert peer_brax.purerl_num_steps(wide) == 5  # one unroll per env and update
    assert peer_brax.brax_schedule(wide, 0) == (1, 62, 62 * 327_680)
    config = peer_brax.purerl_config({"setting": "inverted_pendulum", "num_envs": 65_536,
                                      "batch_size": 2048}, 62 * 327_680)
    assert (config.env.num_envs, config.ppo.num_steps, config.num_updates) == (65_536, 5, 62)
    assert config.batch_size // config.ppo.num_minibatches == 2048 * 5


def test_compile_clock_sums_only_compile_events():
    clock = curves.CompileClock()
    clock("/jax/core/compile/jaxpr_trace_duration", 0.5, fun_name="f")
    clock("/jax/core/compile/backend_compile_duration", 2.0)
    clock("/jax/compilation_cache/cache_retrieval_time_sec", 9.0)
    assert (clock.seconds(curves.LOWERING_EVENTS), clock.seconds()) == (0.5, 2.5)


def test_brax_as_shipped_is_compared_with_purerl_with_evaluations_and_lean():
    """A Brax row's tables: Brax as shipped against purerl-eval and purerl, Brax lean against
    purerl; each line's values are the compared sides' own."""
    import peers

    brax = peers.peer_of("brax")
    assert brax.purerl_in_peer_python and not peers.peer_of("rejax").purerl_in_peer_python

    def result(sps):
        return {"setting": "inverted_pendulum", "env": "brax/inverted_pendulum",
                "num_seeds": 1, "env_steps": 100, "sps": sps}

    turns = [[{"purerl": result(17.0), "purerl-eval": result(14.0), "brax": result(12.0),
               "brax-lean": result(15.0)}]]
    tables = peers.comparisons(turns, peers.pairs(brax, brax.sides, list(brax.purerl_sides),
                                                  plans=False))
    assert [(t["side"], t["purerl_side"]) for t in tables] == [
        ("brax", "purerl"), ("brax", "purerl-eval"), ("brax-lean", "purerl")]
    ratios = [next(line["ratio"] for line in t["lines"] if line["unit"] == "steps/s")
              for t in tables]
    assert ratios == [round(17.0 / 12.0, 3), round(14.0 / 12.0, 3), round(17.0 / 15.0, 3)]


def test_with_plans_every_plan_is_compared_with_the_peer():
    import peers

    purejaxrl = peers.peer_of("purejaxrl")
    ours = ["purerl:plain", "purerl:towers_apart"]
    assert peers.pairs(purejaxrl, ("purejaxrl",), ours, plans=True) == [
        ("purejaxrl", "purerl:plain"), ("purejaxrl", "purerl:towers_apart")]
    assert purejaxrl.sides_of("cli") == (("purerl", "purerl-warm"),
                                         ("purejaxrl", "purejaxrl-lean"))
    assert purejaxrl.sides_of("4envs") == (("purerl",), ("purejaxrl",))


def test_side_result_reads_a_brax_curve_against_its_threshold():
    run = {"train_s": 4.0, "before_train_s": 2.0, "env_steps": 4000, "compile_s": 1.5,
           "steps": list(range(100, 4100, 100)), "returns": [10.0] * 30 + [960.0] * 10,
           "times": None}
    result = curves.side_result({"setting": "x"}, "purerl", "brax/inverted_pendulum", run,
                                kind="k", startup_s=0.5, launched=0.0)
    assert result["sps"] == 1000 and result["compile_s"] == 1.5 and result["threshold"] == 950.0
    assert result["time_to_return_s"] == 5.1  # 2 s, then 3,100 of 4,000 steps of 4 s
    assert result["final_return"] == 960.0 and result["curve"]["kind"] == "k"
    assert "times" not in result and len(result["curve"]["returns"]) == 40


def test_a_run_past_its_peers_limit_counts_as_hung(tmp_path):
    import harness
    import pytest

    command = [sys.executable, "-c", "import time; time.sleep(30)"]
    with pytest.raises(SystemExit, match="hung twice"):
        harness.timed_run(command, tmp_path, tmp_path / "log", hung_after_s=0.5)
    assert harness.timed_run([sys.executable, "-c", "pass"], tmp_path, tmp_path / "log",
                           hung_after_s=30) < 30


def test_purerl_runs_several_seeds_on_the_devices_its_command_line_makes(monkeypatch, tmp_path):
    import peers

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    rejax = peers.peer_of("rejax")

    def flags(side, seeds):
        return peers.side_env(rejax, side, seeds, tmp_path, None).get("XLA_FLAGS")

    assert flags("purerl", 8) == (f"--xla_force_host_platform_device_count="
                                  f"{peers.cpu_devices(8)}")
    assert flags("purerl", 1) is None and flags("rejax", 8) is None
    assert peers.cpu_devices(1) == 1


def test_purerl_warm_runs_first_to_fill_the_compile_cache_then_takes_its_turns(monkeypatch,
                                                                              tmp_path):
    import peers

    calls = []

    def fake_run(command, cwd, log, env, hung_after_s):
        calls.append((command[0], command[2], json.loads(command[3]).get("plan"),
                      env.get(curves.WARM_CACHE)))
        Path(command[4]).write_text("{}")
        return 1.0

    monkeypatch.setattr(peers, "timed_run", fake_run)
    rejax, cache = peers.peer_of("rejax"), str(tmp_path / "compile_cache")
    program = [{"setting": "cartpole", "num_seeds": 1}]
    pythons = ("/purerl/python", "/rejax/python")
    peers.run_turn(rejax, program, [("purerl-warm", {})], pythons, tmp_path, tmp_path / "warm")
    (turn,) = peers.run_turn(rejax, program, [("purerl:plain", {"plan": {}}), ("rejax", {})],
                             pythons, tmp_path, tmp_path / "turn")
    assert calls == [("/purerl/python", "purerl-warm", None, cache),
                     ("/purerl/python", "purerl", {}, None), ("/rejax/python", "rejax", None, None)]
    assert set(turn) == {"purerl:plain", "rejax"} and turn["rejax"]["process_wall_s"] == 1.0


def test_every_side_of_every_peer_has_a_heading():
    import harness
    import peers

    for name in peers.MODULES:
        peer = peers.peer_of(name)
        sides = {*peer.sides, *peer.purerl_sides, *sum(map(list, sum(
            peer.row_sides.values(), ())), [])}
        assert sides <= set(harness.HEADINGS), name


def test_the_profile_tells_an_op_by_what_it_holds():
    import op_profile

    hlo = """HloModule jit_train, entry_computation_layout={(f32[8,4]{1,0})->f32[8,2]{1,0}}

%fused_dot (param_0: f32[8,4], param_1: f32[4,2]) -> f32[8,2] {
  %param_0 = f32[8,4]{1,0} parameter(0)
  %param_1 = f32[4,2]{1,0} parameter(1)
  ROOT %dot.1 = f32[8,2]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}
}

%fused_add (param_0.1: f32[8,2]) -> f32[8,2] {
  %param_0.1 = f32[8,2]{1,0} parameter(0)
  ROOT %add.2 = f32[8,2]{1,0} add(%param_0.1, %param_0.1)
}

%body (arg: (s32[], f32[8,2], /*index=2*/f32[8,2])) -> (s32[], f32[8,2]) {
  %arg = (s32[], f32[8,2]{1,0}, /*index=2*/f32[8,2]{1,0}) parameter(0)
  %x = f32[8,2]{1,0} get-tuple-element(%arg), index=1
  %sort.3 = f32[8,2]{1,0} sort(%x), dimensions={0}, to_apply=%compare
  ROOT %t = (s32[], f32[8,2]{1,0}) tuple(%arg, %sort.3)
}

ENTRY %main.9 (Arg_0.1: f32[8,4]) -> f32[8,2] {
  %Arg_0.1 = f32[8,4]{1,0} parameter(0)
  %w = f32[4,2]{1,0} constant({...})
  %fusion.1 = f32[8,2]{1,0} fusion(%Arg_0.1, %w), kind=kOutput, calls=%fused_dot
  %fusion.2 = f32[8,2]{1,0} fusion(%fusion.1), kind=kLoop, calls=%fused_add
  %gemm.4 = f32[8,2]{1,0} custom-call(%Arg_0.1, %w), custom_call_target="__cublas$gemm"
  %while.5 = (s32[], f32[8,2]{1,0}) while(%t0), condition=%cond, body=%body
  %conv.7 = f32[8,2]{1,0} custom-call(%Arg_0.1), custom_call_target="__cudnn$convForward"
  %cond.8 = f32[8,2]{1,0} conditional(%p, %a, %b), branch_computations={%fused_add, %body}
  ROOT %copy.6 = f32[8,2]{1,0} copy(%fusion.2)
}
"""
    instructions, computations = op_profile.parse_hlo(hlo)
    assert computations["fused_add"] == ["param_0.1", "add.2"]
    assert computations["body"] == ["arg", "x", "sort.3", "t"]
    assert instructions["while.5"][:2] == ("while", ["cond", "body"])
    assert instructions["cond.8"][1] == ["fused_add", "body"]
    kinds = {op: op_profile.kind_of(op, instructions, computations)
             for op in ("fusion.1", "fusion.2", "gemm.4", "while.5", "copy.6", "%sort.3", "x.9",
                        "conv.7")}
    assert kinds == {"fusion.1": "matmul", "fusion.2": "elementwise", "gemm.4": "matmul",
                     "while.5": "enclosing", "copy.6": "copy/transpose", "%sort.3": "sort",
                     "x.9": "not in the HLO", "conv.7": "matmul"}


def test_the_profile_reads_a_traced_programs_matmuls(tmp_path):
    import harness
    import jax
    import jax.numpy as jnp
    import op_profile

    def train(key):
        x = jax.random.normal(key, (256, 256))
        return jax.lax.fori_loop(0, 8, lambda _, y: jnp.tanh(y @ x), x)

    timings, _ = harness.compile_and_run(train, jax.random.key(0), profile=tmp_path)
    summary = timings["profile"]
    matmuls = [op for op in summary["top"] if op["kind"] == "matmul"]
    assert [op["events"] for op in matmuls] == [8] and summary["kinds_ms"]["matmul"] > 0
    # The loop's event encloses the 8 matmuls' on XLA:CPU's threads: it is left out.
    instructions, _ = op_profile.parse_hlo((tmp_path / "program.hlo.txt").read_text())
    loops = {name for name, (opcode, _, _) in instructions.items() if opcode == "while"}
    assert loops and not loops & {op["op"] for op in summary["top"]}


def test_plans_and_profile_leave_the_command_rows_out(monkeypatch, tmp_path, capsys):
    import peers
    import pytest

    (tmp_path / "purejaxrl").mkdir()
    (tmp_path / "purejaxrl" / "ppo.py").write_text("")
    base = ["peers.py", "--purejaxrl", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", base + ["--plans"])
    assert "cli" not in peers.arguments().rows
    monkeypatch.setattr(sys, "argv", base)
    assert peers.arguments().rows[0] == "cli"
    monkeypatch.setattr(sys, "argv", base + ["--rows", "cli", "--profile", str(tmp_path)])
    with pytest.raises(SystemExit):
        peers.arguments()
    assert "the row cli runs whole commands" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["peers.py", "--peer", "rejax", "--plans"])
    with pytest.raises(SystemExit):
        peers.arguments()
    assert "rejax's driver does not take it" in capsys.readouterr().err


def test_package_versions_reads_the_distribution_first_on_the_path(monkeypatch, tmp_path):
    """A peer's Python puts its own wheels before purerl's (gpu.sh's peer-python): the version
    recorded is the one that Python imports."""
    for folder, version in (("first", "0.0.9"), ("second", "1.0.1")):
        info = tmp_path / folder / f"fake_peer_package-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fake_peer_package\n"
                                       f"Version: {version}\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'first'}:{tmp_path / 'second'}")
    versions = curves.package_versions(sys.executable, ["fake-peer-package", "not-installed"])
    assert versions["fake-peer-package"] == "0.0.9" and versions["not-installed"] is None
