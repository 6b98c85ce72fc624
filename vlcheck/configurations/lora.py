"""The `lora` configuration: two synthetic PEFT adapters (`checkpoints.lora`, written by peft) on the
family-config's seeded checkpoint, served by vLLM with `enable_lora`, as users serve fine-tunes; and
`lora_tower`: one adapter that also targets the connector, with `enable_tower_connector_lora`, the
same checks with it (and no mixed batch of two adapters).

Per request of the transformers reference (`numerics.reference.requests`, one per modality):
- **applied**: each adapter moves vLLM's first-step top-5 logprobs away from the same engine's
  answer without an adapter (at least `SENSITIVITY_MIN`); an adapter that does not is not applied;
- **as transformers applies it**: vLLM with adapter a (and b) against transformers + peft with the
  same adapter on CPU, by the rule vLLM against transformers is held to (vLLM's
  `check_logprobs_close`, and in float32 the first-step tolerance); a modality whose vLLM-vs-
  transformers comparison is a declared `vllm_reference` deviation is not compared this way;
- **a batch that mixes them**: adapter a, adapter b and no adapter in one `generate` call (both
  adapter slots full, `max_loras=2`), each row held to its own request answered alone.
- **served**, where the served checks select the family-config: `vllm serve --enable-lora
  --lora-modules a=... b=...`, the image request's chat form sent to model `a`, held to the offline
  answer with adapter a where the server rendered the example's prompt token for token (where its
  chat template renders another prompt, llava's, that is the served checks' finding: recorded as
  not compared).

Proof: the adapters the engine loaded (`list_loras`) and how far each moved the first step. A
family whose vLLM model class has no LoRA support (`SupportsLoRA`) skips saying so; so does one
without seeded weights (no transformers reference to hold the adapter to).
"""

from __future__ import annotations

from vlcheck import adapter
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.engine import goldens
from vlcheck.numerics import reference
from vlcheck.spec.schema import FamilySpec, Variant

NEW_TOKENS = reference.NEW_TOKENS
SERVED_TIMEOUT_S = 300.0
IN_A_MIXED_BATCH = "in a batch with adapters"
"""The words every mixed-batch problem carries ("... in a batch with adapters a and b"; a declaration's
`findings` may name them)."""


def applies(spec: FamilySpec, variant: Variant, config: Configuration | None = None) -> str | None:
    """vLLM serves adapters only for model classes that declare LoRA support (and on the tower and
    connector only for those its LoRA manager accepts there)."""
    try:
        model_cls = adapter.load_model_class(variant.architecture)
    except Exception:  # noqa: BLE001 - no class to ask: the engine's start will say it
        return None
    if not adapter.class_supports(model_cls, "lora"):
        return f"vLLM's {model_cls.__name__} does not support LoRA (it is not SupportsLoRA)"
    if _on_connector(config) and not adapter.class_supports(model_cls, "tower_connector_lora"):
        return (f"vLLM's {model_cls.__name__} takes no LoRA on its tower or connector (neither the class flag "
                "supports_tower_connector_lora nor a get_num_mm_encoder_tokens of its own; vLLM 0.24.0 then crashes at "
                "engine start with enable_tower_connector_lora, measured on mistral3 and minicpmv, a finding of its own)")
    return None


def _on_connector(config: Configuration | None) -> bool:
    return bool(config is not None and config.engine_args.get("enable_tower_connector_lora"))


def adapter_names(config: Configuration) -> tuple[str, ...]:
    """`lora`: a and b (a batch can mix them); `lora_tower`: c, on the language model and the connector."""
    from vlcheck.checkpoints.lora import ADAPTERS, WITH_CONNECTOR

    return WITH_CONNECTOR if _on_connector(config) else tuple(n for n in ADAPTERS if n not in WITH_CONNECTOR)


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    if handle.weights != "seeded":
        return Measured(not_exercised=f"the adapters are drawn over seeded weights and held to transformers + peft "
                                      f"on them; this engine has {handle.weights} weights")
    from vlcheck.checkpoints import lora

    try:
        adapters = {name: str(lora.adapter_dir(handle.model_dir, variant.architecture, name))
                    for name in adapter_names(config)}
    except ImportError as err:
        return Measured(not_exercised=f"peft is not installed, so no adapter can be made: {err}")
    except lora.NoLanguageModel as err:
        return Measured(not_exercised=f"no language model to put an adapter on: {err}")
    measured = Measured(reference="transformers + peft with the same adapters, and each request alone")
    requests = reference.requests(spec, variant)
    alone, mixed = _vllm_answers(handle, requests, adapters)
    peft_runs = _peft_answers(spec, variant, handle.model_dir, requests, adapters)
    _applied(requests, alone, peft_runs, measured)
    _against_transformers(variant, requests, alone, peft_runs, handle.dtype, measured)
    _mixed_batch(requests, alone, mixed, handle.dtype, measured)
    measured.proof["adapters_loaded"] = sorted(handle.llm.llm_engine.list_loras())
    image = next((i for i, r in enumerate(requests) if r.modality == "image"), None)
    if handle.serve_selected and image is not None:
        first = next(iter(adapters))
        _served(spec, variant, handle, config, adapters, requests[image], first, alone[image][first], measured)
    return measured


