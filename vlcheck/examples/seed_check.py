"""Compare a family spec with its example, executed from the seed (see `vlcheck.examples.seeds`).

`vlcheck check --check spec --family NAME` prints every mismatch (the catalogue's `spec` check); the
prompt-format tests run the same comparison for every family.
"""

from __future__ import annotations

import re
from typing import Any

from vlcheck.examples import seeds
from vlcheck.prompt.render import AUDIO_QUESTIONS, default_questions, fill, messages, render_prompt
from vlcheck.spec.schema import MODALITIES, Drift, FamilySpec, Variant, media_url


def _plain(value: Any) -> Any:
    """Seed values in the spec's TOML vocabulary: refs as import paths, sets as sorted lists."""
    if isinstance(value, seeds.Ref):
        return value.qualname
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _model_path(variant: Variant) -> str:
    if not variant.model_from_snapshot:
        return variant.model
    return f"snapshot://{variant.model}" + (f"@{variant.revision}" if variant.revision else "")


def _call(variant: Variant, modality: str, questions, count: int) -> seeds.ExampleRun:
    if variant.kind == "audio":
        return seeds.run_example(variant.source.seed, variant.source.function, questions[0], count)
    if variant.kind == "multi_image":
        urls = [media_url("image", i) for i in range(1, count + 1)]
        return seeds.run_example(variant.source.seed, variant.source.function, questions[0], urls)
    return seeds.run_example(variant.source.seed, variant.source.function, list(questions), modality)


def seed_modalities(variant: Variant) -> set[str]:
    """The modalities the example function accepts (it raises for the others)."""
    if variant.kind in ("multi_image", "audio"):
        return {"image" if variant.kind == "multi_image" else "audio"}
    accepted = set()
    for modality in MODALITIES:
        try:
            _call(variant, modality, ["q"], 1)
            accepted.add(modality)
        except Exception:
            pass
    return accepted


def compare(spec: FamilySpec, variant: Variant) -> list[str]:
    """Every way the spec's variant differs from what its example function does."""
    where = f"{spec.name} [{variant.kind}] vs seed {variant.source.seed}:{variant.source.function}"
    problems: list[str] = []
    accepted = seed_modalities(variant)
    if accepted != set(variant.modalities):
        problems.append(f"{where}: modalities: spec {sorted(variant.modalities)}, example accepts {sorted(accepted)}")
    needs_metadata = set(seeds.load_seed(variant.source.seed).get("MODELS_NEED_VIDEO_METADATA", []))
    if "video" in variant.modalities and variant.modalities["video"].video_metadata != (spec.name in needs_metadata):
        problems.append(f"{where}: video_metadata: spec {variant.modalities['video'].video_metadata}, "
                        f"example {spec.name in needs_metadata}")
    if variant.kind == "multi_image":
        urls = seeds.load_seed(variant.source.seed).get("IMAGE_URLS", [])
        if variant.max_images != len(urls):
            problems.append(f"{where}: max_images {variant.max_images}, example sends {len(urls)} images")
    if variant.kind == "audio":
        problems += _compare_audio_count(variant, where)
    for modality in sorted(accepted & set(variant.modalities)):
        for count in variant.item_counts():
            questions = default_questions(variant, modality, count)
            try:
                run = _call(variant, modality, questions, count)
            except Exception as err:  # noqa: BLE001 - the example refusing a count the spec declares is the spec's problem
                problems.append(f"{where} ({modality} x{count}): the example refuses it: {type(err).__name__}: {err}")
                continue
            problems += _compare_run(spec, variant, modality, questions, count, run, f"{where} ({modality} x{count})")
    return problems


