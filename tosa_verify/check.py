"""``tosa-verify check``: kept at its old path; the code lives in :mod:`tosa_verify.app`.

The check is application layer (it joins ``lowering``, ``ethosu``, ``vgf`` and ``golden``):
:mod:`tosa_verify.app.check` runs it, :mod:`tosa_verify.app.models` loads the model,
:mod:`tosa_verify.app.args` holds its arguments. ``python -m tosa_verify.check`` still runs it.

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="tosa-verify check")
>>> add_check_arguments(parser)
>>> args = parser.parse_args(["lowering.zoo:mlp", "--min-sqnr", "25"])
>>> check_main(args)          # doctest: +SKIP
0
"""

from __future__ import annotations

import sys

from .app.args import (
    DEFAULT_TARGET,
    VGF_TARGET,
    add_check_arguments,
    add_quantization_arguments,
    add_threads_argument,
)
from .app.check import EXIT_ERROR, EXIT_FAIL, EXIT_OK, check_main, main
from .app.models import (
    STEPS,
    CheckError,
    LoadedModel,
    _quiet,
    load_model,
    lowered_operator_text,
    model_name,
    quant_config_from_args,
)

__all__ = [
    "DEFAULT_TARGET",
    "EXIT_ERROR",
    "EXIT_FAIL",
    "EXIT_OK",
    "STEPS",
    "VGF_TARGET",
    "CheckError",
    "LoadedModel",
    "_quiet",
    "add_check_arguments",
    "add_quantization_arguments",
    "add_threads_argument",
    "check_main",
    "load_model",
    "lowered_operator_text",
    "main",
    "model_name",
    "quant_config_from_args",
]

if __name__ == "__main__":
    sys.exit(main())
