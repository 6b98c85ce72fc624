"""The layer-pattern synthetic checkpoint (`checkpoint_dir(..., layer_pattern=True)`) that the `long`
configuration serves: per family-config whose text model mixes windowed and full-attention layers,
the saved config keeps one period of the real pattern (Gemma 3: 5 sliding + 1 full), every
per-layer list at that depth, and a window shorter than the configuration's prompt text. No engine."""

import pytest

from vlcheck.checkpoints.synthetic import (FULL_ATTENTION, LAYER_INDEX_KEYS, LOCAL_ATTENTION, PATTERN_WINDOW,
                                           LayerPattern, NotBuildable, attention_pattern, checkpoint_dir,
                                           layer_pattern_of)


def gemma3_like(layers: int = 26) -> LayerPattern:
    kinds = tuple(FULL_ATTENTION if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers))
    return LayerPattern("Gemma3TextConfig", "text_config", {"layer_types": kinds}, "sliding_attention")


def test_one_period_holds_both_kinds():
    pattern = gemma3_like()
    assert (pattern.depth, pattern.summary()) == (6, "5 sliding + 1 full")
    assert pattern.summary(12) == "10 sliding + 2 full"
    full_first = LayerPattern("X", "", {"layer_types": (FULL_ATTENTION, "chunked_attention") * 3}, "chunked_attention")
    assert (full_first.depth, full_first.summary(), full_first.window_key) == (2, "1 chunked + 1 full",
                                                                               "attention_chunk_size")


def pattern_or_skip(family, variant) -> LayerPattern:
    try:
        found = layer_pattern_of(family, variant)
    except NotBuildable as err:  # e.g. the model's remote code is not in the HF cache
        pytest.skip(f"no synthetic checkpoint: {err}")
    except ImportError as err:
        pytest.skip(f"{family.name}: its config needs a package that is not installed: {str(err).strip()[:200]}")
    if isinstance(found, str):
        pytest.skip(f"{family.name}: {found}")
    return found


def test_layer_pattern_checkpoint_keeps_the_real_pattern(family, variant):
    from vlcheck.adapter.numerics import hf_config
    from vlcheck.configurations.long_prompts import long_question

    pattern = pattern_or_skip(family, variant)
    folder = checkpoint_dir(family, variant, layer_pattern=True)
    assert folder != checkpoint_dir(family, variant), "the layer-pattern build must be a checkpoint of its own"
    saved = attention_pattern(hf_config(folder))
    assert saved is not None and saved.holder == pattern.holder, f"{folder}: no mixed layer pattern saved"
    text = hf_config(folder).get_text_config()
    depth = text.num_hidden_layers
    kinds = list(text.layer_types)
    assert kinds == list(pattern.layer_types[:depth]) and depth == pattern.depth, (kinds, pattern.summary())
    assert FULL_ATTENTION in kinds and any(k in LOCAL_ATTENTION for k in kinds), kinds
    for key, value in vars(text).items():  # intermediate_size, activation_sparsity_pattern, no_rope_layers, ...
        if isinstance(value, list) and key in LAYER_INDEX_KEYS:
            assert all(i < depth for i in value), f"{key} = {value}: layer indices past the depth {depth}"
        elif isinstance(value, list):
            assert len(value) == depth, f"{key} has {len(value)} entries for {depth} layers: {value}"
    period = getattr(text, "sliding_window_pattern", None) or getattr(text, "_sliding_window_pattern", None)
    if isinstance(period, int):  # written beside layer_types (Gemma 3): must say the same
        assert kinds == [FULL_ATTENTION if (i + 1) % period == 0 else kinds[0] for i in range(depth)], (period, kinds)
    window = getattr(text, saved.window_key)
    assert window == PATTERN_WINDOW[saved.local_kind]
    tokenizer = _tokenizer(folder)
    question_tokens = len(tokenizer(long_question(variant, variant.primary_modality, tokenizer, window),
                                    add_special_tokens=False)["input_ids"])
    assert question_tokens > window, f"the long prompt's text has {question_tokens} tokens, the window {window}"


def _tokenizer(folder):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder)
