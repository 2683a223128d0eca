"""Plug-ins cannot break netsim (issue 54): a third-party entry point whose module is missing
or raises on import is skipped with a warning naming it (entry point name and value) and the
error; every other policy and command works; asking for it by name is a clear error (exit 2).
The entry-point discovery is monkeypatched (conftest's ``add_entry_point``)."""

from __future__ import annotations

import pytest

from netsim.cli import main
from netsim.plugins import COMMANDS, POLICIES, PluginWarning, broken_plugin, load_group
from netsim.policy import registered

MISSING = "no_such_module_for_netsim_tests.policies:CheapestK"


@pytest.fixture
def raising_module(tmp_path, monkeypatch):
    """The name of an importable module that raises on import."""
    (tmp_path / "netsim_test_raises.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "netsim_test_raises"


def test_a_missing_module_is_skipped_with_a_warning_naming_the_plugin(add_entry_point):
    add_entry_point(POLICIES, "cheapest-k", MISSING)
    with pytest.warns(PluginWarning) as caught:
        entries = registered()
    assert "cheapest-k" not in entries and "fedavg-all" in entries
    (w,) = [str(c.message) for c in caught]
    assert "'cheapest-k'" in w and MISSING in w and POLICIES in w
    assert "ModuleNotFoundError" in w and "no_such_module_for_netsim_tests" in w
    broken = broken_plugin(POLICIES, "cheapest-k")
    assert broken is not None and broken.value == MISSING


def test_netsim_policies_and_run_work_beside_a_broken_plugin(add_entry_point, raising_module,
                                                             tmp_path, capsys):
    add_entry_point(POLICIES, "cheapest-k", MISSING)
    add_entry_point(POLICIES, "loud-k", f"{raising_module}:LoudK")
    assert main(["policies"]) == 0
    captured = capsys.readouterr()
    assert "fedavg-all" in captured.out and "cheapest-k" not in captured.out
    err = captured.err
    assert f"netsim: warning: plug-in 'cheapest-k' (entry point cheapest-k = {MISSING}" in err
    assert f"plug-in 'loud-k' (entry point loud-k = {raising_module}:LoudK" in err
    assert "RuntimeError: boom at import" in err
    assert main(["run", "two-phones", "--policy", "fedavg-all", "--out", str(tmp_path / "o"),
                 "--no-figure"]) == 0
    assert "fedavg-all" in capsys.readouterr().out


def test_running_a_broken_plugin_by_name_is_a_clear_error(add_entry_point, tmp_path, capsys):
    add_entry_point(POLICIES, "cheapest-k", MISSING)
    out = tmp_path / "o"
    assert main(["run", "two-phones", "--policy", "cheapest-k", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--policy: policy 'cheapest-k': plug-in 'cheapest-k'" in err
    assert "failed to load: ModuleNotFoundError" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["policies", "cheapest-k"]) == 2
    assert "failed to load" in capsys.readouterr().err


def test_debug_shows_the_plugins_traceback(add_entry_point):
    add_entry_point(POLICIES, "cheapest-k", MISSING)
    with pytest.raises(ModuleNotFoundError):
        main(["--debug", "policies"])


def test_a_broken_command_plugin_leaves_the_others(add_entry_point, capsys):
    add_entry_point(COMMANDS, "mycmd", "no_such_module_for_netsim_tests.cli")
    assert main(["scenarios"]) == 0
    captured = capsys.readouterr()
    assert "two-phones" in captured.out and "plug-in 'mycmd'" in captured.err


def test_load_group_checks_what_it_loads(add_entry_point):
    add_entry_point("netsim.tests", "fine", "netsim.plugins:group")
    add_entry_point("netsim.tests", "not-callable", "netsim.plugins:POLICIES")

    def callable_only(obj, name):
        if not callable(obj):
            raise TypeError(f"{name} loads {obj!r}, which is not callable")
        return obj

    with pytest.warns(PluginWarning, match="'not-callable'.*TypeError"):
        loaded = load_group("netsim.tests", callable_only)
    assert list(loaded) == ["fine"]
    assert broken_plugin("netsim.tests", "not-callable") is not None


def test_a_broken_figure_plugin_leaves_the_others(add_entry_point, capsys):
    from netsim.plugins import FIGURES

    add_entry_point(FIGURES, "my-figure", "no_such_module_for_netsim_tests.figures:FIG")
    add_entry_point(FIGURES, "not-a-figure", "netsim.plugins:group")
    assert main(["figures"]) == 0
    captured = capsys.readouterr()
    assert "timeline" in captured.out and "my-figure" not in captured.out
    assert "plug-in 'my-figure'" in captured.err and "ModuleNotFoundError" in captured.err
    assert "plug-in 'not-a-figure'" in captured.err and "FigureEntry" in captured.err


# --- a user's own policy, named on the command line or given to netsim.sweep ---------------

OWN_POLICY = '''
from pydantic import BaseModel, ConfigDict, Field

from netsim.policy import Decision, register


class Params(BaseModel):
    """k: how many devices train, those holding the most samples."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    k: int = Field(1, ge=1)


@register("own-cheapest-k", "the k devices holding the most samples", Params)
class CheapestK:
    def __init__(self, params: Params) -> None:
        self.name, self.params = "own-cheapest-k", params

    def reset(self, scenario, rng) -> None:
        pass

    def decide(self, obs):
        ids, samples = obs.devices.ids, obs.devices.samples
        order = sorted((i for i in range(len(ids)) if samples[i] > 0), key=lambda i: -samples[i])
        return Decision(participants={ids[i]: int(samples[i]) for i in order[:self.params.k]})
'''


@pytest.fixture
def own_policy(tmp_path, monkeypatch):
    """A user's policy file, ``netsim_test_own_policy.py``, in the current folder."""
    import sys

    from netsim.policy import registry

    (tmp_path / "netsim_test_own_policy.py").write_text(OWN_POLICY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(registry, "_LOCAL", {})
    yield tmp_path / "netsim_test_own_policy.py"
    sys.modules.pop("netsim_test_own_policy", None)


def test_own_policy_by_module_and_class_needs_allow_imports(own_policy, capsys):
    argv = ["run", "two-phones", "--policy", "netsim_test_own_policy:CheapestK",
            "--out", "o", "--no-figure"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--policy: 'netsim_test_own_policy:CheapestK' names a policy class" in err
    assert "only with --allow-imports: add it" in err and "unknown policy" not in err
    assert "netsim_test_own_policy" not in __import__("sys").modules  # (nothing imported)
    assert main([*argv, "--allow-imports", "--param", "own-cheapest-k.k=2"]) == 0
    out = capsys.readouterr().out
    assert "own-cheapest-k" in out


def test_own_policy_by_file_and_its_errors(own_policy, capsys):
    assert main(["run", "two-phones", "--policy", f"{own_policy}:CheapestK", "--allow-imports",
                 "--out", "o", "--no-figure"]) == 0
    assert "own-cheapest-k" in capsys.readouterr().out
    for given, expect in [("netsim_test_own_policy:Nope", "has no attribute 'Nope'"),
                          ("no_such_module_for_netsim_tests:X", "ModuleNotFoundError"),
                          ("netsim_test_own_policy:Params", "not a policy class")]:
        assert main(["run", "two-phones", "--policy", given, "--allow-imports", "--out", "o",
                     "--no-figure"]) == 2, given
        err = capsys.readouterr().err
        assert f"--policy: {given!r}" in err and expect in err, given


def test_sweep_takes_policy_objects(own_policy, tmp_path):
    import sys

    import netsim

    sys.path.insert(0, str(own_policy.parent))
    from netsim_test_own_policy import CheapestK, Params

    results = netsim.sweep({"base": "two-phones", "policies": [CheapestK(Params(k=1)),
                                                               "fedavg-all"], "seeds": 1},
                           out=tmp_path / "sweep")
    runs = results.runs.set_index("policy")
    assert set(runs.index) == {"own-cheapest-k", "fedavg-all"}
    assert (runs["status"] != "failed").all()
    assert '"k": 1' in runs.loc["own-cheapest-k", "policy_params"]
    with pytest.raises(netsim.ScenarioError, match=r"policies\[0\]: .*is no policy"):
        netsim.sweep({"base": "two-phones", "policies": [object()], "seeds": 1},
                     out=tmp_path / "other")
    with pytest.raises(netsim.ScenarioError, match="workers=1"):
        netsim.sweep({"base": "two-phones", "policies": [CheapestK(Params())], "seeds": 1},
                     out=tmp_path / "other", workers=2)
