"""DepL's distributional predictor: analytic and Monte Carlo quantiles against the surrogate."""

import math

import numpy as np
import pytest

from netsim.scenario.loading import load_scenario
from netsim.training.loss import SurrogateLoss
from netsim.training.models import resolve_model
from policies.depl.predictor import (
    DistributionalPredictor,
    LogSpread,
    empirical_spread,
    montecarlo_spread,
)

SMALL = "experiments/depl/scenarios/small.yaml"
# a trajectory with two switches: pruned-90, then pruned-50, then full
VARIANTS = [2, 2, 2, 1, 1, 0, 0]
SAMPLES = [6000] * 7


@pytest.fixture(scope="module")
def setup():
    sc = load_scenario(SMALL)
    model = resolve_model(sc.model)
    return model, sc.training, DistributionalPredictor(model, sc.training)


def ground_truth_final_losses(model, training, n_runs):
    out = np.empty(n_runs)
    for s in range(n_runs):
        truth = SurrogateLoss(model, training, np.random.default_rng(s))
        for v, n in zip(VARIANTS, SAMPLES, strict=True):
            loss = truth.advance({"d": n}, v).loss
        out[s] = loss
    return out


def test_analytic_quantiles_match_the_surrogate(setup):
    model, training, pred = setup
    truth = ground_truth_final_losses(model, training, 4000)
    for q in (0.1, 0.5, 0.8, 0.9, 0.95):
        assert pred.analytic_quantile(VARIANTS, SAMPLES, q) == pytest.approx(
            np.quantile(truth, q), rel=0.01)


def test_montecarlo_agrees_with_analytic(setup):
    _, _, pred = setup
    rng = np.random.default_rng(3)
    for q in (0.5, 0.9, 0.95):
        mc = pred.montecarlo_quantile(VARIANTS, SAMPLES, q, rng, n_draws=50_000)
        assert mc == pytest.approx(pred.analytic_quantile(VARIANTS, SAMPLES, q), rel=0.005)
    spread = montecarlo_spread(pred.sigma_run, pred.sigma_epoch, rng, 200_000)
    assert spread.quantile(0.9) == pytest.approx(LogSpread(pred.base.sigma).quantile(0.9), rel=0.02)


def test_quantiles_increase_and_success_probability_is_consistent(setup):
    _, _, pred = setup
    qs = [pred.quantile(VARIANTS, SAMPLES, q) for q in (0.1, 0.5, 0.9, 0.99)]
    assert all(a < b for a, b in zip(qs, qs[1:], strict=False))
    mean = pred.final_mean(VARIANTS, SAMPLES)
    assert qs[1] == pytest.approx(mean)  # the mean curve is the median of a log-normal
    assert float(pred.success_probability(mean, pred.quantile(VARIANTS, SAMPLES, 0.9))) == \
        pytest.approx(0.9, abs=1e-9)


def test_switch_loses_progress(setup):
    _, _, pred = setup
    straight = pred.final_mean([1] * 4, [6000] * 4)
    switched = pred.final_mean([0, 0, 1, 1], [6000] * 4)
    assert switched > straight  # pruning mid-training loses progress: the loss jumps up


def test_empirical_spread_from_repeated_runs():
    rng = np.random.default_rng(0)
    groups = [np.exp(0.07 * rng.standard_normal(300)) * m for m in (0.3, 0.5, 1.0)]
    spread = empirical_spread(groups)
    assert spread.sigma == pytest.approx(0.07, rel=0.1)
    assert spread.quantile(0.9) == pytest.approx(0.07 * 1.2816, rel=0.15)
    with pytest.raises(ValueError):
        empirical_spread([[0.3]])
    assert math.isclose(float(spread.cdf(np.inf)), 1.0)


def test_calibration_spread_when_measured_curves_exist():
    from pathlib import Path

    from policies.depl.policy import CALIBRATION_CURVES
    from policies.depl.predictor import calibration_spread

    if not Path(CALIBRATION_CURVES).exists():
        pytest.skip("no measured curves")
    spread = calibration_spread(CALIBRATION_CURVES)
    assert 0 < spread.sigma < 1
    assert spread.quantile(0.1) < 0 < spread.quantile(0.9)