def _compare_audio_count(variant: Variant, where: str) -> list[str]:
    """max_audios: the example runs with that many clips and, below the script's most
    (`--num-audios` choices), refuses one more (Whisper asserts a single clip)."""
    asked = seeds.load_seed(variant.source.seed).get("question_per_audio_count", {})
    most = max(asked, default=1)
    differ = [n for n in variant.item_counts() if n in asked and asked[n] != AUDIO_QUESTIONS.get(n)]
    if differ:
        return [f"{where}: the script asks {asked[differ[0]]!r} of {differ[0]} clip(s), vlcheck "
                f"{AUDIO_QUESTIONS.get(differ[0])!r} (prompt/render.py AUDIO_QUESTIONS)"]
    try:
        _call(variant, "audio", ["q"], variant.max_audios)
    except Exception as err:  # noqa: BLE001 - the example's own refusal, whatever it raises
        return [f"{where}: max_audios {variant.max_audios}: the example refuses it ({type(err).__name__}: {err})"]
    if variant.max_audios >= most:
        return [] if variant.max_audios == most else [f"{where}: max_audios {variant.max_audios}, the script sends "
                                                       f"at most {most}"]
    try:
        _call(variant, "audio", ["q"], variant.max_audios + 1)
    except Exception:  # noqa: BLE001
        return []
    return [f"{where}: max_audios {variant.max_audios}, but the example takes {variant.max_audios + 1} clips too"]


def _compare_run(spec, variant, modality, questions, count, run: seeds.ExampleRun, where: str) -> list[str]:
    problems = []
    expected_args = variant.engine_args_for(modality, count) | {"model": _model_path(variant)}
    got_args = _plain(run.engine_args)
    # Args the script fills from its command line (002: `disable_mm_preprocessor_cache=args...`)
    # are the runner's business, not the spec's; each must be declared as a drift.
    declared = {k for d in variant.drifts if d.engine_args for k in d.engine_args}
    for key, value in list(got_args.items()):
        if isinstance(value, str) and value.startswith("args."):
            del got_args[key]
            if key not in declared:
                problems.append(f"{where}: engine_args.{key} comes from the script's command line ({value}); "
                                "declare it in a drift of kind engine-arg-renamed")
    if got_args != expected_args:
        keys = sorted(set(got_args) | set(expected_args))
        diff = [f"{k}: spec {expected_args.get(k, '(absent)')!r} != example {got_args.get(k, '(absent)')!r}"
                for k in keys if got_args.get(k, "(absent)") != expected_args.get(k, "(absent)")]
        problems.append(f"{where}: engine_args: " + "; ".join(diff))

    if variant.prompt.template is not None:
        if run.chat_calls:
            problems.append(f"{where}: spec has a hand template but the example calls apply_chat_template")
        else:
            for q, got in zip(questions, run.prompts):
                want = render_prompt(spec, variant, modality, q, count)
                if want != got:
                    problems.append(f"{where}: prompt: spec {want!r} != example {got!r}")
    else:
        if not run.chat_calls:
            problems.append(f"{where}: spec uses the chat template but the example writes the prompt by hand")
        for q, call in zip(questions, run.chat_calls):
            want = messages(variant, modality, q, count)
            if call.messages != want:
                problems.append(f"{where}: messages: spec {want!r} != example {call.messages!r}")
            if call.owner != variant.prompt.chat_template:
                problems.append(f"{where}: chat_template owner: spec {variant.prompt.chat_template}, example {call.owner}")
            if call.kwargs.get("chat_template") != variant.prompt.explicit_chat_template:
                problems.append(f"{where}: explicit_chat_template differs from the example's")
            if call.kwargs.get("add_generation_prompt") is not True:
                problems.append(f"{where}: the example does not pass add_generation_prompt=True")

    problems += _compare_stops(variant, run, where)
    sampling = [_plain(c.kwargs) for c in run.sampling_params] if run.sampling_params else None
    if sampling is not None and any(s != sampling[0] for s in sampling):
        problems.append(f"{where}: sampling params differ between requests")
    if (sampling[0] if sampling else None) != variant.sampling:
        problems.append(f"{where}: sampling: spec {variant.sampling!r} != example {sampling[0] if sampling else None!r}")
    lora = [c.args for c in run.lora_requests] if run.lora_requests else None
    want_lora = ([(variant.lora.name, variant.lora.id, variant.lora.path(_model_path(variant)))]
                 if variant.lora else None)
    if lora != want_lora:
        problems.append(f"{where}: lora: spec {want_lora!r} != example {lora!r}")
    return problems


