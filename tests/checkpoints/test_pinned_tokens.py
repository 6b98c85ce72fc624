"""Synthetic tokenizers whose processor hard-codes the real tokenizer's ids (`token_positions`):
the pinned tokens sit at their ids, and the ids below them are vocabulary fillers, not added tokens."""

import pytest

from vlcheck.checkpoints.synthetic import NotBuildable, make_tokenizer


def test_pinned_tokens_sit_at_their_ids_above_vocabulary_fillers():
    fast = make_tokenizer(["<|user|>"], {}, pinned={"<|image|>": 2000, "<|x|>": 2003})
    assert fast.convert_tokens_to_ids(["<|image|>", "<|x|>"]) == [2000, 2003]
    ids = fast("<|image|> a cat <|x|>").input_ids
    assert ids[0] == 2000 and ids[-1] == 2003  # matched as special tokens, not split by the BPE
    added = fast.get_added_vocab()
    # 30,000 fillers as added tokens (phi3_v) made every load deep-copy them: 5.9 s a processor
    assert not [t for t in added if "filler" in t], len(added)
    assert added["<|user|>"] == 2004  # the family's other specials follow the pinned ids, as before
    assert fast.convert_ids_to_tokens(2001).startswith("<|vlcheck_filler_")
    assert all(2000 not in fast(text).input_ids for text in ("<|vlcheck_filler_2001|>", "image", "<| image |>"))


def test_a_pin_below_the_trained_vocabulary_is_refused():
    with pytest.raises(NotBuildable, match="cannot be pinned at id 5"):
        make_tokenizer([], {}, pinned={"<|image|>": 5})
