"""The golden rules: an exact repeat on the same environment, measured noise across environments,
and vLLM's check_logprobs_close for two implementations."""

import json

from vlcheck.engine.goldens import (NOISE_TOLERANCE, REPEAT_TOLERANCE, compare_golden, largest_difference, load,
                                 logprobs_close, same_environment, save, tolerance_for, unusable, within_noise)


def output(tokens, tops, prompt_tokens=10):
    return {"prompt_tokens": prompt_tokens, "token_ids": tokens, "top_logprobs": tops}


GOLDEN = [output([5, 7, 9], [{"5": -0.1, "6": -0.2}, {"7": -0.1, "8": -0.3}, {"9": -0.1}])]
TOL = NOISE_TOLERANCE


def shifted(by, position=0, token="5"):
    tops = [dict(t) for t in GOLDEN[0]["top_logprobs"]]
    tops[position][token] = round(tops[position][token] + by, 6)
    return [output(GOLDEN[0]["token_ids"], tops)]


def test_identical_outputs_pass_every_rule():
    assert compare_golden(GOLDEN, GOLDEN, None) == [] == within_noise(GOLDEN, GOLDEN, TOL) == logprobs_close(GOLDEN, GOLDEN)


def test_an_exact_repeat_fails_on_the_least_move_and_says_how_far():
    (problem,) = compare_golden(GOLDEN, shifted(1e-6, position=1, token="8"), None)
    assert problem.startswith("request 0 token 1: not an exact repeat") and "0.000001 nats" in problem


def test_noise_within_the_tolerance_passes_and_beyond_it_fails():
    assert within_noise(GOLDEN, shifted(TOL / 2), TOL) == []
    (problem,) = within_noise(GOLDEN, shifted(3 * TOL, position=2, token="9"), TOL)
    assert problem.startswith(f"request 0 token 2: top-5 logprobs moved beyond {TOL} nats")


def test_a_change_that_keeps_every_token_in_the_top5_fails_beyond_noise():
    # vLLM's rule lets this through (same tokens); the measured-noise rule does not
    moved = [output([5, 7, 9], [{"5": -0.15, "6": -0.2}, {"7": -0.1, "8": -0.3}, {"9": -0.1}])]
    assert logprobs_close(GOLDEN, moved) == []
    assert within_noise(GOLDEN, moved, TOL) and compare_golden(GOLDEN, moved, TOL)


def test_a_near_tie_broken_by_noise_passes_a_clear_winner_swapped_fails():
    tie = [output([5, 7], [{"5": -0.1, "6": -0.1 - TOL}, {"7": -0.1}])]
    swapped = [output([6, 7], [{"6": -0.1 - TOL / 2, "5": -0.1 - TOL / 2 - 1e-4}, {"7": -0.1}])]
    assert within_noise(tie, swapped, TOL) == []
    far = [output([6, 7], [{"6": -0.1, "5": -0.2}, {"7": -0.1}])]
    assert within_noise(GOLDEN, far, TOL)[0].startswith("request 0 token 0: top-5 logprobs moved")


def test_a_token_leaving_the_top_k_only_at_its_edge_is_noise():
    golden = [output([5], [{"5": -0.1, "6": -0.5, "7": -0.9}])]
    edge = [output([5], [{"5": -0.1, "6": -0.5, "8": -0.9 + TOL / 2}])]
    assert within_noise(golden, edge, TOL) == []
    inside = [output([5], [{"5": -0.1, "6": -0.5, "8": -0.7}])]
    assert within_noise(golden, inside, TOL)


def test_vllms_rule_a_token_outside_the_top_logprobs_fails():
    actual = [output([42, 7, 9], [{"42": -0.1, "43": -0.2}, {"7": -0.1}, {"9": -0.1}])]
    assert logprobs_close(GOLDEN, actual) == ["request 0 token 0: generated 42, golden 5, and neither is in the "
                                              "other's top-2 logprobs"]


def test_a_changed_prompt_token_count_or_an_early_stop_fails_every_rule():
    longer = [output([5, 7, 9], GOLDEN[0]["top_logprobs"], prompt_tokens=11)]
    shorter = [output([5, 7], GOLDEN[0]["top_logprobs"][:2])]
    for rule in (lambda g, a: compare_golden(g, a, None), lambda g, a: within_noise(g, a, TOL), logprobs_close):
        assert rule(GOLDEN, longer) == ["request 0: 11 prompt tokens, golden 10"]
        assert rule(GOLDEN, shorter) == ["request 0: 2 tokens generated, golden 3"]
        assert rule(GOLDEN + GOLDEN, GOLDEN) == ["1 outputs, golden has 2"]


