"""Host-side sinks: TensorBoard scalars, learning-curve PNGs, the progress bar."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from purerl.logging.history import RunHistory
from purerl.logging.plots import (
    learning_curve_figure,
    pbt_figure,
    plot_learning_curve,
    smooth,
    smoothing_window,
)
from purerl.logging.progress import EARLIER_NOTE, ProgressBar, progress_line
from purerl.logging.sinks import TensorBoardSink

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_events(path):
    """Events of a TFRecord file: records are [uint64 len][uint32 crc][data][uint32 crc]."""
    from tensorboardX.proto import event_pb2

    data, events, offset = path.read_bytes(), [], 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset:offset + 8])
        offset += 12
        event = event_pb2.Event()
        event.ParseFromString(data[offset:offset + length])
        events.append(event)
        offset += length + 4
    return events


def read_scalars(run_dir):
    """{tag: [(step, value), ...]} from every event file in `run_dir`."""
    scalars = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in read_events(path):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def test_tensorboard_sink_writes_scalars(tmp_path):
    sink = TensorBoardSink(tmp_path)
    sink.write([
        {"update": 1, "env_steps": 512, "episode_return": 21.5, "episode_length": None,
         "policy_loss": -0.25, "opt_steps": 4, "env": "CartPole-v1", "per_seed": [1.0, 2.0]},
        {"update": 2, "env_steps": 1024, "episode_return": None, "episode_length": 30.0,
         "policy_loss": 0.125, "opt_steps": 8, "eval_return/1.0": 100.0,
         "eval_return/0.0": 500.0},
    ])
    sink.close()
    assert list(tmp_path.glob("events.out.tfevents.*"))
    scalars = read_scalars(tmp_path)
    assert set(scalars) == {"episode_return", "episode_length", "policy_loss", "opt_steps",
                            "eval_return/1.0", "eval_return/0.0"}
    assert scalars["episode_return"] == [(512, pytest.approx(21.5))]
    assert scalars["episode_length"] == [(1024, pytest.approx(30.0))]
    assert scalars["policy_loss"] == [(512, pytest.approx(-0.25)), (1024, pytest.approx(0.125))]
    assert scalars["opt_steps"] == [(512, 4.0), (1024, 8.0)]
    assert scalars["eval_return/1.0"] == [(1024, pytest.approx(100.0))]
    assert scalars["eval_return/0.0"] == [(1024, pytest.approx(500.0))]


def test_tensorboard_sink_flushes_each_write(tmp_path):
    sink = TensorBoardSink(tmp_path)
    sink.write([{"update": 1, "env_steps": 10, "episode_return": 1.0}])
    assert read_scalars(tmp_path) == {"episode_return": [(10, 1.0)]}
    sink.close()


def test_tensorboard_sink_resumed_in_same_dir_keeps_old_file(tmp_path):
    for step in (10, 20):
        sink = TensorBoardSink(tmp_path)
        sink.write([{"update": step // 10, "env_steps": step, "episode_return": float(step)}])
        sink.close()
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    assert read_scalars(tmp_path) == {"episode_return": [(10, 10.0), (20, 20.0)]}


def _assert_png(path):
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_plot_learning_curve_with_nans(tmp_path):
    rng = np.random.default_rng(0)
    env_steps = np.arange(1, 21) * 512
    returns = rng.normal(100.0, 10.0, size=(3, 20))
    returns[0, ::3] = np.nan
    returns[:, 5] = np.nan  # no seed finished an episode in update 6
    returns[2] = np.nan  # a seed with no episodes at all
    evals = {"1.0": [(5120, 150.0), (10240, 200.0)], "eval_return/0.0": [(10240, 250.0)]}
    path = tmp_path / "curve.png"
    plot_learning_curve(path, env_steps, returns, evals, title="CartPole-v1")
    _assert_png(path)
    plot_learning_curve(path, env_steps, returns, evals)  # overwrites in place
    _assert_png(path)


@pytest.mark.parametrize("num_seeds", [1, 3])
def test_plot_learning_curve_all_nan(tmp_path, num_seeds):
    path = tmp_path / "curve.png"
    plot_learning_curve(path, np.arange(1, 6) * 100, np.full((num_seeds, 5), np.nan), {})
    _assert_png(path)


def test_smooth_is_a_trailing_mean_that_skips_nan():
    nan = np.nan
    y = np.array([[1.0, nan, 3.0, 5.0, nan, nan, nan],
                  [nan, nan, 2.0, 4.0, 6.0, 8.0, 10.0]])
    expected = np.array([[1.0, 1.0, 3.0, 4.0, 5.0, nan, nan],  # window 2: u-1 and u
                         [nan, nan, 2.0, 3.0, 5.0, 7.0, 9.0]])
    np.testing.assert_allclose(smooth(y, 2), expected)
    np.testing.assert_allclose(smooth(y[0], 3), [1.0, 1.0, 2.0, 4.0, 4.0, 5.0, nan])
    np.testing.assert_array_equal(smooth(y, 1), y)
    assert [smoothing_window(n) for n in (1, 19, 40, 1000)] == [1, 1, 2, 50]


def _inside(inner, outer):
    return (inner.x0 >= outer.x0 and inner.x1 <= outer.x1 and inner.y0 >= outer.y0
            and inner.y1 <= outer.y1)


def test_learning_curve_legend_and_title_leave_the_curves_visible():
    env_steps = np.arange(1, 101) * 512
    returns = np.linspace(0.0, 500.0, 100)[None] + np.zeros((12, 1))  # a curve across the axes
    evals = {"1.0": [(51200, 250.0)], "0.0": [(51200, 250.0)]}
    groups = [f"lr={lr} ent_coef={e}" for lr in (1e-3, 2.5e-4, 1e-4) for e in (0.0, 0.01)]
    fig = learning_curve_figure(env_steps, returns, evals, title="Reacher-misc " * 12,
                                groups=groups)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    legend, frame, title = ax.get_legend(), ax.get_window_extent(), fig.get_suptitle()
    assert legend.get_window_extent().x0 >= frame.x1  # right of the axes, not over a curve
    assert _inside(legend.get_window_extent(), fig.bbox)
    assert _inside(fig._suptitle.get_window_extent(), fig.bbox) and "\n" in title
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels[:6] == groups and labels[-2:] == ["eval T=1.0", "eval T=0.0"]
    filled, hollow = (line for line in ax.lines if line.get_linestyle() == "None")
    assert filled.get_marker() != hollow.get_marker()  # equal values: both stay visible
    assert hollow.get_markerfacecolor() == "none"
    assert hollow.get_markersize() > filled.get_markersize()


def test_pbt_figure_labels_members_not_their_first_values():
    rows = [{"update": 10 * g, "hparams": {"lr": [1e-3 * (g + m) for m in range(3)],
                                           "ent_coef": [0.01 * g, 0.0, 0.02]}}
            for g in range(1, 4)]
    fig = pbt_figure(rows, ["lr", "ent_coef"], title="CartPole-v1 " * 6)
    fig.draw_without_rendering()
    legend = fig.axes[-1].get_legend()
    assert [text.get_text() for text in legend.get_texts()] == ["member 0", "member 1",
                                                                 "member 2"]
    assert all(legend.get_window_extent().x0 >= ax.get_window_extent().x1 for ax in fig.axes)
    assert _inside(legend.get_window_extent(), fig.bbox)
    assert _inside(fig._suptitle.get_window_extent(), fig.bbox)
    np.testing.assert_allclose(fig.axes[0].lines[1].get_ydata(), [2e-3, 3e-3, 4e-3])


def test_progress_bar_disabled_does_nothing(capsys):
    bar = ProgressBar(1000, enabled=False)
    bar.update(500, 1234.0, 10.0)
    bar.close()
    assert bar.position is None
    assert capsys.readouterr() == ("", "")


def test_progress_bar_reaches_position():
    stream = io.StringIO()
    bar = ProgressBar(10_000, file=stream)
    bar.update(2_000, 12_345.0, None)
    bar.update(6_000, 12_345.0, 87.25)
    assert bar.position == 6_000
    bar.close()
    text = stream.getvalue()
    assert "6.00k/10.0k" in text
    assert "12.3k steps/s, return 87.2" in text


def test_progress_bar_marks_an_earlier_updates_return():
    stream = io.StringIO()
    bar = ProgressBar(10_000, file=stream)
    bar.update(2_000, 500.0, 500.0, earlier=True)
    bar.close()
    assert "return 500.0*" in stream.getvalue()


def test_progress_line_shows_the_latest_return_marked_when_no_episode_ended():
    row = {"update": 5, "env_steps": 2_560, "episode_return": None}
    assert progress_line(row, 39, 1234.0).endswith("| return      n/a  |      1,234 steps/s")
    assert "| return    500.0* |" in progress_line(row, 39, 1234.0, latest_return=500.0)
    row["episode_return"] = 94.6
    assert "| return     94.6  |" in progress_line(row, 39, 1234.0, latest_return=500.0)
    assert EARLIER_NOTE.startswith("* no episode ended in that update")


class _Metrics:
    """The episode totals of `RunHistory.extend`'s metrics, leaves [members, updates]."""

    def __init__(self, return_sum, count):
        self.episode_return_sum = np.asarray(return_sum, float)
        self.episode_length_sum = np.zeros_like(self.episode_return_sum)
        self.episode_count = np.asarray(count, float)
        self.episode_outcome_sums = {}


