"""ExecuTorch's own Arm op tests as data: the modules and inputs its TOSA pipelines are tested on.

ExecuTorch 1.5.1 ships its Arm backend's test suite inside the wheel
(``executorch/backends/arm/test/ops/test_*.py``, ``.../models/``). Each test function builds a
``TosaPipelineINT`` or ``TosaPipelineFP`` from a module and a tuple of inputs and runs it. This
module imports those test modules, swaps the two pipeline classes for recorders, calls every
parametrized case and keeps what the pipeline was given: the module, the inputs, and the
tolerances ExecuTorch judges the case with. Nothing of ExecuTorch's lowering runs here.

Judged as ExecuTorch's own pipelines judge a case (:func:`judge_ours`): fully lowered, and the
TOSA output run by the reference model within ``qtol`` quantization steps of the fake-quant model
(INT: PyTorch's float32 run of it, or, where float32 rounding drifts, the same graph in float64)
or within ``atol + rtol * |expected|`` of the float model (FP).

Used by ``tests/lowering/test_et_suite.py`` and ``benchmarks/bench_et_suite.py``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import itertools
import json
import re
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lowering.reference import steps_from
from lowering.torchvision_compat import allow_cpu_torchvision

#: Variants of the TOSA tests that are not the plain INT/FP flow (ExecuTorch's 4-bit weight,
#: fp8/bf16 extensions, cases expected NOT to delegate, custom shaders). The int16 variants
#: (16-bit activations, 8-bit weights) are INT cases lowered with :meth:`QuantConfig.int16`.
EXCLUDED_VARIANT = re.compile(r"a8w4|fp8|bf16|fp16|not_delegated|does_not_delegate|custom|mixed_precision")
#: A test function of ExecuTorch's int16 flow, by its name (its pipeline also enables "int16").
INT16_VARIANT = re.compile(r"a16w8|16a8w|int16")
#: Extensions a case may enable and still be a plain INT/FP case when its inputs are float32
#: (ExecuTorch's FP convolution tests enable bf16 for every case).
PLAIN_EXTENSIONS = {"bf16", "cf"}
TEST_NAME = re.compile(r"^test_\w*_tosa_(INT|FP)(_\w+)?$")


@dataclass
class EtCase:
    """One parametrized case of one of ExecuTorch's TOSA INT/FP tests."""

    id: str  #: ``file.py::test_name[case]``, as pytest names it
    profile: str  #: "INT" or "FP"
    module: torch.nn.Module
    inputs: tuple
    atol: float = 1e-3
    rtol: float = 1e-3
    qtol: int = 1
    et_xfail: str | None = None  #: ExecuTorch marks the case as an expected failure
    skip: str | None = None  #: why the case is outside the INT/FP comparison (fp16, dynamic shapes...)
    kwargs: dict = field(default_factory=dict)
    #: an INT case of ExecuTorch's int16 flow (16-bit activations, 8-bit weights): lowered with
    #: :meth:`lowering.quantizer.QuantConfig.int16` and judged with ExecuTorch's tolerance
    int16: bool = False

    @property
    def label(self) -> str:
        """The case's flow for tables: "INT", "INT16" or "FP"."""
        return "INT16" if self.int16 else self.profile


#: Test modules and cases skipped while collecting (module import failed, e.g. a model that
#: must be downloaded, or the test body called ``pytest.skip``): id -> reason.
SKIPPED: dict[str, str] = {}


class _NoOp:
    """Anything a test does with its pipeline after building it (stages, checks, run)."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self


class _Recorder:
    """Stands in for ``TosaPipelineINT``/``TosaPipelineFP`` and records what it is given."""

    profile = ""
    calls: list = []

    def __class_getitem__(cls, item):
        return cls

    def __init__(self, module, test_data, *args, **kwargs):
        type(self).calls.append((self.profile, module, test_data, kwargs))
        self.tester = _NoOp()

    def __getattr__(self, name):
        return _NoOp()


def _recorder(profile: str, calls: list) -> type:
    return type(f"Recorded{profile}", (_Recorder,), {"profile": profile, "calls": calls})


def pytest_configure(config) -> None:
    """Pytest plugin hook: the same environment for ExecuTorch's child pytest run (``import
    torchvision`` beside the CPU torch: ExecuTorch's model tests and ``transformers`` import it)."""
    allow_cpu_torchvision()


