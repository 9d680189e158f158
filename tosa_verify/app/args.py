"""The command line's arguments for the verbs that reach into ``lowering`` (check, lower, eval).

Kept apart from the verbs themselves, which import ``lowering`` (and torch) at module level:
``tosa-verify --help`` builds every sub-parser and must not pay for torch (see
``docs/ARCHITECTURE.md``, start-up speed). The standard library and the core only.

>>> p = argparse.ArgumentParser(); add_check_arguments(p)
>>> p.parse_args(["lowering.zoo:mlp", "--min-sqnr", "25"]).min_sqnr
25.0
"""

from __future__ import annotations

import argparse
import math

from ..evaluate import METRICS

DEFAULT_TARGET = "ethos-u55-128"
VGF_TARGET = "vgf"

#: ``tosa-verify eval --help``: the description of the verb.
EVAL_DESCRIPTION = """``tosa-verify eval [MODEL] [--data DATA.npz|DIR] [--labels ...]``: a lowered model over a data set.

MODEL is resolved as ``tosa-verify check`` resolves it (``path/file.py:factory``,
``package.module:factory`` or a built-in model of ``lowering.zoo``; default: the digits CNN). The
model is lowered with a batch-1 example input (the factory's first example row), so each row of
the data set is one input. Without ``--data`` the digits CNN is evaluated on its held-out set
(scikit-learn's digits, the 450 images it was not trained on, with their labels).

Exit codes: 0 done and every gate passes, 1 a gate failed (``--min-top1-agreement``), 2 an error."""


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``check`` verb's arguments to ``parser``.

    >>> p = argparse.ArgumentParser(); add_check_arguments(p)
    >>> p.parse_args([]).target is None
    True
    """
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="path/file.py:factory, package.module:factory or a built-in model name "
                             "(lowering.zoo: digits_cnn, mobilenet_v2, ...); default: digits_cnn")
    parser.add_argument("--profile", choices=("INT", "FP"), default="INT", type=str.upper,
                        help="TOSA profile to lower to (default INT: int8 PT2E quantization)")
    add_quantization_arguments(parser)
    add_threads_argument(parser)
    parser.add_argument("--target", action="append", default=None, metavar="TARGET",
                        help=f"Ethos-U target for Vela, repeatable (default {DEFAULT_TARGET}), or vgf: "
                             "compile to VGF and run it on a Vulkan device (INT and FP), gated on "
                             "agreement with the interpreter")
    parser.add_argument("--no-vela", action="store_true", help="skip the Vela compile step")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="a model split around CPU nodes passes the 'fully lowered' gate (each TOSA "
                             "partition is still validated, cross-checked and compiled)")
    parser.add_argument("--golden", metavar="DIR", help="golden store to compare against")
    parser.add_argument("--update-golden", action="store_true",
                        help="record (or replace) the golden in --golden instead of comparing")
    parser.add_argument("--case", metavar="NAME",
                        help="golden case name (default: the model file's stem and the factory, "
                             "e.g. my_model.build; a built-in model's name); stored as NAME/PROFILE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the golden's inputs (default 0)")
    parser.add_argument("--report", metavar="PATH.html", help="write the HTML report here")
    parser.add_argument("--json", metavar="PATH.json", help="write the machine-readable results here")
    parser.add_argument("--min-sqnr", type=float, metavar="DB",
                        help="gate: every graph output's SQNR vs the float model is at least DB")
    parser.add_argument("--max-lsb", type=float, metavar="N",
                        help="gate: every graph output differs from the fake-quant model by at most N "
                             "quantization steps")
    parser.add_argument("--max-cycles-increase", type=_percent, metavar="PCT",
                        help="gate (with --golden): Vela cycles may grow by at most PCT percent "
                             "(default 5)")
    parser.add_argument("--rounding-travel", type=int, default=8, metavar="N",
                        help="re-run the graph downstream for the N RESCALE/TABLE ops whose other "
                             "rounding changes most elements (default 8; -1: all)")


def add_quantization_arguments(parser: argparse.ArgumentParser) -> None:
    """The INT-profile quantization options shared by ``check`` and ``lower``.

    >>> p = argparse.ArgumentParser(); add_quantization_arguments(p)
    >>> p.parse_args(["--activations", "int16"]).activations
    'int16'
    """
    parser.add_argument("--activations", choices=("int8", "int16"), default="int8",
                        help="INT profile: activation dtype (int16 activations use int8 weights; "
                             "default int8)")
    parser.add_argument("--observer", choices=("histogram", "minmax"), default="histogram",
                        help="INT profile: calibration of activation ranges, histogram (L2-optimal "
                             "range, default) or minmax (observed extremes, never clips)")
    parser.add_argument("--per-tensor-weights", action="store_true",
                        help="INT profile: one weight scale per tensor instead of per output channel")
    parser.add_argument("--exact-int16-lookups", action="store_true",
                        help="int16 activations: a function whose 513-entry TABLE would be more than "
                             "2 steps off somewhere in range (1/x, rsqrt, log near 0...) becomes an "
                             "exact 65536-entry GATHER; Ethos-U85 only (Vela refuses GATHER for U55/U65)")


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: torch's intra-op threads (shared by ``check`` and ``lower``).

    >>> p = argparse.ArgumentParser(); add_threads_argument(p)
    >>> p.parse_args(["--threads", "2"]).threads
    2
    """
    parser.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                        help="torch intra-op threads while lowering and analysing (default: "
                             "$TOSA_VERIFY_THREADS, else half the cores; 1 on a 2-core machine, "
                             "where a second thread collapses under load)")


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return int(text)


