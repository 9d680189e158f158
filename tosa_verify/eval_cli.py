"""``tosa-verify eval``: kept at its old path; the verb lives in :mod:`tosa_verify.app.eval_cli`,
its arguments in :mod:`tosa_verify.app.args`.

>>> import argparse
>>> p = argparse.ArgumentParser(); add_eval_arguments(p)
>>> p.parse_args(["--min-top1-agreement", "99%"]).min_top1_agreement
0.99
"""

from __future__ import annotations

from .app.args import EVAL_DESCRIPTION, add_eval_arguments
from .app.eval_cli import EXIT_FAIL, EXIT_OK, eval_main

__all__ = ["EVAL_DESCRIPTION", "EXIT_FAIL", "EXIT_OK", "add_eval_arguments", "eval_main"]
