"""``netsim report``: one self-contained HTML page with the tables and every figure."""

from __future__ import annotations

import base64
import re

import matplotlib

matplotlib.use("Agg")

from netsim.cli import main  # noqa: E402
from netsim.sweep.plan import load_plan  # noqa: E402
from netsim.sweep.runner import run_sweep  # noqa: E402


def test_report_is_self_contained_with_tables_figures_and_failures(tmp_path, capsys):
    sweep = tmp_path / "r.yaml"
    sweep.write_text("name: rep\nbase: two-phones\npolicies: [fedavg-all, fastest-k]\n"
                     "seeds: 2\ngrid: {training.max_epochs: [4, 8]}\n")
    run_sweep(load_plan(sweep), tmp_path / "res", progress=False)
    page = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "res"), "--out", str(page), "--title", "T"]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<title>T</title>" in text
    assert "sweep rep, point 0: max_epochs=4 (2 seeds)" in text
    assert "sweep rep, point 1: max_epochs=8 (2 seeds)" in text
    assert text.count("<table") == 1 + 2  # status counts + one comparison per point
    assert "No run failed." in text
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    captions = re.findall(r"<figcaption>([^<]+)</figcaption>", text)
    assert len(images) == len(captions) >= 6
    assert {"energy-by-policy", "energy-vs-time", "energy-vs-axis-max_epochs",
            "loss-vs-time-point0", "loss-vs-time-point1"} <= set(captions)
    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in images)
    assert not re.search(r"(src|href)=['\"]?(https?:|//|file:)", text)  # nothing external
    assert "<script" not in text
    assert "wrote" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing")]) == 2


def test_report_replaces_only_its_own_page_and_lists_skipped_figures_by_reason(tmp_path, capsys):
    import netsim
    from netsim.commands.report import GENERATOR

    res = tmp_path / "res"
    netsim.simulate("two-phones", "fedavg-all", out=res)
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    assert main(["report", str(res), "--out", str(precious)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "is not a netsim report" in err and precious.read_text() == "mine"
    page = tmp_path / "page.html"
    assert main(["report", str(res), "--out", str(page)]) == 0
    out = capsys.readouterr().out
    skipped = [ln for ln in out.splitlines() if ln.startswith("skipped")]
    assert skipped and all(re.match(r"skipped \d+ figure\(s\) \(.+\): \S", ln) for ln in skipped)
    reasons = [ln.split("(s) ")[1].split("):")[0] for ln in skipped]
    assert len(reasons) == len(set(reasons))  # one line per reason
    assert GENERATOR in page.read_text(encoding="utf-8")
    assert main(["report", str(res), "--out", str(page)]) == 0  # its own page: replaced
    # a page written before the mark is netsim's too
    page.write_text(page.read_text(encoding="utf-8").replace(GENERATOR, ""), encoding="utf-8")
    assert main(["report", str(res), "--out", str(page)]) == 0
    (res / "report.html").write_text("<html>my notes</html>")
    assert main(["report", str(res)]) == 2
    assert "report.html' exists and is not a netsim report" in capsys.readouterr().err
    assert (res / "report.html").read_text() == "<html>my notes</html>"
