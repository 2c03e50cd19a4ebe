import math

import jax.numpy as jnp
import pytest

from purerl.config import ScheduleConfig
from purerl.schedules import hyperparams_from_config, schedule_factor, scheduled_hyperparams


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
    assert float(schedule_factor(schedule, jnp.float32(progress))) == pytest.approx(expected, abs=1e-6)


def test_anneal_lr_and_scheduled_hyperparams(make_config):
    config = make_config()  # 8 updates, anneal_lr=true
    config.ppo.schedule.ent_coef = ScheduleConfig(kind="cosine", end=0.0)
    base = hyperparams_from_config(config)
    assert math.isinf(float(base.target_kl))
    hp = scheduled_hyperparams(config, base, jnp.int32(2))
    assert float(hp.lr) == pytest.approx(2.5e-4 * 0.75)
    assert float(hp.ent_coef) == pytest.approx(0.01 * 0.5 * (1 + math.cos(math.pi * 0.25)))
    assert float(hp.gamma) == pytest.approx(0.99)