def test_latest_return_pools_the_members_of_the_last_update_with_an_episode():
    history = RunHistory(2)
    assert history.latest_return() is None
    history.extend(_Metrics([[10.0, 0.0], [0.0, 0.0]], [[1, 0], [0, 0]]))
    history.extend(_Metrics([[500.0, 0.0], [300.0, 0.0]], [[1, 0], [2, 0]]))
    assert history.latest_return() == 800.0 / 3  # update 3's: no episode ended in update 4


def test_outcomes_are_per_update_means_and_drawn_one_panel_each(tmp_path):
    from purerl.logging import plots

    history, metrics = RunHistory(2), _Metrics([[4.0, 0.0], [6.0, 9.0]], [[2, 0], [3, 1]])
    metrics.episode_outcome_sums = {"won": np.asarray([[1.0, 0.0], [3.0, 1.0]])}
    history.extend(metrics)
    np.testing.assert_array_equal(history.outcomes()["won"], [[0.5, np.nan], [1.0, 1.0]])
    figure = plots.outcomes_figure(np.arange(1, 3), {**history.outcomes(), "return/a": [1, 2]})
    assert [ax.get_title() for ax in figure.axes] == ["won", "return/a"]
    plots.save_png(figure, tmp_path / "outcomes.png")
    assert (tmp_path / "outcomes.png").read_bytes()[:4] == b"\x89PNG"


def test_progress_bar_resumed_starts_at_initial():
    stream = io.StringIO()
    bar = ProgressBar(10_000, initial=4_000, file=stream)
    assert bar.position == 4_000
    bar.update(5_000, 500.0, None)
    assert bar.position == 5_000
    bar.close()
    assert "return n/a" in stream.getvalue()


def test_final_returns_window_stretches_back_to_the_last_episode():
    from purerl.logging.history import final_returns

    sums, counts = np.zeros((3, 40)), np.zeros((3, 40))
    sums[0, [5, 38, 39]], counts[0, [5, 38, 39]] = [100.0, 10.0, 20.0], [1, 1, 3]
    sums[1, 10], counts[1, 10] = 7.0, 2  # long episodes: none in the last 5% (2 updates)
    assert final_returns(sums, counts) == [30.0 / 4, 3.5, None]