def test_first_passage_probability_matches_monte_carlo_of_the_surrogates_noise():
    """P(some epoch <= L*) with a shared run offset and independent epoch noise, against
    draws of exactly that model; it is at least P(final <= L*)."""
    from scipy.special import ndtr

    from policies.depl.predictor import first_passage_probability

    rng = np.random.default_rng(3)
    means = np.array([0.5, 0.4, 0.34, 0.31, 0.3, 0.295])
    for s_run, s_epoch, m in ((0.05, 0.02, 0.0), (0.1, 0.05, 0.03), (0.0, 0.05, -0.02),
                              (0.07, 0.0, 0.0)):
        z_run = rng.standard_normal(200_000)
        z = rng.standard_normal((200_000, len(means)))
        loss = means * np.exp(m + s_run * z_run[:, None] + s_epoch * z)
        mc = float((loss <= 0.3).any(axis=1).mean())
        # the offset m as a shift of the run draw (z_mean = m / s_run), unit variance
        z_mean = m / s_run if s_run > 0 else 0.0
        sig = s_run if s_run > 0 else np.zeros(len(means))
        shifted = means * np.exp(m) if s_run == 0 else means
        got = first_passage_probability(shifted, 0.3, z_mean, 1.0, sig, s_epoch)
        assert got == pytest.approx(mc, abs=0.004)
        final = float(ndtr((np.log(0.3 / means[-1]) - m) / max(np.hypot(s_run, s_epoch), 1e-12)))
        assert got >= final - 1e-9
    # a run spread that grows epoch by epoch (as the loss falls): against draws of that model
    s_k = np.linspace(0.03, 0.12, len(means))
    z_run = rng.standard_normal(200_000)
    loss = means * np.exp(s_k * z_run[:, None] + 0.02 * rng.standard_normal((200_000, 6)))
    mc = float((loss <= 0.3).any(axis=1).mean())
    assert first_passage_probability(means, 0.3, 0.0, 1.0, s_k, 0.02) == pytest.approx(
        mc, abs=0.004)


def test_depl_cuts_its_plan_to_the_shortest_prefix_that_keeps_pi():
    from netsim.engine import resolve_scenario
    from netsim.policy import make_policy
    from netsim.scenario.loading import load_scenario

    sc = load_scenario("experiments/depl/scenarios/small.yaml")
    resolved = resolve_scenario(sc, 0)
    depl = make_policy("depl", {**sc.policies["depl"], "target_probability": 0.9})
    depl.reset(resolved, np.random.default_rng(0))
    pred = depl.predictor(resolved)
    k = len(depl.plan.variants)
    target = resolved.training.target_loss
    assert depl.success_probability(depl.plan, pred, target) >= 0.9
    assert depl.success_probability(depl.plan, pred, target, k - 1) < 0.9


def test_every_spread_follows_the_plans_level_as_the_analytic_one():
    """On the digits MLP (run spread fitted to grow as the loss falls), the planned pi-quantile
    at a state is mean x exp(z sigma(state)) for every spread source: analytic z = Phi^-1(pi),
    Monte Carlo the same up to sampling error, empirical the measured shape's z; the factor
    over the mean is not one constant."""
    from netsim.engine import resolve_scenario
    from netsim.policy import make_policy

    sc = resolve_scenario(load_scenario("experiments/depl/scenarios/costly.yaml"), 0)
    base = DistributionalPredictor(sc.model, sc.training).base
    states = [(0, base.samples_for(0, 0.6)), (0, base.samples_for(0, 0.22))]
    levels = {}
    for spread in ("analytic", "montecarlo", "empirical"):
        policy = make_policy("depl", {"spread": spread, "target_probability": 0.9})
        goal = policy.goal(sc, policy.predictor(sc))
        levels[spread] = [goal.level(v, n) / base.mean_of(v, n) for v, n in states]
    a = levels["analytic"]
    assert a[1] != pytest.approx(a[0], rel=1e-3)  # the spread moves with the level
    assert levels["montecarlo"] == pytest.approx(a, rel=0.01)
    e = levels["empirical"]
    assert math.log(e[1]) / math.log(e[0]) == pytest.approx(math.log(a[1]) / math.log(a[0]),
                                                            rel=1e-9)