def _compare_stops(variant: Variant, run: seeds.ExampleRun, where: str) -> list[str]:
    got = run.stop_token_ids
    ids = tuple(t for t in got or () if isinstance(t, int))
    tokens = _stop_tokens(run)
    eos = seeds.EOS_TOKEN_ID in (got or ())
    problems = []
    if (ids or None) != variant.stop_token_ids:
        problems.append(f"{where}: stop_token_ids: spec {variant.stop_token_ids} != example {ids or None}")
    if (tokens or None) != variant.stop_tokens:
        problems.append(f"{where}: stop_tokens: spec {variant.stop_tokens} != example {tokens or None}")
    if eos != variant.stop_eos_token:
        problems.append(f"{where}: stop_eos_token: spec {variant.stop_eos_token} != example {eos}")
    text = seeds.function_text(variant.source.seed, variant.source.function) or ""
    drops = bool(re.search(r"if token_id is not None", text))
    if tokens and drops != variant.drop_unknown_stop_tokens:
        problems.append(f"{where}: drop_unknown_stop_tokens: spec {variant.drop_unknown_stop_tokens}, example {drops}")
    return problems


def string_literals(seed: str, function: str) -> list[str]:
    """The string constants of a function in any seed (also the one-line scrape 001): adjacent
    literals concatenated, f-strings evaluated with their names kept as `{slots}`."""
    text = seeds.function_text(seed, function) or ""
    literal = r'[rf]{0,2}"(?:[^"\\]|\\.)*"'
    groups = re.findall(rf"(?:{literal}\s*)+", text)

    class Slots(dict):
        def __missing__(self, key):
            return "{" + key + "}"

    out = []
    for g in groups:
        try:
            out.append(eval(g, {"__builtins__": {}}, Slots()))
        except Exception:
            continue
    return out


def compare_drift(spec: FamilySpec, variant: Variant, drift: Drift) -> list[str]:
    """A drift record must match what the older seed really has, and must differ from the spec."""
    where = f"{spec.name} drift vs seed {drift.seed}:{drift.function}"
    problems = []
    modality = next(iter(variant.modalities))
    question = default_questions(variant, modality)[0]
    placeholder = variant.modalities[modality].render(1)
    runnable = seeds.load_seed(drift.seed) is not None
    if runnable:
        run = seeds.run_example(drift.seed, drift.function, [question], modality)
    for key in ("template", "content"):
        old = getattr(drift, key)
        if old is None:
            continue
        if runnable:
            got = run.prompts[0] if key == "template" else run.chat_calls[0].messages[-1]["content"]
            want = fill(old, question=question, placeholder=placeholder)
            if got != want:
                problems.append(f"{where}: {key}: drift {want!r} != seed {got!r}")
        elif not {old, old.replace("{placeholder}", placeholder)} & set(string_literals(drift.seed, drift.function)):
            problems.append(f"{where}: {key} {old!r} is not a string of the seed function")
        current = getattr(variant.prompt, key)
        if current == old:
            problems.append(f"{where}: {key} equals the spec's: not a drift")
    if drift.engine_args is not None:
        if not runnable:
            problems.append(f"{where}: engine_args drifts need a runnable seed")
        else:
            got = _plain(run.engine_args)
            for k, v in drift.engine_args.items():
                if got.get(k) != v:
                    problems.append(f"{where}: engine_args.{k}: drift {v!r} != seed {got.get(k)!r}")
    if drift.stop_tokens is not None:
        if not runnable:
            problems.append(f"{where}: stop_tokens drifts need a runnable seed")
        elif _stop_tokens(run) != drift.stop_tokens:
            problems.append(f"{where}: stop_tokens: drift {drift.stop_tokens} != seed {_stop_tokens(run)}")
        if drift.stop_tokens == variant.stop_tokens:
            problems.append(f"{where}: stop_tokens equal the spec's: not a drift")
    return problems


def _stop_tokens(run: seeds.ExampleRun) -> tuple[str, ...]:
    return tuple(t.token for t in run.stop_token_ids or () if isinstance(t, seeds.StopTokenOf))
