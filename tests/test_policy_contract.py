"""The policy contract (netsim.policy): imports run one way, observations are read-only in fact,
and policies and figures plug in through entry points."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import netsim
from netsim.policy import Decision, NoParams, Observation, make_policy, register, registered

ROOT = Path(__file__).resolve().parents[1]


def _imported_top_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_nothing_under_netsim_imports_policies_plots_or_experiments():
    """Every import statement in netsim/ (top level, inside functions, lazy ones alike)."""
    offenders = {}
    for path in sorted((ROOT / "netsim").rglob("*.py")):
        bad = _imported_top_packages(path) & {"policies", "plots", "experiments"}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}
    # and no string-based import of them either (importlib.import_module("policies..."))
    for path in (ROOT / "netsim").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for pkg in ("policies", "plots", "experiments"):
            assert f'import_module("{pkg}' not in text and f"import_module('{pkg}" not in text


def test_netsim_has_no_lazy_import_workaround():
    assert "__getattr__" not in (ROOT / "netsim" / "__init__.py").read_text(encoding="utf-8")


class _Vandal:
    """A policy that tries to write into everything it is given, then trains one phone."""

    name = "vandal"

    def __init__(self) -> None:
        self.errors: list[str] = []

    def reset(self, scenario, rng) -> None:
        pass

    def _try(self, what: str, action) -> None:
        try:
            action()
        except (ValueError, TypeError, AttributeError) as exc:  # what read-only raises
            self.errors.append(f"{what}: {type(exc).__name__}")

    def decide(self, obs: Observation) -> Decision:
        t = obs.devices

        def write_samples():
            t.samples[:] = 10**6

        def write_flops():
            t.flop_per_s[0] = 1.0

        def write_available():
            obs.available[:] = True

        def write_index():
            t.index["ghost"] = 0  # type: ignore[index]

        def write_obs():
            obs.now_s = 0.0  # type: ignore[misc]

        def write_model():
            obs.model.params = 1.0  # type: ignore[misc]

        def write_variants():
            obs.model.variants.append(obs.model.variants[0])  # type: ignore[attr-defined]

        def write_devices():
            obs.scenario.devices.append(obs.scenario.devices[0])  # type: ignore[union-attr]

        def write_training():
            obs.training.target_loss = 10.0  # type: ignore[misc]

        for name, action in [("samples", write_samples), ("flop_per_s", write_flops),
                             ("available", write_available), ("index", write_index),
                             ("observation", write_obs), ("model", write_model),
                             ("variants", write_variants), ("devices", write_devices),
                             ("training", write_training)]:
            self._try(name, action)
        return Decision(participants={"d1": 10**6 if t.samples[1] > 500 else 500})


def test_a_policy_that_writes_into_its_observation_gets_errors_and_changes_nothing(star):
    vandal = _Vandal()
    vandal_run = netsim.simulate(star, vandal, seed=0, raise_errors=True)
    # every write raised (9 attempts per epoch), and the world trained 500 samples, not 10**6
    epochs = len(vandal_run.epochs)
    assert epochs >= 1 and len(vandal.errors) == 9 * epochs
    assert set(vandal_run.epochs["samples"]) == {500}

    class Polite(_Vandal):
        def decide(self, obs):
            return Decision(participants={"d1": 500})

    polite_run = netsim.simulate(star, Polite(), seed=0, raise_errors=True)
    cols = ["end_s", "loss", "energy_compute_j", "energy_comm_j", "energy_idle_j"]
    assert np.array_equal(vandal_run.epochs[cols].to_numpy(), polite_run.epochs[cols].to_numpy())


def test_observation_arrays_are_views_not_per_epoch_copies(star):
    seen = []

    class Watch(_Vandal):
        def decide(self, obs):
            seen.append(obs.devices.samples)
            return Decision(participants={"d1": 100})

    netsim.simulate({**star, "training": {**star["training"], "max_epochs": 3}}, Watch(), seed=0)
    assert len(seen) == 3 and seen[0] is seen[1] is seen[2]
    assert not seen[0].flags.writeable


def _label_watch(scenario: dict, epochs: int = 2) -> tuple[list, list[str], object]:
    """Run a policy that keeps each epoch's ``obs.label_counts`` and tries to write into it
    (in place, and the attribute itself); returns what it saw, the errors, the result."""
    seen: list = []

    class Scribbler(_Vandal):
        def decide(self, obs):
            seen.append(obs.label_counts)
            if obs.label_counts is not None:
                def write_counts():
                    obs.label_counts[:] = 1.0

                def write_row():
                    obs.label_counts[1, 0] += 100

                self._try("label_counts", write_counts)
                self._try("label_counts row", write_row)
            self._try("label_counts attr", lambda: setattr(obs, "label_counts", None))
            return Decision(participants={obs.devices.ids[1]: 50})

    scribbler = Scribbler()
    sc = {**scenario, "training": {**scenario["training"], "max_epochs": epochs}}
    res = netsim.simulate(sc, scribbler, seed=0, raise_errors=True)
    return seen, scribbler.errors, res


def test_label_histograms_are_observed_read_only_and_are_what_the_devices_table_keeps(star):
    """Under label skew the Observation holds each device's histogram (the surrogate's draw,
    rows summing to each device's samples), the same read-only array every epoch; every
    write raises and the run is what a polite policy's is. IID surrogate data: None."""
    skewed = {**star, "training": {**star["training"], "dirichlet_alpha": 0.3}}
    seen, errors, res = _label_watch(skewed)
    counts = seen[0]
    assert len(seen) == 2 and seen[1] is counts and not counts.flags.writeable
    assert counts.shape == (4, 10)  # (rows by the device table: the server's is 0)
    np.testing.assert_allclose(counts.sum(axis=1), [0, 500, 300, 800])
    assert errors == ["label_counts: ValueError", "label_counts row: ValueError",
                      "label_counts attr: FrozenInstanceError"] * 2
    assert counts[1].max() < 500  # (unchanged: a Dirichlet 0.3 row is not all 1.0 or +100)
    recorded = np.asarray([r for r, node in zip(res.devices.label_counts,
                                                res.devices.network_node, strict=True)
                           if not node], dtype=float)
    np.testing.assert_allclose(recorded, np.rint(counts))
    again = netsim.simulate({**skewed, "training": {**skewed["training"], "max_epochs": 2}},
                            "fedavg-all", seed=0)
    np.testing.assert_array_equal(np.asarray(again.devices.label_counts.tolist()[:4]),
                                  np.asarray(res.devices.label_counts.tolist()[:4]))
    iid, _, _ = _label_watch(star, epochs=1)
    assert iid == [None]


