"""Bisect, the compatibility matrix and declaration widening, on made-up reports (no vLLM, no install):
behaviour is compared, never labels; the first release is found with few measurements; a pairing
says so; unmeasured cells are inferred only between agreeing neighbours; pins and widened ranges."""

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from vlcheck.gate import measured
from vlcheck.versions import bisect, compat_report, declarations, envs
from vlcheck.versions.matrix import Axes, Grid, next_step
from vlcheck.versions.points import Point, Store
from vlcheck.spec.registry import all_families
from vlcheck.spec.schema import Declaration

CHECKS = ["architecture", "processor"]
NOTE = (" (the spec's deviations.processor, measured on vllm ==0.24.0, transformers ==5.16.1, does not apply to "
        "vllm 0.32.0, transformers 5.19.0, torch 2.13.0: checked plainly)")


def cell(status="pass", reason="ok", details=(), data=None):
    return {"status": status, "reason": reason, "details": list(details), "data": data or {}}


def report(vllm, transformers, families):
    return {"environment": {"vllm": vllm, "transformers": transformers, "torch": "2.13.0"}, "checks": CHECKS,
            "summary": {}, "families": {f: {"title": f, "model": f, "checks": row} for f, row in families.items()}}


def test_a_declared_deviation_and_the_same_failure_out_of_its_range_are_the_same_behaviour():
    inside = cell("declared deviation", "[single] the spec's reason", ["[single] aya: crashed in _prompt_split_image"])
    outside = cell("fail", "[single] aya: crashed in _prompt_split_image" + NOTE,
                   data={"single.declaration_not_applied": "processor"})
    old, new = {"vllm": "0.24.0"}, {"vllm": "0.32.0"}
    assert measured.classify(measured.digest(inside, old), measured.digest(outside, new)) == measured.SAME


def test_versions_in_a_reason_are_not_behaviour_but_moved_facts_and_new_failures_are():
    old_env, new_env = {"vllm": "0.24.0"}, {"vllm": "0.32.0"}
    unregistered = lambda v: cell("fail", f"[single] X is not a supported architecture of vllm {v}")  # noqa: E731
    d = lambda c, e: measured.digest(c, e)  # noqa: E731
    assert measured.classify(d(unregistered("0.24.0"), old_env), d(unregistered("0.32.0"), new_env)) == measured.SAME
    spec_words = cell("skip", "no checkpoint: vLLM 0.24.0's fuyu.py hard-codes the image token ids")
    assert measured.classify(d(spec_words, old_env), d(spec_words, new_env)) == measured.SAME
    counts = lambda n: cell(data={"single.token_counts": {"video x1": n}})  # noqa: E731
    moved = measured.classify(d(counts(136), old_env), d(counts(72), new_env))
    assert moved == measured.CHANGED
    assert "136 -> 72" in measured.describe_change(d(counts(136), old_env), d(counts(72), new_env))
    assert measured.classify(d(cell(), old_env), d(unregistered("0.32.0"), new_env)) == measured.REGRESSED
    repr_at = lambda a: cell("fail", f"ValueError: data={{'images': [<PIL.Image.Image size=224x224 at {a}>]}}")  # noqa: E731
    assert measured.classify(d(repr_at("0x7F3306E59A50"), old_env), d(repr_at("0x7F11A2B3C4D5"), new_env)) == measured.SAME
    assert measured.classify(d(unregistered("0.24.0"), old_env), d(repr_at("0x1"), new_env)) == measured.CHANGED
    not_mm = lambda h: cell("fail", f"ValueError: /root/.cache/vlcheck/checkpoints/chameleon-{h} is not multimodal")  # noqa: E731
    assert measured.classify(d(not_mm("e33fec1372388fd8"), old_env), d(not_mm("0123456789abcdef"), new_env)) == measured.SAME
    assert measured.classify(d(unregistered("0.24.0"), old_env), d(cell(), new_env)) == measured.FIXED
    assert measured.classify(d(cell("error", "vlcheck crashed"), old_env), d(cell(), new_env)) == measured.NOT_MEASURED


VLLM = ["0.24.0", "0.25.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"]
TF = ["5.16.1", "5.17.0", "5.18.0", "5.19.0"]


