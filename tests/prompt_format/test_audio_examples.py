"""The audio examples (`audio_language.py`): a spec's `audio` variant is held to the example's own code
(prompt, clip count, question), and a check that sends no audio skips an audio family-config saying so."""

import dataclasses

import pytest

from vlcheck.core.results import Status
from vlcheck.examples import seeds
from vlcheck.examples.seed_check import compare
from vlcheck.gate.checks import Check, run_variant
from vlcheck.prompt import render
from vlcheck.spec.registry import all_families
from vlcheck.spec.schema import MediaPlaceholder

AUDIO_SCRIPT = "newer/audio_language.py"


@pytest.fixture
def families():
    if seeds.load_seed(AUDIO_SCRIPT) is None:
        pytest.skip(f"{AUDIO_SCRIPT} not found in {seeds.seeds_dir()} (set {seeds.SEEDS_ENV})")
    return all_families()


def test_every_audio_spec_follows_its_example(families):
    audio = {name: spec for name, spec in families.items() if spec.audio is not None}
    assert len(audio) == 11 and "voxtral" not in audio  # the Mistral format: token ids, no prompt string
    assert {name: compare(spec, spec.audio) for name, spec in audio.items()} == {name: [] for name in audio}


def test_a_placeholder_without_its_number_is_caught(families):
    spec = families["qwen2_audio"]
    unnumbered = dataclasses.replace(spec.audio, modalities={"audio": MediaPlaceholder(
        text="<|audio_bos|><|AUDIO|><|audio_eos|>\n")})
    problems = compare(spec, unnumbered)
    assert problems and all("prompt: spec" in p for p in problems), problems
    assert any("(audio x2)" in p for p in problems)


@pytest.mark.parametrize("name, max_audios, words", [
    ("qwen2_audio", 1, "max_audios 1, but the example takes 2 clips too"),
    ("qwen2_audio", 3, "max_audios 3, the script sends at most 2"),  # its --num-audios choices: 0, 1, 2
    ("whisper", 2, "max_audios 2: the example refuses it (AssertionError: Whisper only support single audio"),
])
def test_the_clip_count_is_the_examples(families, name, max_audios, words):
    spec = families[name]
    problems = compare(spec, dataclasses.replace(spec.audio, max_audios=max_audios))
    assert any(words in p for p in problems), problems


def test_the_question_per_clip_count_is_the_scripts(families, monkeypatch):
    spec = families["qwen2_audio"]
    monkeypatch.setitem(render.AUDIO_QUESTIONS, 2, "What is this?")
    problems = compare(spec, spec.audio)
    assert any("the script asks 'What sport and what nursery rhyme are referenced?' of 2 clip(s)" in p
               for p in problems), problems


def test_a_check_that_sends_no_audio_skips_an_audio_example_saying_so(families):
    spec = families["qwen2_audio"]
    ran = []
    visual = Check("visual", lambda s, v: ran.append(v.kind), "tests/x.py::test_x")
    result = run_variant(visual, spec, spec.audio)
    assert result.status is Status.SKIP and not ran
    assert result.reason == ("[audio] the audio example takes audio; this check sends image/video only, so it "
                             "cannot run here")
