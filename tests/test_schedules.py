import math

import jax
import jax.numpy as jnp
import pytest
from conftest import tiny_config

from purerl.config import ScheduleConfig
from purerl.core.schedules import (
    hyperparams_from_config,
    make_schedules,
    member_hyperparams,
    program_settings,
    schedule_factor,
)


@pytest.mark.parametrize("schedule, progress, expected", [
    (ScheduleConfig(), 0.7, 1.0),
    (ScheduleConfig(kind="linear", end=0.0), 0.25, 0.75),
    (ScheduleConfig(kind="linear", end=0.5), 1.0, 0.5),
    (ScheduleConfig(kind="linear", end=0.0, fraction=0.5), 0.25, 0.5),
    (ScheduleConfig(kind="linear", end=0.0, fraction=0.5), 0.9, 0.0),  # holds after fraction
    (ScheduleConfig(kind="cosine", end=0.0), 0.5, 0.5),
    (ScheduleConfig(kind="cosine", end=0.2), 1.0, 0.2),
    (ScheduleConfig(kind="exponential", end=0.01), 0.5, 0.1),
    (ScheduleConfig(kind="piecewise", boundaries=[0.3, 0.6], values=[1.0, 0.5, 0.1]), 0.0, 1.0),
    (ScheduleConfig(kind="piecewise", boundaries=[0.3, 0.6], values=[1.0, 0.5, 0.1]), 0.3, 0.5),
    (ScheduleConfig(kind="piecewise", boundaries=[0.3, 0.6], values=[1.0, 0.5, 0.1]), 0.59, 0.5),
    (ScheduleConfig(kind="piecewise", boundaries=[0.3, 0.6], values=[1.0, 0.5, 0.1]), 0.9, 0.1),
])
def test_schedule_factor(schedule, progress, expected):
    factor = float(schedule_factor(schedule, jnp.float32(progress)))
    assert factor == pytest.approx(expected, abs=1e-6)


def test_anneal_lr_and_scheduled_hyperparams(make_config):
    config = make_config()  # 8 updates, anneal_lr=true
    config.ppo.schedule.ent_coef = ScheduleConfig(kind="cosine", end=0.0)
    base = hyperparams_from_config(config)
    assert math.isinf(float(base.target_kl))
    hp = make_schedules(config.schedules(), config.num_updates)(base, jnp.int32(2))
    assert float(hp.lr) == pytest.approx(2.5e-4 * 0.75)
    assert float(hp.ent_coef) == pytest.approx(0.01 * 0.5 * (1 + math.cos(math.pi * 0.25)))
    assert float(hp.gamma) == pytest.approx(0.99)


def test_an_algorithms_own_hyperparameter_is_scheduled_by_name(make_config):
    """`algorithm.schedule.<name>` moves `hparams.extra[name]` as `ppo.schedule.*` moves PPO's;
    the other hyperparameters keep their schedules."""
    config = make_config()  # 8 updates
    config.algorithm = {"name": None, "schedule": {"kl_beta": {"kind": "linear", "end": 0.0}}}
    schedules = config.schedules()
    assert schedules["algorithm.kl_beta"] == ScheduleConfig(kind="linear", end=0.0)
    base = hyperparams_from_config(config, {"kl_beta": 2.0})
    hp = make_schedules(schedules, config.num_updates)(base, jnp.int32(2))
    assert float(hp.extra["kl_beta"]) == pytest.approx(2.0 * 0.75)
    assert float(hp.lr) == pytest.approx(2.5e-4 * 0.75)
    assert float(hp.gamma) == pytest.approx(0.99)


def _lowered_programs(config):
    """The lowered text of `config`'s init (its hyperparameters an argument) and chunk."""
    import numpy as np

    from purerl.parallel.program import make_program

    program, key = make_program(config, chunk=2), jax.random.key(config.seed)
    hparams = member_hyperparams(config)
    state = jax.eval_shape(program.init, key, hparams)
    return [jax.jit(program.init).lower(key, hparams).as_text(),
            jax.jit(program.run).lower(state, np.int32(2)).as_text()]


def test_programs_take_the_seed_and_hyperparameters_as_arguments():
    """Configs that differ in the seed and every base hyperparameter's value (target-KL
    stopping on in both) have equal program settings and lower to the same init and chunk
    programs, which a sweep's jobs may therefore share; other settings tell them apart."""
    base = tiny_config(**{"ppo.target_kl": 0.02})
    other = tiny_config(seed=7, **{"ppo.lr": 1e-3, "ppo.ent_coef": 0.05, "ppo.clip_eps": 0.3,
                                   "ppo.vf_coef": 1.0, "ppo.gamma": 0.9, "ppo.gae_lambda": 0.8,
                                   "ppo.max_grad_norm": 1.0, "ppo.target_kl": 0.05})
    assert program_settings(base) == program_settings(other)
    assert _lowered_programs(base) == _lowered_programs(other)
    assert program_settings(tiny_config()) != program_settings(base)  # target-KL off
    assert program_settings(tiny_config(**{"env.num_envs": 8})) != program_settings(tiny_config())
