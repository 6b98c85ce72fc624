"""How a case's two CPU outcomes (processor cache on and off) become one."""

from vlcheck.hostile.inputs import Outcome, both_paths


def test_the_same_outcome_on_both_paths_is_reported_once():
    same = Outcome("1x1 image", "handled", "43 prompt tokens, item tokens [9]")
    assert both_paths(same, same) == same


def test_the_same_error_wrapped_on_one_path_only_is_no_difference():
    served = Outcome("truncated JPEG", "rejected", "OSError: image file is truncated")
    uncached = Outcome("truncated JPEG", "rejected", "ValueError <- OSError: image file is truncated")
    assert both_paths(served, uncached) == served


def test_differing_outcomes_name_both_and_take_the_worse_kind():
    served = Outcome("own placeholder in question", "handled", "99 prompt tokens, item tokens [64]")
    uncached = Outcome("own placeholder in question", "broken", "ValueError <- StopIteration: ")
    combined = both_paths(served, uncached)
    assert combined.kind == "broken"
    assert combined.how == ("processor cache on: handled: 99 prompt tokens, item tokens [64] | "
                            "cache off: broken: ValueError <- StopIteration: ")
    assert both_paths(uncached, served).kind == "broken"
    assert both_paths(Outcome("c", "handled", "1"), Outcome("c", "rejected", "E")).kind == "rejected"