def world(point: Point) -> dict:
    """A made-up ecosystem: qwen3_vl's video tokens move in vLLM 0.28.0; llava stops importing with
    transformers >= 5.17.0 on vLLM <= 0.30.0; gemma3 breaks only with vLLM >= 0.29.0 and transformers >= 5.18.0."""
    v, t = (tuple(map(int, x.split("."))) for x in (point.vllm, point.transformers))
    fail = lambda why: cell("fail", why)  # noqa: E731
    return {
        "qwen3_vl": {"architecture": cell(), "processor": cell(data={"video": 72 if v >= (0, 28, 0) else 136})},
        "llava": {"architecture": fail("cannot import name 'PixtralRotaryEmbedding'")
                  if t >= (5, 17, 0) and v <= (0, 30, 0) else cell(), "processor": cell()},
        "gemma3": {"architecture": cell(), "processor": fail("ValueError: video metadata")
                   if v >= (0, 29, 0) and t >= (5, 18, 0) else cell()},
        "fuyu": {"architecture": cell(), "processor": cell()},
    }


class FakeStore(Store):
    """Measures the made-up world instead of running vlcheck, counting the points it measured."""

    def __init__(self, root):
        super().__init__(root, log=lambda m: None)
        self.runs = []

    def measure(self, point, families=None, checks=None, torch=None):
        self.runs.append((point, tuple(sorted(families)) if families is not None else None))
        rows = world(point)
        rows = {f: {c: r for c, r in row.items() if checks is None or c in checks}
                for f, row in rows.items() if families is None or f in families}
        self.add_report(point, report(point.vllm, point.transformers, rows), {"whole": families is None})
        return self.measured(point)


def test_bisect_finds_each_first_release_measuring_few_points(tmp_path):
    base, cand = Point("0.24.0", "5.16.1"), Point("0.32.0", "5.19.0")
    store = FakeStore(tmp_path)
    found = bisect.bisect(report(base.vllm, base.transformers, world(base)),
                          report(cand.vllm, cand.transformers, world(cand)), store, VLLM, TF, log=lambda m: None)
    by = {(f.family, f.check): f for f in found}
    assert set(by) == {("qwen3_vl", "processor"), ("gemma3", "processor")}  # llava: fixed by 0.32.0 -> no finding
    q = by["qwen3_vl", "processor"]
    assert (q.cause, q.since_vllm, q.last_good_vllm) == ("vllm", "0.28.0", "0.27.0")
    g = by["gemma3", "processor"]
    assert (g.cause, g.since_transformers, g.with_vllm) == ("pairing", "5.18.0", "0.32.0")
    assert "pairing" in g.since
    # only the families of the findings, and about log2 of the releases per axis
    assert all(fams is not None and set(fams) <= {"qwen3_vl", "gemma3"} for _, fams in store.runs)
    assert len(store.runs) <= 1 + 4 + 2 + 1


def test_matrix_measures_by_bisection_infers_only_between_agreeing_neighbours_and_advises_pins(tmp_path):
    axes = Axes(VLLM, TF, ["0.24.0", "0.28.0", "0.32.0"], ["5.16.1", "5.19.0"])
    store = FakeStore(tmp_path)
    for _ in range(40):
        step = next_step(Grid(store, axes))
        if step is None:
            break
        store.measure(*step)
    assert step is None, "the plan ends"
    grid = Grid(store, axes)
    family_runs = sum(len(fams) if fams else 4 for _, fams in store.runs)
    assert family_runs < 4 * len(VLLM) * len(TF) / 2, store.runs  # far from the whole grid
    # fuyu never changes: every cell is known without being measured
    label, how, evidence = grid.label(Point("0.26.0", "5.18.0"), "fuyu")
    assert (label, how) == (measured.SAME, "inferred") and len(evidence) >= 2
    assert grid.label(Point("0.28.0", "5.17.0"), "llava")[0] == measured.REGRESSED
    advice = compat_report.pins(grid)
    assert "llava" in advice["0.28.0"]["pin transformers<5.17.0"]
    assert "llava" in advice["0.32.0"]["any transformers up to 5.19.0"]
    since = {(s.family, s.check): s for s in compat_report.findings(grid)}
    assert since["qwen3_vl", "processor"].vllm == "0.28.0 (last same 0.27.0)"
    assert any("with vLLM 0.28.0: 5.17.0 (last same 5.16.1)" in t for t in since["llava", "architecture"].transformers)
    section = compat_report.readme_section(grid, "compat")
    assert section.startswith(compat_report.BEGIN) and "| 0.28.0 | pin transformers<5.17.0 | llava |" in section
    page = compat_report.to_html(grid)
    anchors = {a.split('"')[0] for a in page.split('id="')[1:]}
    assert all(link.split('"')[0] in anchors for link in page.split('href="#')[1:])