def _test_dir() -> Path:
    import executorch.backends.arm.test as et_test

    return Path(next(iter(et_test.__path__)))


def test_files(kind: str = "ops") -> list[str]:
    """Names of ExecuTorch's Arm test modules of ``kind`` ("ops" or "models").

    Example:
        >>> "test_add.py" in test_files()  # doctest: +SKIP
        True
    """
    return sorted(p.name for p in (_test_dir() / kind).glob("test_*.py"))


def _param_sets(fn) -> list[tuple[str, dict, str | None]]:
    """(case id, kwargs, xfail reason) for every parametrization of a pytest test function."""
    # an xfail on the function itself (test_llama's static-cache tests) covers every case
    whole = [m.kwargs.get("reason") or "xfail" for m in getattr(fn, "pytestmark", [])
             if m.name == "xfail"]
    sets: list[tuple[str, dict, str | None]] = [("", {}, whole[0] if whole else None)]
    for mark in reversed(getattr(fn, "pytestmark", [])):
        if mark.name != "parametrize":
            continue
        names = [s.strip() for s in mark.args[0].split(",")] if isinstance(mark.args[0], str) \
            else list(mark.args[0])
        values = list(mark.args[1])
        ids = mark.kwargs.get("ids")
        expanded = []
        for i, v in enumerate(values):
            xfail = None
            if hasattr(v, "values") and hasattr(v, "marks"):  # pytest.param
                for m in v.marks:
                    if m.name == "xfail":
                        xfail = m.kwargs.get("reason") or "xfail"
                    elif m.name == "skip":
                        xfail = "skip: " + str(m.kwargs.get("reason", ""))
                case_id, vals = v.id, v.values
            else:
                case_id, vals = (ids[i] if ids else str(i)), (v,)
            if len(names) > 1 and len(vals) == 1:
                vals = tuple(vals[0])
            expanded.append((str(case_id), dict(zip(names, vals, strict=False)), xfail))
        sets = [("-".join(x for x in (a[0], b[0]) if x), {**a[1], **b[1]}, a[2] or b[2])
                for a, b in itertools.product(sets, expanded)]
    return sets


def _is_int16(name: str, profile: str, kwargs: dict) -> bool:
    """An INT case of ExecuTorch's int16 flow: its pipeline enables the int16 extension, or its
    test is named as one (a16w8, 16a8w, int16)."""
    return profile == "INT" and ("int16" in (kwargs.get("tosa_extensions") or ()) or bool(INT16_VARIANT.search(name)))


def _skip_reason(name: str, inputs: tuple, kwargs: dict) -> str | None:
    extra = set(kwargs.get("tosa_extensions") or ()) - PLAIN_EXTENSIONS - {"int16"}
    if extra:
        return f"TOSA extensions {sorted(extra)}"
    if kwargs.get("dynamic_shapes") is not None:
        return "dynamic shapes"
    if kwargs.get("tosa_version") not in (None, "1.0"):
        return f"TOSA {kwargs['tosa_version']}"
    for x in torch.utils._pytree.tree_leaves(list(inputs)):
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16,
                                                        torch.float64):
            return f"{x.dtype} input"
    return None


def file_key(file: str, kind: str = "ops") -> str:
    """What a listed file's cases depend on: the executorch version and the file's bytes, read
    without importing ExecuTorch (its import is seconds of CPU in every xdist worker).

    Example:
        >>> len(file_key("test_add.py"))  # doctest: +SKIP
        16
    """
    spec = importlib.util.find_spec("executorch")
    path = Path(next(iter(spec.submodule_search_locations))) / "backends/arm/test" / kind / file
    data = path.read_bytes() if path.exists() else b""
    version = importlib.metadata.version("executorch")
    return hashlib.sha256(version.encode() + b"\0" + data).hexdigest()[:16]


def usable(case: EtCase) -> bool:
    """A plain INT/FP case that ExecuTorch itself expects to pass."""
    return case.skip is None and case.et_xfail is None


@functools.cache
def collected(file: str, kind: str = "ops") -> tuple[EtCase, ...]:
    """:func:`collect` of one file, once per process (a test body looks its case up here).

    Example:
        >>> collected("test_prelu.py")[0].profile  # doctest: +SKIP
        'FP'
    """
    return tuple(_collect_file(file, kind, ("INT", "FP")))


