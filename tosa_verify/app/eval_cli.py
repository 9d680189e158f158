"""``tosa-verify eval``: a lowered model over a data set (the verb; its arguments are in
:mod:`tosa_verify.app.args`, its description is ``EVAL_DESCRIPTION`` there).

>>> eval_main(parser.parse_args([]))   # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

import lowering
from lowering import zoo

from ..evaluate import EvalError, evaluate, load_dataset
from ..report import Gate, write_eval_html, write_eval_json
from .models import CheckError, _quiet, load_model, quant_config_from_args

EXIT_OK, EXIT_FAIL = 0, 1


def _batch1(example: tuple[Any, ...]) -> tuple[Any, ...]:
    """The factory's example with every tensor cut to its first row (batch 1)."""
    return tuple(x[:1] if isinstance(x, torch.Tensor) and x.dim() > 0 else x for x in example)


def eval_main(args: argparse.Namespace) -> int:
    """Run ``tosa-verify eval``; return the exit code (errors raise TosaError subclasses).

    >>> eval_main(parser.parse_args([]))   # doctest: +SKIP
    0
    """
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if args.data is None and args.model not in (None, "digits_cnn"):
        raise EvalError(f"model {args.model!r} has no built-in data set: give --data DATA.npz|DIR")
    stderr = sys.stderr
    with _quiet():
        try:
            model = load_model(args.model)
        except CheckError as exc:
            raise EvalError(str(exc)) from None
        if args.data is None:
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