def _lora_request(name: str, path: str):
    from vlcheck.checkpoints.lora import ADAPTERS

    return adapter.lora_request(name, ADAPTERS[name], path)  # its seed is its id: 1, 2


def _vllm_answers(handle, requests, adapters: dict[str, str]):
    """(alone, mixed): per request, {adapter or None: answer} asked one at a time, and the answers of
    one batch of [a, b, none]."""
    from vlcheck.engine.runs import greedy

    params = greedy(max_tokens=NEW_TOKENS, logprobs=reference.TOP_K)
    order = [*adapters, None]
    loras = {name: _lora_request(name, path) for name, path in adapters.items()}
    alone, mixed = [], []
    for r in requests:
        one = {"prompt": r.prompt, "multi_modal_data": r.mm_data()}
        alone.append({name: _answer(handle.llm.generate([one], params, use_tqdm=False, lora_request=loras.get(name)))
                      for name in order})
        batch = handle.llm.generate([one] * len(order), params, use_tqdm=False,
                                    lora_request=[loras.get(name) for name in order])
        mixed.append(dict(zip(order, goldens.from_outputs(batch))))
    return alone, mixed


def _answer(outputs) -> dict:
    """goldens' form of one output, with the prompt token ids the engine ran (the served check's key)."""
    answer = goldens.from_outputs(outputs)[0]
    answer["prompt_token_ids"] = list(outputs[0].prompt_token_ids or [])
    return answer


def _peft_answers(spec: FamilySpec, variant: Variant, folder: str, requests, adapters: dict[str, str]):
    """Per request, {adapter or None: transformers' answer} with peft applying the adapter."""
    import peft

    ref = reference.Reference(folder, spec, variant)
    out = [{None: ref.run(r).as_output()} for r in requests]
    names = list(adapters)
    ref.model = peft.PeftModel.from_pretrained(ref.model, adapters[names[0]], adapter_name=names[0])
    for name in names[1:]:
        ref.model.load_adapter(adapters[name], adapter_name=name)
    for name in names:
        ref.model.set_adapter(name)
        for i, r in enumerate(requests):
            out[i][name] = ref.run(r).as_output()
    return out


def _applied(requests, alone, peft_runs, measured: Measured) -> None:
    """Each adapter must move the first step, in transformers (else the recipe shows nothing) and in vLLM."""
    moved: dict[str, dict[str, float]] = {}
    for r, vllm_side, hf_side in zip(requests, alone, peft_runs):
        for name in (n for n in vllm_side if n is not None):
            hf_moved = reference.top_change(hf_side[name]["top_logprobs"][0], hf_side[None]["top_logprobs"][0])
            vllm_moved = reference.top_change(vllm_side[name]["top_logprobs"][0], vllm_side[None]["top_logprobs"][0])
            moved[f"{r.shape} {name}"] = {"transformers": hf_moved, "vllm": vllm_moved}
            if hf_moved < reference.SENSITIVITY_MIN:
                measured.not_exercised = (f"{r.shape}: adapter {name} moves transformers' first step by {hf_moved} "
                                          f"nats only (< {reference.SENSITIVITY_MIN}): it cannot show it applied")
            elif vllm_moved < reference.SENSITIVITY_MIN:
                measured.problems.append(f"{r.shape}: adapter {name} was not applied: vLLM's first-step top-5 logprobs "
                                         f"moved {vllm_moved} nats from the same request without it (transformers + "
                                         f"peft: {hf_moved})")
    measured.proof["moved_nats"] = {k: v["vllm"] for k, v in moved.items()}
    measured.facts["moved_nats"] = moved


def _against_transformers(variant: Variant, requests, alone, peft_runs, dtype: str, measured: Measured) -> None:
    declared = variant.deviation("vllm_reference")
    compared = {}
    for r, vllm_side, hf_side in zip(requests, alone, peft_runs):
        if declared is not None and declared.covers(r.modality):
            compared[r.shape] = f"not compared: vLLM against transformers is a declared deviation ({declared.reason[:120]})"
            continue
        found = []
        for name in (n for n in vllm_side if n is not None):
            found += [f"{r.shape}: adapter {name} against transformers + peft: {p}"
                      for p in reference.disagreement({**hf_side[name], "shape": r.shape},
                                                      {**vllm_side[name], "shape": r.shape}, dtype)]
        compared[r.shape] = found or "match"
        measured.problems += found
    measured.facts["against_transformers"] = compared


