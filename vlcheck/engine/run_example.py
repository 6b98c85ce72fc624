"""`vlcheck run FAMILY`: what vLLM's example script does for a family, done correctly.

Same flags as `vision_language.py`. The differences: cache verification resends with
`{"image": [None]}` (the form vLLM 0.24.0 honours; the example's `None` is silently dropped)
and reports hits from vLLM's counters, not from matching outputs; the repeat simulation sends no
uuids (the example's uuid_i per request defeats the cache); offline, it runs on the family's
synthetic checkpoint.
"""

from __future__ import annotations

import argparse
import time

from vlcheck.core import media
from vlcheck.engine.engines import WEIGHTS, WEIGHTS_HELP, EngineCache, EngineUnavailable, cache_counters
from vlcheck.prompt.render import pick_variant
from vlcheck.prompt.requests import build, example_prompts
from vlcheck.spec.registry import get_family


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("family", help="the family to run (`vlcheck list` names them)")
    p.add_argument("--modality", choices=["image", "video"], default="image",
                   help="the media each request carries (default: image)")
    p.add_argument("--images", type=int, metavar="N", help="use the multi-image example with N images")
    p.add_argument("--num-prompts", type=int, default=4, metavar="N", help="how many requests to send (default: 4)")
    p.add_argument("--num-frames", type=int, default=16, metavar="N",
                   help="frames of the test video with --modality video (default: 16)")
    p.add_argument("--seed", type=int, default=None,
                   help="the engine's seed, and the seed of --image-repeat-prob's draws (default: the engine's 0)")
    p.add_argument("--image-repeat-prob", type=float, default=None, metavar="P",
                   help="simulate repeated media: each request after the first repeats the image with probability P, "
                        "else sends a one-pixel-changed copy (without uuids, so the processor cache hits by content)")
    p.add_argument("--disable-mm-processor-cache", action="store_true",
                   help="start the engine with the multimodal processor cache off (mm_processor_cache_gb=0)")
    p.add_argument("--time-generate", action="store_true", help="print the wall time of the generate call")
    p.add_argument("--use-different-prompt-per-request", action="store_true",
                   help="cycle through the example's questions instead of repeating the first")
    p.add_argument("--verify-mm-cache-hit-with-uuids", action="store_true",
                   help="send each item with a uuid, then resend the requests with empty media and the same uuids: "
                        "VERIFIED (exit 0) when every item hits vLLM's cache and prompt token counts are unchanged")
    p.add_argument("--weights", choices=WEIGHTS, default="auto", help=WEIGHTS_HELP)


def _stop_ids(variant, llm, weights: str) -> list[int] | None:
    ids = list(variant.stop_token_ids or ()) if weights == "real" else []  # literal ids mean nothing synthetic
    tokenizer = llm.get_tokenizer()
    for token in variant.stop_tokens or ():
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id is not None and token_id != tokenizer.unk_token_id:
            ids.append(token_id)
    if variant.stop_eos_token and tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return ids or None


def main(args: argparse.Namespace) -> int:
    from vllm import SamplingParams

    spec = get_family(args.family)
    variant = pick_variant(spec, args.modality, args.images)
    count = args.images or 1
    overrides = {"mm_processor_cache_gb": 0} if args.disable_mm_processor_cache else {}
    if args.seed is not None:
        overrides["seed"] = args.seed
    engines = EngineCache()
    try:
        handle = engines.get(spec, variant, args.weights, **overrides)
    except EngineUnavailable as err:
        print(f"vlcheck run: {err}")
        return 2 if err.skip else 1
    try:
        llm = handle.llm
        print(f"{spec.name} [{variant.kind}] on {handle.weights} weights ({handle.model_dir}); "
              f"engine started in {handle.start_seconds:.1f} s")
        prompts = example_prompts(spec, variant, args.modality, count)
        if args.modality == "video":
            clip = media.video(0, frames=args.num_frames)
            item = (clip, media.video_metadata(len(clip))) if variant.modalities["video"].video_metadata else clip
        else:
            item = media.image(0) if count == 1 else [media.image(i) for i in range(count)]
        # The example names every request's item uuid_i, even a repeated image: the cache, keyed
        # by uuid alone, then never sees a repeat. Without uuids vLLM hashes the content, so the
        # --image-repeat-prob simulation gets its hits; uuids are only sent to verify by them.
        requests = build(prompts, args.modality, item, args.num_prompts, args.use_different_prompt_per_request,
                         args.image_repeat_prob, args.seed or 0, with_uuids=args.verify_mm_cache_hit_with_uuids)
        if variant.sampling:
            sampling = SamplingParams(**variant.sampling)
        else:
            sampling = SamplingParams(temperature=0.2, max_tokens=64, stop_token_ids=_stop_ids(variant, llm, handle.weights))
        lora = None
        if variant.lora and handle.weights == "real":
            from vlcheck.adapter import lora_request

            lora = [lora_request(variant.lora.name, variant.lora.id,
                                 variant.lora.path(handle.model_dir))] * args.num_prompts
        elif variant.lora:
            print(f"note: the example's LoRA {variant.lora.name!r} needs the real snapshot; not applied")

        before = cache_counters(llm)
        start = time.perf_counter()
        outputs = llm.generate(requests.inputs, sampling, lora_request=lora, use_tqdm=False)
        elapsed = time.perf_counter() - start
        after = cache_counters(llm)
        for o in outputs:
            print("-" * 50)
            print(f"[{len(o.prompt_token_ids)} prompt tokens] {o.outputs[0].text!r}")
        print("-" * 50)
        if args.time_generate:
            print(f"-- generate time = {elapsed:.3f} s")
        print(f"mm cache: {after['queries'] - before['queries']:.0f} queries, {after['hits'] - before['hits']:.0f} hits "
              f"({requests.distinct_items} distinct item(s) in {args.num_prompts} requests)")

        if args.verify_mm_cache_hit_with_uuids:
            first_counts = [len(o.prompt_token_ids) for o in outputs]
            before = cache_counters(llm)
            resent = llm.generate(requests.resend, sampling, lora_request=lora, use_tqdm=False)
            after = cache_counters(llm)
            hits = after["hits"] - before["hits"]
            counts = [len(o.prompt_token_ids) for o in resent]
            ok = hits == args.num_prompts * count and counts == first_counts
            print(f"verify: resent {args.num_prompts} request(s) with empty media ([None]) and the same uuids: "
                  f"{hits:.0f} cache hits of {after['queries'] - before['queries']:.0f} queries; prompt tokens "
                  f"{'identical' if counts == first_counts else f'{first_counts} -> {counts}'}: "
                  f"{'VERIFIED' if ok else 'NOT VERIFIED'}")
            if args.disable_mm_processor_cache:
                print("note: with the processor cache disabled there is nothing to hit; empty media cannot be served")
            return 0 if ok else 1
        return 0
    finally:
        engines.close()