def test_nan_logprobs_fail_even_against_a_nan_golden():
    nan = float("nan")
    broken = [output([0, 0, 0], [{"0": nan, "1": nan}, {"0": nan}, {"0": nan}])]
    assert compare_golden(broken, broken, None) == ["request 0: NaN logprobs: the forward pass produced no usable logits"]
    assert logprobs_close(GOLDEN, broken) == within_noise(broken, broken, TOL) == compare_golden(broken, broken, None)
    assert unusable(GOLDEN) == []


def test_largest_difference_stops_at_the_first_differing_token():
    diverged = [output([5, 8, 9], [{"5": -0.1005, "6": -0.2}, {"7": -0.1, "8": -0.3}, {"9": -9.0}])]
    assert largest_difference(GOLDEN, diverged) == 0.0005


def test_goldens_keep_where_they_were_recorded_and_old_ones_still_load(tmp_path):
    here = {"vllm": "0.24.0", "torch": "2.11.0", "gpu": "NVIDIA H200", "dtype": "float32"}
    save(tmp_path / "new.json", {"image x1": GOLDEN}, here)
    recorded_on, outputs, _, _ = load(tmp_path / "new.json")
    assert outputs == {"image x1": GOLDEN} and same_environment(recorded_on, here)
    assert not same_environment(recorded_on, {**here, "vllm": "0.32.0"})
    (tmp_path / "old.json").write_text(json.dumps({"image x1": GOLDEN}))
    assert load(tmp_path / "old.json")[:2] == (None, {"image x1": GOLDEN}) and not same_environment(None, here)
    assert load(tmp_path / "absent.json") is None
    assert tolerance_for(recorded_on, here) == REPEAT_TOLERANCE < tolerance_for(None, here) == NOISE_TOLERANCE


def test_a_golden_made_on_another_checkpoint_says_so_and_the_rule_ignores_the_fingerprint(tmp_path):
    from vlcheck.engine import goldens as g

    (tmp_path / "config.json").write_text('{"vocab_size": 2048}')
    (tmp_path / "model.safetensors").write_bytes(b"\x02\0\0\0\0\0\0\0{}" + b"\1" * 64)
    before = g.checkpoint_fingerprint(tmp_path)
    assert g.checkpoint_fingerprint(tmp_path) == before  # a folder is its content
    (tmp_path / "config.json").write_text('{"vocab_size": 896}')  # ovis's builder change, as it happened
    after = g.checkpoint_fingerprint(tmp_path)
    assert after != before
    env = {"vllm": "0.24.0", "torch": "2.11.0", "gpu": "H200", "dtype": "float32"}
    recorded, now = {**env, "checkpoint": before}, {**env, "checkpoint": after}
    assert g.same_environment(recorded, now)  # the tolerance is the environment's, not the checkpoint's
    assert before in g.other_checkpoint(recorded, now) and after in g.other_checkpoint(recorded, now)
    assert g.other_checkpoint({**env, "checkpoint": after}, now) is None
    assert "does not say which checkpoint" in g.other_checkpoint(env, now)
    assert g.other_checkpoint(recorded, env) is None  # nothing known about this run's checkpoint


def test_a_checkpoint_under_a_cache_folder_is_fingerprinted_by_its_files_not_the_hubs_bookkeeping(tmp_path):
    from vlcheck.engine import goldens as g

    checkpoint = tmp_path / ".cache" / "vlcheck" / "checkpoints" / "aria-0"  # the default cache's place
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text('{"vocab_size": 2048}')
    nothing = g.checkpoint_fingerprint(tmp_path / "empty")
    with_config = g.checkpoint_fingerprint(checkpoint)
    assert with_config != nothing
    (checkpoint / ".cache").mkdir()
    (checkpoint / ".cache" / "download.lock").write_text("x")
    assert g.checkpoint_fingerprint(checkpoint) == with_config


def test_the_same_tokens_detokenized_otherwise_fail_every_rule_and_an_old_golden_without_text_passes():
    with_text = [{**GOLDEN[0], "text": "a b"}]
    other_text = [{**GOLDEN[0], "text": "ab"}]
    for rule in (lambda g, a: compare_golden(g, a, None), lambda g, a: within_noise(g, a, TOL), logprobs_close):
        (problem,) = rule(with_text, other_text)
        assert "detokenized to 'ab', golden 'a b'" in problem
        assert rule(GOLDEN, other_text) == [] == rule(with_text, with_text)