def test_declarations_widen_to_the_measured_box_and_list_changed_behaviour(tmp_path):
    axes = Axes(["0.24.0", "0.28.0", "0.30.0"], ["5.16.1", "5.17.0"], ["0.24.0", "0.30.0"], ["5.16.1", "5.17.0"])
    store = FakeStore(tmp_path)
    declared = cell("declared deviation", "spec reason", ["[single] aya_vision: _prompt_split_image crashed"])
    fixed = cell()
    for p, proc in [(Point("0.24.0", "5.16.1"), declared), (Point("0.28.0", "5.16.1"), declared),
                    (Point("0.30.0", "5.16.1"), fixed), (Point("0.24.0", "5.17.0"), declared),
                    (Point("0.28.0", "5.17.0"), declared)]:
        rows = {"aya_vision": {"architecture": cell(), "processor": proc}}
        store.add_report(p, report(p.vllm, p.transformers, rows), {"whole": True})
    changes = [c for c in declarations.widen(Grid(store, axes)) if c.family == "aya_vision"]
    proc = next(c for c in changes if c.check == "processor")
    assert proc.new[0] == ">=0.24.0,<=0.28.0"
    assert SpecifierSet(proc.new[1]).contains("5.17.0")  # widened to what was measured (or already wider)
    assert proc.changed_at == [str(Point("0.30.0", "5.16.1"))]
    assert not next(c for c in changes if c.check == "generation").measured  # a GPU check: not measured here


def test_known_broken_cases_widen_where_the_hostile_check_behaves_as_at_the_reference(tmp_path, monkeypatch):
    """A known_broken case is a declaration the hostile check measures: the reference's declared
    breakage and the same breakage outside the declaration's versions are one behaviour."""
    real = all_families()["qwen2_vl"]
    measured_once = Declaration("measured on the reference", "==0.24.0", "==5.16.1")
    once = {kind: replace(v, known_broken={c: measured_once for c in v.known_broken})
            for kind, v in (("single", real.single), ("multi_image", real.multi_image))}
    monkeypatch.setattr(declarations, "all_families", lambda: {"qwen2_vl": replace(real, **once)})
    axes = Axes(["0.24.0", "0.28.0", "0.30.0"], ["5.16.1"], ["0.24.0", "0.30.0"], ["5.16.1"])
    store = FakeStore(tmp_path)
    words = "[single] qwen2_vl: broken on vLLM's processor: own placeholder in question: broken: ValueError"
    at_reference = cell("declared deviation", "[single] known_broken: own placeholder in question: spec reason", [words])
    outside = cell("fail", words, [words])
    for p, hostile in [(Point("0.24.0", "5.16.1"), at_reference), (Point("0.28.0", "5.16.1"), outside),
                       (Point("0.30.0", "5.16.1"), cell())]:
        store.add_report(p, report(p.vllm, p.transformers, {"qwen2_vl": {"hostile": hostile}}), {"whole": True})
    grid = Grid(store, axes)
    changes = [c for c in declarations.widen(grid) if c.family == "qwen2_vl" and c.check == "hostile"]
    assert changes and all(c.table.startswith("known_broken.") for c in changes)
    case = next(c for c in changes if c.table == 'known_broken."own placeholder in question"')
    assert case.new[0] == ">=0.24.0,<=0.28.0" and case.changed_at == [str(Point("0.30.0", "5.16.1"))]
    assert grid.label(Point("0.28.0", "5.16.1"), "qwen2_vl")[0] == measured.SAME  # not a regression


def test_rewrite_touches_only_the_named_declaration(tmp_path):
    spec = tmp_path / "x.toml"
    spec.write_text('[single.deviations.template]\nreason = "r"\nvllm = "==0.24.0"\ntransformers = "==5.16.1"\n\n'
                    '[single.deviations.stops]\nreason = "s"\nvllm = "==0.24.0"\ntransformers = "==5.16.1"\n')
    declarations._rewrite(spec, "[single.deviations.stops]", (">=0.24.0,<=0.30.0", "==5.16.1"))
    text = spec.read_text()
    assert text.count('vllm = "==0.24.0"') == 1 and 'vllm = ">=0.24.0,<=0.30.0"' in text.split("stops]")[1]
    spec.write_text('[single.known_broken."1x1 image"]\nreason = "r"\nvllm = "==0.24.0"\ntransformers = "==5.16.1"\n')
    declarations._rewrite(spec, '[single.known_broken."1x1 image"]', (">=0.24.0,<=0.28.0", "==5.16.1"))
    assert 'vllm = ">=0.24.0,<=0.28.0"' in spec.read_text()
    assert declarations._widened(">=0.24.0,<=0.32.0", "0.28.0") == ">=0.24.0,<=0.32.0"  # never narrowed


