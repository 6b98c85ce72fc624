"""The specs against a second, independent reading of vLLM's examples: the seed files' own code,
executed with vLLM and transformers stubbed out (`vlcheck.examples.seeds`)."""

import re

import pytest

from vlcheck.core.results import Status
from vlcheck.examples import seeds
from vlcheck.runners.testing import run_check
from vlcheck.examples.seed_check import compare, compare_drift, string_literals
from vlcheck.prompt.render import IMAGE_QUESTIONS, MULTI_IMAGE_QUESTION, VIDEO_QUESTIONS
from vlcheck.spec.registry import all_families

# The coverage: every family of the newest intact example, plus these from other seeds.
EXTRA_SINGLE = {"hunyuan_vl": "001", "florence2": "002", "mllama": "002"}


def _need_seed(seed: str) -> None:
    if seeds.seed_file(seed) is None:
        pytest.skip(f"seed {seed} not found in {seeds.seeds_dir()} (set {seeds.SEEDS_ENV})")


def test_spec_matches_example(family, request):
    """The catalogue's `spec` check: skips, naming the seeds folder, where no seed of the family
    can be executed (a one-line scrape is checked by literals instead: test_unrunnable_seed_literals)."""
    if all(v.source is None for v in family.variants):
        pytest.skip(f"{family.name}: a user's own model: no vLLM example to compare with")
    result = run_check(request, "spec", family)
    if result is not None:  # None: compared with --vlcheck-baseline
        assert result.status is Status.PASS, f"{family.name} spec: " + "\n".join(result.details or [result.reason])


def test_drifts_are_real(family):
    drifts = [(v, d) for v in family.variants for d in v.drifts]
    if not drifts:
        pytest.skip(f"{family.name}: no recorded drifts")
    for variant, drift in drifts:
        _need_seed(drift.seed)
        problems = compare_drift(family, variant, drift)
        assert problems == [], f"{family.name} [{variant.kind}] spec: " + "\n".join(problems)


def test_unrunnable_seed_literals():
    """The one-line scrape (001) cannot run: what a spec or a drift record takes from it is checked
    against the string constants of its function, template and placeholder both (hunyuan_vl's
    drift: the scrape's ASCII bars)."""
    _need_seed("001")
    checked = []
    for family in all_families().values():
        for variant in family.variants:
            if variant.source.seed == "001":
                literals = string_literals("001", variant.source.function)
                assert variant.prompt.template in literals, f"{family.name}: template not in seed 001"
                for modality in variant.modalities.values():
                    assert modality.text in literals, f"{family.name}: placeholder {modality.text!r} not in seed 001"
                checked.append(family.name)
            for drift in variant.drifts:
                if drift.seed == "001" and drift.template is not None:
                    assert drift.template in string_literals("001", drift.function), f"{family.name}: drift not in seed 001"
                    checked.append(family.name)
    assert checked, "nothing is taken from seed 001"


def test_every_example_has_a_spec():
    for seed in ("000", "003", "004"):
        _need_seed(seed)
    families = all_families()
    single = set(seeds.example_map("000")) | set(EXTRA_SINGLE)
    multi = set(seeds.example_map("003")) | set(seeds.example_map("004"))
    assert sorted(single - {n for n, f in families.items() if f.single}) == []
    assert sorted(multi - {n for n, f in families.items() if f.multi_image}) == []
    assert len(single) == 62 and len(multi) == 16


def test_newest_seed_is_the_source():
    """A family present in the newest runnable example is specified from it, not an older one."""
    for seed in ("000", "003", seeds.NEWER_SINGLE):
        _need_seed(seed)
    newer_single = seeds.example_map(seeds.NEWER_SINGLE)
    newest_multi = seeds.example_map("003")
    for name, family in all_families().items():
        if family.single and name in newer_single:
            assert (family.single.source.seed, family.single.source.function) == \
                (seeds.NEWER_SINGLE, newer_single[name]), name
        if family.multi_image and name in newest_multi:
            assert family.multi_image.source.seed == "003", name


def _list_literal(text: str, name: str) -> list[str]:
    block = re.search(rf"{name} = \[(.*?)\]", text, re.S)
    assert block, f"no `{name} = [...]` in the example"
    return re.findall(r'"([^"]*)"', block.group(1))


def test_questions_are_the_examples():
    """The questions are passed into the example functions by the comparison above, so a typo in
    them would go unseen there: check them against the examples' own literals."""
    _need_seed("000")
    _need_seed("003")
    text = seeds.function_text("000", "get_multi_modal_input")
    assert _list_literal(text, "img_questions") == list(IMAGE_QUESTIONS)
    assert _list_literal(text, "vid_questions") == list(VIDEO_QUESTIONS)
    assert seeds.load_seed("003")["QUESTION"] == MULTI_IMAGE_QUESTION
