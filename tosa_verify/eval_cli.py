"""``tosa-verify eval [MODEL] [--data DATA.npz|DIR] [--labels ...]``: a lowered model over a data set.

MODEL is resolved as ``tosa-verify check`` resolves it (``path/file.py:factory``,
``package.module:factory`` or a built-in model of ``lowering.zoo``; default: the digits CNN). The
model is lowered with a batch-1 example input (the factory's first example row), so each row of
the data set is one input. Without ``--data`` the digits CNN is evaluated on its held-out set
(scikit-learn's digits, the 450 images it was not trained on, with their labels).

Exit codes: 0 done and every gate passes, 1 a gate failed (``--min-top1-agreement``), 2 an error.

>>> import argparse
>>> p = argparse.ArgumentParser(); add_eval_arguments(p)
>>> p.parse_args(["--min-top1-agreement", "99%"]).min_top1_agreement
0.99
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .evaluate import METRICS, EvalError, evaluate, load_dataset, write_eval_html, write_eval_json
from .report import Gate

EXIT_OK, EXIT_FAIL = 0, 1


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
    from .check import add_quantization_arguments

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


def _batch1(example: tuple[Any, ...]) -> tuple[Any, ...]:
    """The factory's example with every tensor cut to its first row (batch 1)."""
    import torch

    return tuple(x[:1] if isinstance(x, torch.Tensor) and x.dim() > 0 else x for x in example)


def eval_main(args: argparse.Namespace) -> int:
    """Run ``tosa-verify eval``; return the exit code (errors raise TosaError subclasses).

    >>> eval_main(parser.parse_args([]))   # doctest: +SKIP
    0
    """
    from .check import CheckError, _quiet, load_model, quant_config_from_args

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if args.data is None and args.model not in (None, "digits_cnn"):
        raise EvalError(f"model {args.model!r} has no built-in data set: give --data DATA.npz|DIR")
    stderr = sys.stderr
    with _quiet():
        try:
            model = load_model(args.model)
        except CheckError as exc:
            raise EvalError(str(exc)) from None
        import lowering

        if args.data is None:
            from lowering import zoo

            _, _, x_test, y_test = zoo.digits_data()
            data, labels = [x_test.numpy()], y_test.numpy()
            source = "digits held-out set (scikit-learn load_digits, 25 % split, seed 0)"
        else:
            data, labels = load_dataset(args.data, args.labels)
            source = args.data
        if args.limit is not None:
            data = [a[:args.limit] for a in data]
            labels = labels[:args.limit] if labels is not None else None
        stderr.write(f"lowering {model.name} ({args.profile}, batch 1) ...\n")
        try:
            lowered = lowering.lower(model.module.eval(), _batch1(model.example_inputs), profile=args.profile,
                                     quantization=quant_config_from_args(args), calibration=model.calibration)
        except lowering.LoweringError as exc:
            raise EvalError(f"lowering failed: {exc}") from None
        report = evaluate(lowered, data, labels=labels, metrics=metrics, batch_size=args.batch_size,
                          workers=args.workers, executor=args.executor, ray_address=args.ray_address,
                          layer_samples=args.layer_samples, progress=stderr)
    gates = []
    if args.min_top1_agreement is not None:
        got = report.top1_agreement
        gates.append(Gate("min-top1-agreement", got is not None and got >= args.min_top1_agreement,
                          f"TOSA vs float top-1 agreement {'-' if got is None else f'{100 * got:.2f} %'} "
                          f"(gate >= {100 * args.min_top1_agreement:.2f} %)"))
    meta = {"model": model.source, "profile": args.profile, "data": source, "inputs": report.n}
    print(report.format_summary())
    for g in gates:
        print(f"gate {g.name}: {g.status} ({g.detail})")
    if args.json:
        write_eval_json(args.json, report, {"meta": meta, "gates": [vars(g) for g in gates],
                                            "passed": all(g.passed for g in gates)})
    if args.report:
        path = write_eval_html(args.report, report, title=f"tosa-verify eval: {model.name} ({args.profile})",
                               meta=meta, gates=gates)
        stderr.write(f"wrote {path}\n")
    return EXIT_FAIL if any(not g.passed for g in gates) else EXIT_OK