def test_env_requests_name_their_versions_and_ignore_local_wheel_folders(monkeypatch):
    r = envs.EnvRequest("0.28.0", "5.17.0")
    assert r.key == "vllm-0.28.0_transformers-5.17.0_torch-resolved"
    assert r.requirements() == ["vllm==0.28.0", "transformers==5.17.0"]
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("UV_FIND_LINKS", "/opt/wheels")
    env = envs._uv_environment()
    assert "PIP_FIND_LINKS" not in env and "UV_FIND_LINKS" not in env and env["UV_NO_CONFIG"] == "1"


def _fake_uv(tmp_path, body):
    uv = tmp_path / "uv"
    uv.write_text("#!/bin/sh\n" + body)
    uv.chmod(uv.stat().st_mode | stat.S_IEXEC)
    return str(uv)


def test_env_is_reused_when_complete_and_a_failed_install_names_the_request(tmp_path, monkeypatch):
    monkeypatch.setenv("VLCHECK_ENVS", str(tmp_path / "envs"))
    r = envs.EnvRequest("0.32.0", "5.23.0")
    monkeypatch.setattr(envs, "find_uv", lambda: _fake_uv(tmp_path, 'case "$1" in venv) mkdir -p "$5/bin";; '
                        '*) echo "error: No solution found: vllm==0.32.0 depends on transformers<5.20.0" >&2; exit 1;; esac\n'))
    with pytest.raises(envs.EnvError, match=r"(?s)vllm==0.32.0, transformers==5.23.0.*uv pip install failed.*transformers<5.20.0"):
        envs.ensure(r, log=lambda m: None)
    assert not (tmp_path / "envs" / r.key).exists(), "an interrupted environment is never left to be reused"
    done = tmp_path / "envs" / r.key
    (done / "bin").mkdir(parents=True)
    (done / "bin" / "python").write_text("")
    (done / envs.MARKER).write_text(json.dumps({"versions": {"vllm": "0.32.0"}, "vlcheck_source": envs.vlcheck_source()}))
    monkeypatch.setattr(envs, "find_uv", lambda: pytest.fail("a complete environment needs no uv"))
    env = envs.ensure(r, log=lambda m: None)
    assert env.created_s is None and env.versions == {"vllm": "0.32.0"}
    assert envs.vllm_cache("0.28.0") != envs.vllm_cache("0.30.0")


def test_a_library_class_rejected_by_pydantic_validation_is_the_librarys_finding():
    """vLLM's ModelConfig is a pydantic dataclass: its validator's ValueError (an architecture that does not
    import with this transformers) reaches vlcheck as a ValidationError with no vLLM frame: a fail, not an error."""
    pydantic = pytest.importorskip("pydantic")
    from vlcheck.core.results import raised_by

    @pydantic.dataclasses.dataclass
    class ModelConfig:
        model: str

        def __post_init__(self):
            raise ValueError("Model architectures ['LlavaForConditionalGeneration'] failed to be inspected")

    ModelConfig.__module__ = "vllm.config.model"
    with pytest.raises(pydantic.ValidationError) as caught:
        ModelConfig(model="x")
    assert raised_by(caught.value) == "vllm"


def test_only_versions_that_cannot_install_together_are_remembered_a_missing_tool_stops_the_run(tmp_path, monkeypatch):
    from vlcheck.versions.points import ToolFailure, Unmeasurable

    store, point = Store(tmp_path), Point("0.33.0", "5.16.1")

    def no_uv(request, **_):
        raise envs.EnvError("uv is not installed: `pip install uv` (vlcheck makes its environments with it)")

    monkeypatch.setattr(envs, "ensure", no_uv)
    with pytest.raises(ToolFailure):
        store.measure(point)
    assert store.unmeasurable(point) is None and not (tmp_path / "points" / f"{point.name}.json").exists()

    def unsatisfiable(request, **_):
        raise envs.EnvError(f"{request}: uv pip install failed (exit 1):\n  x No solution found when resolving "
                            "dependencies:\n  because there is no version of certifi>=2026.10.19")

    monkeypatch.setattr(envs, "ensure", unsatisfiable)
    with pytest.raises(Unmeasurable):
        store.measure(point)
    assert "No solution found" in Store(tmp_path).unmeasurable(point)
