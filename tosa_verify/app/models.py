"""What the verbs that take a PyTorch model share: loading the model, its quantization options,
quiet steps with progress lines.

MODEL is ``path/file.py:factory``, ``package.module:factory`` or the name of a built-in model of
``lowering.zoo``; the factory returns ``(module, example_inputs)`` or ``(module, example_inputs,
calibration)``.

>>> load_model("lowering.zoo:mlp").name
'mlp'
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lowering
from lowering import zoo
from lowering.torchvision_compat import retry_on_cpu_torchvision

from ..graph import load
from ..profiles import op_histogram, operator_count_text

STEPS = (
    "quantize and lower",
    "validate (interpreter)",
    "interpreter vs reference model",
    "drift vs float",
    "Vela compile",
    "golden compare",
    "report",
)


class CheckError(Exception):
    """An error that ends the check with exit code 2 (one-line message)."""


@dataclass
class LoadedModel:
    """What a model factory returned, plus a name for goldens and reports."""

    name: str
    module: Any
    example_inputs: tuple[Any, ...]
    calibration: Any = None
    source: str = ""


def lowered_operator_text(lowered: Any) -> str:
    """``"12 TOSA operators (+30 CONST/CONST_SHAPE)"`` over every TOSA graph of a lowered model:
    the counts ``tosa-verify info`` prints for the same graphs.

    >>> lowered_operator_text(lowering.lower(*zoo.mlp()[:2]))   # doctest: +SKIP
    '12 TOSA operators (+30 CONST/CONST_SHAPE)'
    """
    graphs = [lowered.tosa] if lowered.tosa is not None else [p.tosa for p in lowered.partitions]
    return operator_count_text(sum((op_histogram(load(g)) for g in graphs if g is not None), Counter()),
                               "TOSA operators")


def quant_config_from_args(args: argparse.Namespace):
    """The ``lowering.QuantConfig`` the quantization options ask for (None for the FP profile).

    >>> p = argparse.ArgumentParser(); add_quantization_arguments(p)
    >>> ns = p.parse_args(["--activations", "int16", "--observer", "minmax"]); ns.profile = "INT"
    >>> cfg = quant_config_from_args(ns); str(cfg.activation_dtype), cfg.activation_observer
    ('torch.int16', 'minmax')
    """
    if getattr(args, "profile", "INT").upper() != "INT":
        return None
    per_channel = not args.per_tensor_weights
    if args.activations == "int16":
        return lowering.QuantConfig.int16(per_channel=per_channel, activation_observer=args.observer,
                                          exact_lookups=getattr(args, "exact_int16_lookups", False))
    if getattr(args, "exact_int16_lookups", False):
        raise CheckError("--exact-int16-lookups needs --activations int16")
    return lowering.QuantConfig(per_channel=per_channel, activation_observer=args.observer)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_model(spec: str | None) -> LoadedModel:
    """Import a model factory and call it. Raises :class:`CheckError` with a one-line message.

    >>> load_model("lowering.zoo:mlp").name
    'mlp'
    >>> load_model("nowhere/missing.py:build")
    Traceback (most recent call last):
    ...
    tosa_verify.app.models.CheckError: cannot import model 'nowhere/missing.py:build': no such file nowhere/missing.py
    """
    if spec is None or (":" not in spec and not spec.endswith(".py")):
        name = spec or "digits_cnn"
        if name not in zoo.MODELS:
            raise CheckError(f"unknown model {name!r}: give path/file.py:factory or package.module:factory "
                             f"(built-in: {', '.join(sorted(zoo.MODELS))})")
        factory: Callable[..., Any] = zoo.MODELS[name]
        return _call_factory(factory, name, f"lowering.zoo:{name}")
    where, _, attr = spec.rpartition(":")
    if not where:
        where, attr = spec, ""
    if not attr:
        raise CheckError(f"model {spec!r} names no factory: write {spec}:FACTORY")
    try:
        # (a model file importing PyPI's CUDA torchvision beside the CPU torch: retried once)
        module = retry_on_cpu_torchvision(lambda: _import_model(spec, where))
    except CheckError:
        raise
    except SyntaxError as exc:
        raise CheckError(f"cannot import model {spec!r}: SyntaxError: {exc.msg} "
                         f"({exc.filename}, line {exc.lineno})") from None
    except SystemExit as exc:  # a model file that exits must not end the check with its status
        raise CheckError(f"cannot import model {spec!r}: it called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure of user code
        raise CheckError(f"cannot import model {spec!r}: {_one_line(exc)}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise CheckError(f"cannot import model {spec!r}: {where} has no callable {attr!r}")
    return _call_factory(factory, model_name(spec), spec)


def _import_model(spec: str, where: str):
    """The module ``where`` of model ``spec``: a file path or a dotted module name."""
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where)
        if not path.is_file():
            raise CheckError(f"cannot import model {spec!r}: no such file {where}")
        mod_name = f"_tosa_verify_model_{abs(hash(str(path.resolve())))}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        if module_spec is None or module_spec.loader is None:
            raise CheckError(f"cannot import model {spec!r}: not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return module


def model_name(spec: str) -> str:
    """The name of a model spec in reports and its default golden case: the file stem (or the
    module's last component) and the factory, so two files' ``build()`` factories do not collide;
    a built-in model keeps its zoo name.

    >>> model_name("models/resnet_small.py:build"), model_name("acme.vision.models:build")
    ('resnet_small.build', 'models.build')
    >>> model_name("lowering.zoo:mlp")
    'mlp'
    """
    where, _, attr = spec.rpartition(":")
    if where == "lowering.zoo":
        return attr
    stem = Path(where).stem if where.endswith(".py") or "/" in where or os.sep in where \
        else where.rsplit(".", 1)[-1]
    return f"{stem}.{attr}"


def _call_factory(factory: Callable[..., Any], name: str, spec: str) -> LoadedModel:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = retry_on_cpu_torchvision(factory)  # (a factory importing torchvision)
    except SystemExit as exc:  # a factory that exits (even with 0) has not returned a model
        raise CheckError(f"model factory {spec!r} called sys.exit({exc.code!r}) instead of returning "
                         "(module, example_inputs[, calibration])") from None
    except Exception as exc:  # noqa: BLE001 - user code
        raise CheckError(f"model factory {spec!r} failed: {_one_line(exc)}") from None
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise CheckError(f"model factory {spec!r} must return (module, example_inputs[, calibration]), "
                         f"got {type(result).__name__}")
    module, example = result[0], result[1]
    torch = sys.modules.get("torch")  # (imported by any factory that builds a torch module)
    if torch is None or not isinstance(module, torch.nn.Module):
        # (a plain function or lambda is callable but has no .eval(), no parameters to lower)
        raise CheckError(f"model factory {spec!r} must return (module, example_inputs[, calibration]) with a "
                         f"torch.nn.Module, got {type(module).__name__}")
    example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
    return LoadedModel(name, module, example, result[2] if len(result) == 3 else None, spec)


class _Progress:
    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.times: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, index: int, label: str) -> Iterator[dict[str, str]]:
        self.stream.write(f"[{index}/{len(STEPS)}] {label} ... ")
        self.stream.flush()
        info: dict[str, str] = {}
        start = time.perf_counter()
        try:
            yield info
        except BaseException:
            self.stream.write(f"failed after {time.perf_counter() - start:.1f} s\n")
            self.stream.flush()
            raise
        elapsed = time.perf_counter() - start
        self.times[label] = elapsed
        extra = f" ({info['note']})" if info.get("note") else ""
        self.stream.write(f"{elapsed:.1f} s{extra}\n")
        self.stream.flush()

    def skip(self, index: int, label: str, why: str) -> None:
        self.stream.write(f"[{index}/{len(STEPS)}] {label} ... skipped ({why})\n")
        self.stream.flush()


@contextlib.contextmanager
def _quiet(*, stderr: bool = False) -> Iterator[None]:
    """Silence Python warnings and the torch/torchao loggers' warnings during a step.

    ``stderr=True`` also discards whatever is written to stderr meanwhile (torch.export prints
    partial graphs there on failure, torch's own log handlers bypass the levels set here), so
    a failing step still ends in one error line; ``TOSA_VERIFY_DEBUG=1`` keeps it all.
    """
    loggers = [logging.getLogger(name) for name in ("torch", "torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.ExitStack() as stack:
            warnings.simplefilter("ignore")
            if stderr and not os.environ.get("TOSA_VERIFY_DEBUG"):
                stack.enter_context(_stderr_discarded())
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@contextlib.contextmanager
def _stderr_discarded() -> Iterator[None]:
    """Send both ``sys.stderr`` and file descriptor 2 to /dev/null for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(sink):
                yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