def usable_ids(files: Iterable[str] | None, kind: str, listing: Path) -> list[str]:
    """Ids of the :func:`usable` cases of ``files`` (default: all of ``kind``): from ``listing``
    (written by :func:`write_listing`) for the files whose :func:`file_key` it matches, so pytest
    collects them without importing ExecuTorch; the other files are collected live.

    Example:
        >>> usable_ids(["test_prelu.py"], "ops", Path("tests/lowering/et_cases.json"))[0]  # doctest: +SKIP
        'test_prelu.py::test_prelu_tosa_FP[...]'
    """
    listed = json.loads(listing.read_text()).get(kind, {}) if listing.exists() else {}
    ids: list[str] = []
    for file in files if files is not None else test_files(kind):
        entry = listed.get(file)
        if entry is not None and entry["key"] == file_key(file, kind):
            ids += entry["ids"]
        else:
            ids += [c.id for c in collected(file, kind) if usable(c)]
    return ids


def find_case(case_id: str, kind: str = "ops") -> EtCase:
    """The case named ``case_id`` (``file.py::test[...]``), collected live from its file.

    Example:
        >>> find_case("test_prelu.py::test_prelu_tosa_FP[...]").profile  # doctest: +SKIP
        'FP'
    """
    file = case_id.split("::")[0]
    for case in collected(file, kind):
        if case.id == case_id:
            return case
    raise LookupError(f"{case_id}: not a case of ExecuTorch's {kind}/{file} (regenerate the listing: "
                      f"python benchmarks/_et_suite.py --listing tests/lowering/et_cases.json)")


def write_listing(listing: Path) -> None:
    """Rewrite ``listing`` for the files it lists: each file's key and usable case ids.

    Example:
        >>> write_listing(Path("tests/lowering/et_cases.json"))  # doctest: +SKIP
    """
    old = json.loads(listing.read_text())
    new = {kind: {file: {"key": file_key(file, kind),
                         "ids": [c.id for c in collected(file, kind) if usable(c)]}
                  for file in files}
           for kind, files in old.items()}
    listing.write_text(json.dumps(new, indent=1) + "\n")


def collect(files: Iterable[str] | None = None, kind: str = "ops",
            profiles: tuple[str, ...] = ("INT", "FP")) -> list[EtCase]:
    """Every INT/FP TOSA case of ExecuTorch's Arm tests in ``files`` (default: all of ``kind``).

    Example:
        >>> cases = collect(["test_prelu.py"])  # doctest: +SKIP
        >>> sorted({c.profile for c in cases}), type(cases[0].module).__name__  # doctest: +SKIP
        (['FP', 'INT'], 'PReLU')
    """
    cases: list[EtCase] = []
    for file in files if files is not None else test_files(kind):
        cases += _collect_file(file, kind, profiles)
    return cases