def _mixed_batch(requests, alone, mixed, dtype: str, measured: Measured) -> None:
    """A row of the mixed batch must answer as its request alone: by vLLM's rule (a differing token
    in the other's top-5), and in float32 with its first step's top-5 within the first-step
    tolerance (in bfloat16 another batch shape rounds otherwise, as vLLM against transformers is held)."""
    for r, alone_side, batch in zip(requests, alone, mixed):
        for name, got in batch.items():
            want = alone_side[name]
            label = f"adapter {name}" if name is not None else "no adapter"
            found = goldens.logprobs_close([want], [got]) + (_first_step_moved(want, got) if dtype == "float32" else [])
            others = " and ".join(n for n in batch if n is not None)
            measured.problems += [f"{r.shape}: the request with {label} {IN_A_MIXED_BATCH} {others} answered otherwise "
                                  f"than alone: {p}" for p in found]


def _first_step_moved(want: dict, got: dict) -> list[str]:
    """The first step's top-5 logprobs further apart than the float32 first-step tolerance."""
    moved = reference.top_change(want["top_logprobs"][0], got["top_logprobs"][0])
    if moved <= reference.FLOAT32_FIRST_STEP_TOLERANCE:
        return []
    return [f"first-step top-5 logprobs moved {moved} nats (over {reference.FLOAT32_FIRST_STEP_TOLERANCE}): "
            f"{want['top_logprobs'][0]} -> {got['top_logprobs'][0]}"]


def _served(spec: FamilySpec, variant: Variant, handle, config: Configuration, adapters: dict[str, str], request,
            name: str, offline: dict, measured: Measured) -> None:
    """`vllm serve --enable-lora --lora-modules a=PATH b=PATH`, asked for model `name` with the image
    request's chat form, held to the offline answer with that adapter (`offline`)."""
    from vlcheck.configurations.checks import engine_overrides
    from vlcheck.core.results import frames_in_text
    from vlcheck.engine import engine_server as api_server
    from vlcheck.engine.engines import engine_args
    from vlcheck.served.render import NotServable, served_chat_template

    overrides = {k: v for k, v in engine_overrides(config, handle.platform).items()
                 if k not in ("in_process_core", "environment")}
    args, _, local = engine_args(spec, variant, "seeded", platform=handle.platform,
                                 **{**({"dtype": handle.dtype} if handle.dtype != "auto" else {}), **overrides},
                                 lora_modules=[f"{n}={p}" for n, p in adapters.items()])
    try:
        template = served_chat_template(variant, local)
    except NotServable as err:
        measured.facts["served"] = f"not served: {err}"
        return
    try:
        server = api_server.start(handle.platform, args, template)
    except api_server.ServerFailed as err:
        measured.problems.append(f"the API server with --enable-lora did not start: {str(err).splitlines()[0]}")
        measured.frames = frames_in_text(str(err))
        return
    try:
        reply = _ask_adapter(server, variant, request, name)
    finally:
        server.stop()
    if not reply.ok:
        measured.problems.append(f"served: the chat request to adapter {name} was refused ({reply.status}): "
                                 f"{reply.message[:300]}")
        return
    _held_to_offline(reply.body, name, offline, handle.dtype, measured)


def _ask_adapter(server, variant: Variant, request, name: str):
    from vlcheck.prompt.render import default_questions
    from vlcheck.served.client import Client
    from vlcheck.served.requests import chat_messages, data_url

    question = default_questions(variant, request.modality)[0]
    urls = [data_url(request.modality, item) for item in request.items]
    messages = chat_messages(variant, request.modality, question, len(request.items), urls=urls)
    return Client(server.url, name, SERVED_TIMEOUT_S).chat(
        messages, temperature=0.0, max_tokens=NEW_TOKENS, logprobs=True, top_logprobs=reference.TOP_K,
        return_tokens_as_token_ids=True, return_token_ids=True)


def _held_to_offline(body, name: str, offline_a: dict, dtype: str, measured: Measured) -> None:
    """The served answer against the offline one, where both ran the same prompt token ids."""
    from vlcheck.engine.served_answer import as_golden

    served = as_golden(body)
    served_ids = served.pop("prompt_token_ids", None)
    served.pop("text", None)
    offline_ids = offline_a.get("prompt_token_ids")
    offline_a = {k: v for k, v in offline_a.items() if k != "prompt_token_ids"}
    measured.proof["served_prompt_tokens"] = served["prompt_tokens"]
    if served_ids != offline_ids:  # the chat template renders another prompt: the served checks' finding
        differ = (sum(a != b for a, b in zip(served_ids or [], offline_ids or []))
                  + abs(len(served_ids or []) - len(offline_ids or [])))
        measured.facts["served"] = (f"not compared: the server rendered another prompt than the example's "
                                    f"({served['prompt_tokens']} tokens against {offline_a['prompt_tokens']}, {differ} differ)")
        return
    found = goldens.logprobs_close([offline_a], [served])
    found += _first_step_moved(offline_a, served) if dtype == "float32" else []
    measured.facts["served"] = found or "match"
    measured.problems += [f"served: model {name} over HTTP against the offline engine with adapter {name}: {p}"
                          for p in found]