def test_a_real_backend_shows_its_shards_label_counts_read_only():
    data = {"name": "small", "seed": 0,
            "generate": {"n_devices": 4, "samples_mean": 60, "samples_spread": 0.0, "seed": 1},
            "model": "mlp-digits",
            "training": {"backend": "real", "target_loss": 0.01, "deadline_s": 3600,
                         "shards_per_device": 2}}
    seen, errors, _ = _label_watch(data, epochs=1)
    (counts,) = seen
    assert not counts.flags.writeable and counts.dtype.kind == "i"
    assert "label_counts: ValueError" in errors and "label_counts row: ValueError" in errors
    held = counts[counts.sum(axis=1) > 0]  # (2 shards a device: a few classes each)
    assert len(held) == 4 and all((row > 0).sum() <= 5 for row in held)


def test_every_builtin_policy_is_registered_by_entry_point_with_a_description():
    entries = registered()
    for name in ("fedavg-all", "random-k", "fastest-k", "greedy-energy", "pact", "pact-optimum",
                 "depl", "depl-optimum", "baechi"):
        assert name in entries and entries[name].description
        assert make_policy(name).name == name


@register("user-one", "a user's own policy: one device, all its samples")
class UserOne:
    def __init__(self, params: NoParams) -> None:
        self.name, self.params = "user-one", params

    def reset(self, scenario, rng) -> None:
        pass

    def decide(self, obs: Observation) -> Decision:
        return Decision(participants={"d3": int(obs.devices.samples[3])})


def _nothing(results):
    """A user's figure: draws nothing."""
    return None


def test_a_users_package_adds_a_policy_and_a_figure_by_entry_point(star, add_entry_point,
                                                                   capsys):
    from netsim.cli import main
    from netsim.figures import figure, registered_figures

    assert "user-one" not in registered()
    add_entry_point("netsim.policies", "user-one", "test_policy_contract:UserOne")
    add_entry_point("netsim.figures", "user-figure", "test_policy_contract:USER_FIGURE")
    assert registered()["user-one"].description.startswith("a user's own policy")
    res = netsim.simulate(star, "user-one", seed=0, raise_errors=True)
    assert res.runs.iloc[0]["policy"] == "user-one" and set(res.epochs["samples"]) == {800}
    assert "user-figure" in registered_figures()
    assert main(["policies"]) == 0 and "user-one" in capsys.readouterr().out
    assert main(["figures"]) == 0 and "user-figure" in capsys.readouterr().out
    assert isinstance(USER_FIGURE, type(figure("x", _nothing)))


def test_an_entry_point_that_is_not_a_policy_is_refused(add_entry_point):
    # (issue 54: skipped with a warning naming it and the error; the others still load)
    from netsim.plugins import PluginWarning

    add_entry_point("netsim.policies", "not-a-policy", "test_policy_contract:_nothing")
    with pytest.warns(PluginWarning, match="'not-a-policy'.*TypeError"):
        entries = registered()
    assert "not-a-policy" not in entries and "fedavg-all" in entries


USER_FIGURE = None  # set below (needs netsim.figures)


def _user_figure():
    from netsim.figures import figure

    return figure("user-figure", _nothing)


USER_FIGURE = _user_figure()
