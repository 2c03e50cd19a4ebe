"""Faults a cluster brings, without training: where `resume=auto` starts, damaged and
unwritable checkpoints, the exit codes of stop signals."""

import logging
import signal
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, cli_env

from purerl.config import ConfigError
from purerl.runs.run_dir import resume_point
from purerl.runs.signals import exit_code_of, status_of
from purerl.storage.checkpoint import Checkpoints


def _resume_point(config, run_dir):
    return resume_point(config, run_dir, Checkpoints(run_dir / "checkpoints"), 1, "cpu")


def test_resume_auto_starts_where_no_run_saved_and_refuses_foreign_files(make_config, tmp_path,
                                                                         caplog):
    auto, true = make_config(resume="auto"), make_config(resume=True)
    assert _resume_point(auto, tmp_path / "new") is None
    (tmp_path / ".hydra").mkdir()  # Hydra writes these before the job starts
    (tmp_path / "train.log").write_text("")
    with caplog.at_level(logging.WARNING, logger="purerl"):
        assert _resume_point(auto, tmp_path) is None
        assert not caplog.records
        (tmp_path / "metrics.jsonl").write_text('{"update": 1}\n')  # killed before a checkpoint
        assert _resume_point(auto, tmp_path) is None
        assert "holds no checkpoint (a run that saved none): starting afresh" in caplog.text
    with pytest.raises(ConfigError, match=r"resume=true: .* holds no checkpoint \(only \.hydra, "
                                          r"metrics\.jsonl, train\.log\): pass resume=auto"):
        _resume_point(true, tmp_path)
    (tmp_path / "thesis.tex").write_text("")
    with pytest.raises(ConfigError, match=r"resume=auto: .* holds no checkpoint but other files "
                                          r"\(thesis\.tex\): is it a purerl run directory"):
        _resume_point(auto, tmp_path)


def test_a_damaged_checkpoint_is_skipped_and_none_intact_is_one_line(tmp_path, caplog):
    """The newest checkpoint's state truncated: the one before it restores, with a warning
    naming it; all of them damaged: a ConfigError."""
    checkpoints = Checkpoints(tmp_path, owner=True)
    for update in (1, 2):
        checkpoints.save(update, {"x": jnp.full(300, float(update))}, {"update": update})
    like = {"x": jnp.zeros(300)}
    for update in (2, 1):
        data = sorted((tmp_path / str(update) / "state" / "d").iterdir())
        data[0].write_bytes(data[0].read_bytes()[:10])
        with caplog.at_level(logging.WARNING, logger="purerl"):
            if update == 2:
                step, state, record = Checkpoints(tmp_path).restore_intact(2, like)
                assert step == 1 and record == {"update": 1}
                np.testing.assert_array_equal(state["x"], np.ones(300))
                assert f"{tmp_path / '2'}: skipped, it does not restore" in caplog.text
            else:
                with pytest.raises(ConfigError, match="no intact checkpoint .of 2 up to update 2"):
                    Checkpoints(tmp_path).restore_intact(2, like)


def test_a_checkpoint_that_cannot_be_written_is_one_error_and_the_last_stays(tmp_path):
    """A save past the file-size limit (as on a full disk): WriteError naming the
    checkpoint, no orbax traceback, the checkpoint before it the newest, the temporary
    directory removed by the next owner."""
    script = textwrap.dedent(f"""
        import resource
        import jax.numpy as jnp
        from purerl.storage.checkpoint import Checkpoints
        from purerl.storage.write_errors import WriteError

        checkpoints = Checkpoints({str(tmp_path)!r}, owner=True)
        checkpoints.save(1, {{"x": jnp.zeros(10)}}, {{"update": 1}})
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
        try:
            checkpoints.save(2, {{"x": jnp.arange(100_000.0)}}, {{"update": 2}})
        except WriteError as error:
            print(error)
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=cli_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == f"cannot write {tmp_path / '2'}: File too large"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert Checkpoints(tmp_path).latest() == 1
    assert any("tmp" in p.name for p in tmp_path.iterdir())
    owner = Checkpoints(tmp_path, owner=True)
    owner.latest()
    owner.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


def test_stop_signals_end_runs_as_a_shell_reports_them():
    assert [exit_code_of(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)] == \
        [130, 143, 138]
    assert [status_of(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)] == \
        ["interrupted", "preempted", "preempted"]
