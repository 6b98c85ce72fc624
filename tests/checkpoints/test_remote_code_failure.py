"""A model whose own remote code does not import on the installed transformers (MiniCPM-V's
modeling_navit_siglip.py on transformers 5.24.0: `transformers.modeling_attn_mask_utils` is gone) has
no buildable checkpoint, said so: never a crash of vlcheck (issue 55, "no error cell on a release
nobody tuned for")."""

import pytest
import transformers

from vlcheck.checkpoints.synthetic import NotBuildable, remote_code_failure
from vlcheck.spec.registry import get_family


def _raised_in(module_name: str, source: str) -> ImportError:
    namespace = {"__name__": module_name}
    with pytest.raises(ImportError) as info:
        exec(compile(source, f"/hf/modules/{module_name.replace('.', '/')}.py", "exec"), namespace)
    return info.value


def test_an_import_that_fails_in_the_models_remote_code_is_not_buildable_naming_the_module():
    err = _raised_in("transformers_modules.openbmb.MiniCPM_V_2_6.abc123.modeling_navit_siglip",
                     "from transformers.no_such_helper_module import AttentionMaskConverter")
    found = remote_code_failure(get_family("minicpmv"), err)
    assert isinstance(found, NotBuildable)
    assert str(found).startswith(f"minicpmv: the model's remote code (modeling_navit_siglip.py) does not import on "
                                 f"transformers {transformers.__version__}: ModuleNotFoundError: No module named "
                                 "'transformers.no_such_helper_module'")


def test_an_import_error_anywhere_else_stays_what_it_was():
    err = _raised_in("vlcheck.checkpoints.somewhere", "import no_such_package_anywhere")
    assert remote_code_failure(get_family("minicpmv"), err) is None
    assert remote_code_failure(get_family("minicpmv"), ValueError("not an import")) is None