def _percent(text: str) -> float:
    value = float(text.strip().rstrip("%"))
    if value < 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}")
    return value


def _fraction(text: str) -> float:
    """``0.99``, ``99%`` -> 0.99."""
    t = text.strip()
    try:
        value = float(t.rstrip("%")) / (100 if t.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction or percentage: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"agreement must lie in [0, 1] (or 0-100 %), got {text!r}")
    return value


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``eval`` verb's arguments to ``parser``.

    >>> p = argparse.ArgumentParser(); add_eval_arguments(p)
    >>> p.parse_args(["--executor", "ray"]).executor
    'ray'
    """
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="path/file.py:factory, package.module:factory or a built-in model name; "
                             "default: digits_cnn")
    parser.add_argument("--data", metavar="DATA.npz|DIR",
                        help="inputs: .npz (array x, labels y if present), .npy, or a directory of .npy files "
                             "(one input each); default for digits_cnn: its 450 held-out images")
    parser.add_argument("--labels", metavar="FILE", help="labels (.npy or one integer per line)")
    parser.add_argument("--profile", choices=("INT", "FP"), default="INT", type=str.upper)
    add_quantization_arguments(parser)
    parser.add_argument("--limit", type=int, metavar="N", help="evaluate the first N inputs only")
    parser.add_argument("--batch-size", type=int, default=32, metavar="B", help="inputs per batched run (default 32)")
    parser.add_argument("--workers", type=int, metavar="N", help="processes (default: every core)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local processes (default) or Ray tasks (pip install 'tosa-verify[ray]')")
    parser.add_argument("--ray-address", metavar="ADDR", help="Ray cluster address (default: start a local instance)")
    parser.add_argument("--metrics", default=",".join(METRICS), metavar="LIST",
                        help=f"comma-separated subset of {','.join(METRICS)} (default: all)")
    parser.add_argument("--layer-samples", type=int, default=32, metavar="N",
                        help="per-layer SQNR over N evenly spaced inputs (default 32; 0: all)")
    parser.add_argument("--json", metavar="PATH.json", help="write the results as JSON")
    parser.add_argument("--report", metavar="PATH.html", help="write the HTML report")
    parser.add_argument("--min-top1-agreement", type=_fraction, metavar="FRACTION",
                        help="gate: TOSA top-1 agrees with float on at least this fraction (0.99 or 99%%)")


