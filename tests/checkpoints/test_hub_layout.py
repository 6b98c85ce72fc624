"""Seeded checkpoints are saved under the Hub checkpoint's tensor names, which vLLM's loader reads."""

import pytest


def test_qwen2_audio_is_saved_in_the_hub_layout():
    """transformers 5.16.1 lists Qwen2-Audio's renaming of `^language_model.model` twice (the model's own,
    then a generic one); reversed on save, both applied and gave `language_model.model.model.*`, which vLLM
    0.24.0 refused (KeyError 'model.layers.0.mlp.gate_up_proj.weight' at engine start)."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "Qwen2AudioForConditionalGeneration"):
        pytest.skip(f"transformers {transformers.__version__} has no Qwen2-Audio")
    from vlcheck.adapter.numerics import hub_layout_tensors

    config = transformers.Qwen2AudioConfig()
    text, audio = config.text_config, config.audio_config
    text.num_hidden_layers, text.hidden_size, text.intermediate_size, text.vocab_size = 1, 64, 64, 128
    text.num_attention_heads, text.num_key_value_heads = 2, 1
    audio.encoder_layers, audio.d_model, audio.encoder_ffn_dim, audio.encoder_attention_heads = 1, 64, 64, 2
    names = set(hub_layout_tensors(transformers.Qwen2AudioForConditionalGeneration._from_config(config)))
    assert {"language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
            "multi_modal_projector.linear.weight", "audio_tower.conv1.weight"} <= names
    assert not [n for n in names if n.startswith("language_model.model.model.")]