@contextlib.contextmanager
def _et_conftest():
    """``import conftest`` gives ExecuTorch's test conftest while a test module is imported
    (``test_transpose_conv2d.py`` does, as pytest's rootdir import lets it); whatever module
    had the name before gets it back."""
    spec = importlib.util.spec_from_file_location("conftest", _test_dir() / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saved = sys.modules.get("conftest")
    sys.modules["conftest"] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("conftest", None)
        else:
            sys.modules["conftest"] = saved


def _collect_file(file: str, kind: str, profiles) -> list[EtCase]:
    modname = f"executorch.backends.arm.test.{kind}.{Path(file).stem}"
    allow_cpu_torchvision()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _et_conftest():
        warnings.simplefilter("ignore")
        # (a test module makes its random test data when imported: seeded here, the data do not
        # depend on what ran before, which changed with the hash seed: neg's a16w8 inputs did)
        torch.manual_seed(0)
        try:
            mod = importlib.import_module(modname)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - needs what is not installed (pytest.skip too)
            SKIPPED[file] = f"import: {type(e).__name__}: {str(e)[:160]}"
            return []
    calls: list = []
    saved = {}
    ignored: list = []
    for attr in [a for a in vars(mod) if a.endswith("Pipeline") or "Pipeline" in a]:
        if not isinstance(getattr(mod, attr), type):
            continue
        saved[attr] = getattr(mod, attr)
        profile = {"TosaPipelineINT": "INT", "TosaPipelineFP": "FP"}.get(attr)
        # other pipelines (Ethos-U, VGF, "not delegated") must not run: record them nowhere
        setattr(mod, attr, _recorder(profile or "", calls if profile else ignored))
    out: list[EtCase] = []
    try:
        for name in sorted(vars(mod)):
            m = TEST_NAME.match(name)
            fn = getattr(mod, name)
            if not m or not callable(fn) or m.group(1) not in profiles or \
                    EXCLUDED_VARIANT.search(name):
                continue
            for case_id, kwargs, xfail in _param_sets(fn):
                calls.clear()
                torch.manual_seed(0)
                try:
                    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                        warnings.simplefilter("ignore")
                        fn(**kwargs)
                except Exception as e:  # noqa: BLE001 - the test body needs more than a pipeline
                    if not calls:  # e.g. from_pretrained without a network
                        SKIPPED[f"{file}::{name}[{case_id}]"] = f"{type(e).__name__}: {str(e).partition(chr(10))[0][:160]}"
                except BaseException as e:  # pytest.skip: files or downloads it does not have
                    if type(e).__name__ != "Skipped":
                        raise
                    SKIPPED[f"{file}::{name}[{case_id}]"] = f"pytest.skip: {str(e)[:160]}"
                for i, (profile, module, data, pkw) in enumerate(calls):
                    inputs = tuple(data) if isinstance(data, (tuple, list)) else (data,)
                    suffix = f"[{case_id}]" if case_id else ""
                    cid = f"{file}::{name}{suffix}" + (f"#{i}" if len(calls) > 1 else "")
                    out.append(EtCase(
                        id=cid, profile=profile, module=module, inputs=inputs,
                        atol=float(pkw.get("atol", 1e-3)), rtol=float(pkw.get("rtol", 1e-3)),
                        qtol=int(pkw.get("qtol", 1)), et_xfail=xfail,
                        skip=_skip_reason(name, inputs, pkw), kwargs=pkw,
                        int16=_is_int16(name, profile, pkw)))
    finally:
        for attr, cls in saved.items():
            setattr(mod, attr, cls)
    return out


# ----------------------------------------------------------------------------- judging
@dataclass
class Verdict:
    """How one case went through a flow: "pass", "partial" (some nodes left on the CPU),
    "wrong" (numbers outside the tolerance) or "error" (lowering or running failed)."""

    status: str
    detail: str = ""
    seconds: float = 0.0


def _as_list(x) -> list:
    """The tensors of a model's output, flattened as ``torch.export`` flattens them."""
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def judge_ours(case: EtCase) -> Verdict:
    """Lower ``case`` with :func:`lowering.lower` and judge it as ExecuTorch judges its own.

    INT calibrates on the test's own inputs (as ExecuTorch's pipeline does); an int16 case
    quantizes as ExecuTorch's int16 flow does (16-bit symmetric activations, 8-bit weights,
    per channel as the test asks).
    """
    import time

    import lowering

    start = time.perf_counter()
    module = case.module.eval()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            quantization = lowering.QuantConfig.int16(per_channel=bool(case.kwargs.get("per_channel_quantization", True))) \
                if case.int16 else None
            lm = lowering.lower(module, _fresh(case.inputs), profile=case.profile, quantization=quantization,
                                calibration=[_fresh(case.inputs)])
    except Exception as e:  # noqa: BLE001
        return Verdict("error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                       time.perf_counter() - start)
    if lm.tosa is None or lm.cpu_nodes:
        first = lm.cpu_nodes[0] if lm.cpu_nodes else None
        why = f"{first.node} ({first.target}): {first.reason}" if first else "no TOSA graph"
        return Verdict("partial", why, time.perf_counter() - start)
    try:
        detail = _compare(case, lm, module)
    except Exception as e:  # noqa: BLE001
        return Verdict("error", f"run: {type(e).__name__}: {str(e)[:200]}",
                       time.perf_counter() - start)
    return Verdict("wrong" if detail else "pass", detail or "", time.perf_counter() - start)


def _fresh(inputs: tuple) -> tuple:
    """A copy of the inputs (a model like ``x += y`` writes into its input)."""
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _compare(case: EtCase, lm, module) -> str | None:
    """None when the lowered graph's outputs are within the case's tolerance, else why not."""
    with torch.no_grad():
        if case.profile == "FP":
            expected = _as_list(module(*_fresh(case.inputs)))
            got = lm.run(*_fresh(case.inputs))
            for i, (e, g) in enumerate(zip(expected, got, strict=True)):
                e = e.detach()
                if tuple(e.shape) != tuple(g.shape):
                    return f"output {i}: shape {tuple(g.shape)} != {tuple(e.shape)}"
                if not torch.allclose(g.to(e.dtype).double(), e.double(), atol=case.atol,
                                      rtol=case.rtol, equal_nan=True):
                    err = float((g.double() - e.double()).abs().nan_to_num(0).max())
                    return f"output {i}: max abs error {err:.3g}"
            return None
        raw = lm.run_raw(lm.quantize_inputs(*_fresh(case.inputs)))
        # the fake-quant model is our decomposed graph: its shapes are checked against torch's
        for i, (e, r) in enumerate(zip(_as_list(module(*_fresh(case.inputs))), raw, strict=True)):
            if tuple(e.shape) != tuple(np.shape(r)):
                return f"output {i}: shape {tuple(np.shape(r))} != {tuple(e.shape)}"
        detail = _int_detail(case, lm, raw, _as_list(lm.quantized_model(*_fresh(case.inputs))))
        if detail is None:
            return None
        # PyTorch's float32 fake-quant model rounds on its own: through a deep stack (a
        # Transformer) it drifts a few steps from the quantized graph's exact value, which the
        # same graph evaluated in float64 gives. The TOSA graph is judged against that too.
        from lowering.reference import fake_quant_float64

        exact = _as_list(fake_quant_float64(lm.quantized_model, *_fresh(case.inputs)))
        detail64 = _int_detail(case, lm, raw, exact)
        return None if detail64 is None else f"{detail} (float64 fake-quant: {detail64})"


def _int_detail(case: EtCase, lm, raw, expected) -> str | None:
    """None when every raw INT output is within ``qtol`` steps of ``expected``, else why not."""
    for i, (e, r, qp) in enumerate(zip(expected, raw, lm.output_qparams, strict=True)):
        e = e.detach()
        r = np.asarray(r)
        if tuple(e.shape) != tuple(r.shape):
            return f"output {i}: shape {tuple(r.shape)} != {tuple(e.shape)}"
        if qp is None:
            if e.is_floating_point():
                if not np.allclose(r.astype(np.float64), e.double().numpy(), atol=case.atol,
                                   rtol=case.rtol, equal_nan=True):
                    return f"output {i}: unquantized float output differs"
            elif not np.array_equal(r.astype(np.int64), e.to(torch.int64).numpy()):
                return f"output {i}: integer output differs"
            continue
        steps = int(steps_from(r, e, qp).max(initial=0))
        if steps > case.qtol and not (case.int16 and _within_et_tolerance(case, r, e, qp)):
            return f"output {i}: {steps} quantization steps from fake-quant"
    return None


def _within_et_tolerance(case: EtCase, raw: np.ndarray, expected: torch.Tensor, qp) -> bool:
    """ExecuTorch's own INT comparison: the dequantized output within ``atol + qtol * scale``
    plus ``rtol`` of the fake-quant model's value (``torch.allclose``). The int16 cases are
    judged by it: one int16 step is ~1/32767 of the output's range, far inside its atol.

    Example:
        >>> from lowering.qparams import QParams
        >>> qp = QParams(np.array([2.0 ** -15]), np.array([0]), torch.int16, -32767, 32767)
        >>> case = EtCase("c", "INT", None, (), int16=True)
        >>> _within_et_tolerance(case, np.array([16384 + 30]), torch.tensor([0.5]), qp)
        True
        >>> _within_et_tolerance(case, np.array([16384 + 60]), torch.tensor([0.5]), qp)
        False
    """
    step = float(np.max(qp.scale))  # (ExecuTorch passes the output's one scale)
    want = expected.double().numpy()
    dequantized = np.asarray(qp.dequantize(raw), np.float64)
    return bool(np.all(np.abs(dequantized - want) <= case.atol + case.qtol * step + case.rtol * np.abs(want)))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Rewrite the listing of ExecuTorch's cases the tests collect.")
    parser.add_argument("--listing", type=Path, required=True, help="e.g. tests/lowering/et_cases.json")
    write_listing(parser.parse_args().listing)
