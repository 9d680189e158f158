"""Conformance cases generated at test time by tosa-tools, checked against the reference model.

For one TOSA operator this module

1. runs ``tosa_verif_build_tests`` (the official test generator shipped in tosa-tools) with a
   small selection config, into a cache directory (file-locked, so xdist workers share it);
2. runs the official ``tosa_reference_model`` CLI on each case (precise FP64 mode, which also
   writes the dot-product bounds file when the case asks for one);
3. runs :func:`tosa_verify.run` on the same inputs and compares:

   * integer / bool outputs (compliance mode EXACT): equal element for element;
   * floating-point outputs: the tosa-tools verifier library under the case's compliance mode;
   * negative (ERROR_IF) cases: our interpreter must raise ``TosaValidationError``.

Nothing here knows an expected value: every expectation comes from the generator's description
and the reference model's output.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tosa_verify
from tosa_verify.dtypes import dtype_info, float_values, to_working
from tosa_verify.errors import TosaRequireError, TosaValidationError

from . import shipped

SITE = Path(next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "tosa_reference_model").is_dir()))
GENERATE_LIB = SITE / "tosa_reference_model" / "libtosa_reference_generate_lib.so"
VERIFY_LIB = SITE / "tosa_reference_model" / "libtosa_reference_verify_lib.so"
BIN_DIR = Path(sys.executable).parent
#: tosa-tools' native binaries. Its console scripts (BIN_DIR) are Python shims that find and
#: run these: a Python start-up (~0.1 s CPU) per reference run, more than the run itself.
NATIVE_DIR = SITE / "bin"
#: The generator, run through a wrapper that checks each JSON schema once (see _generator.py).
GENERATOR = Path(__file__).with_name("_generator.py")
TOSA_TOOLS_VERSION = importlib.metadata.version("tosa-tools")


def tool(name: str) -> str:
    """The native tosa-tools binary ``name`` (``tosa_reference_model``, ``tosa_verify``), or
    its console script when the wheel's layout differs."""
    native = NATIVE_DIR / name
    return str(native if native.is_file() else BIN_DIR / name)

#: The profiles and extensions of TOSA 1.0 the interpreter implements.
EXTENSIONS = [
    "tosa-ext-bf16",
    "tosa-ext-controlflow",
    "tosa-ext-doubleround",
    "tosa-ext-fft",
    "tosa-ext-fp8e4m3",
    "tosa-ext-fp8e5m2",
    "tosa-ext-inexactround",
    "tosa-ext-int16",
    "tosa-ext-int4",
    "tosa-ext-variable",
]

#: Every operator of the TOSA 1.0 specification (pseudocode/operators in the spec, v1.0.2).
SPEC_OPS = (
    "ABS ADD ARGMAX ARITHMETIC_RIGHT_SHIFT AVG_POOL2D BITWISE_AND BITWISE_NOT BITWISE_OR "
    "BITWISE_XOR CAST CEIL CLAMP CLZ CONCAT COND_IF CONST CONST_SHAPE CONV2D CONV3D COS CUSTOM "
    "DEPTHWISE_CONV2D EQUAL ERF EXP FFT2D FLOOR GATHER GREATER GREATER_EQUAL IDENTITY INTDIV LOG "
    "LOGICAL_AND LOGICAL_LEFT_SHIFT LOGICAL_NOT LOGICAL_OR LOGICAL_RIGHT_SHIFT LOGICAL_XOR MATMUL "
    "MAXIMUM MAX_POOL2D MINIMUM MUL NEGATE PAD POW RECIPROCAL REDUCE_ALL REDUCE_ANY REDUCE_MAX "
    "REDUCE_MIN REDUCE_PRODUCT REDUCE_SUM RESCALE RESHAPE RESIZE REVERSE RFFT2D RSQRT SCATTER "
    "SELECT SIGMOID SIN SLICE SUB TABLE TANH TILE TRANSPOSE TRANSPOSE_CONV2D VARIABLE "
    "VARIABLE_READ VARIABLE_WRITE WHILE_LOOP"
).split()

#: The operators the TOSA 1.1 draft adds that tosa-tools generates, runs and we implement.
SPEC_OPS_11 = (
    "DIM ADD_SHAPE SUB_SHAPE MUL_SHAPE DIV_CEIL_SHAPE DIV_FLOOR_SHAPE MOD_SHAPE MAX_SHAPE MIN_SHAPE "
    "EXP2_SHAPE LOG2_CEIL_SHAPE LOG2_FLOOR_SHAPE CONCAT_SHAPE SLICE_SHAPE ASSERT_EQUAL_SHAPE "
    "AVG_POOL2D_ADAPTIVE MAX_POOL2D_ADAPTIVE MATMUL_T ROW_GATHER CAST_TO_BLOCK_SCALED "
    "CAST_FROM_BLOCK_SCALED CONV2D_BLOCK_SCALED MATMUL_T_BLOCK_SCALED RESHAPE_BLOCK_SCALED "
    "ROW_GATHER_BLOCK_SCALED"
).split()

#: The 1.1 draft's extensions (on top of EXTENSIONS) the 1.1 operators are generated with.
EXTENSIONS_11 = [
    "tosa-ext-int64",
    "tosa-ext-mx-common",
    "tosa-ext-mx-fp4e2m1",
    "tosa-ext-mx-fp6e2m3",
    "tosa-ext-mx-fp6e3m2",
    "tosa-ext-mx-fp8e4m3",
    "tosa-ext-mx-fp8e5m2",
    "tosa-ext-mx-int8",
    "tosa-ext-mxfp-conv",
    "tosa-ext-shape",
]

#: Generator test names for ops whose name differs from the op (lower case is the default).
GENERATOR_NAMES = {
    "COND_IF": ["cond_if"],
    "WHILE_LOOP": ["while_loop"],
}


#: Extra generator arguments per op. The generator skips dot-product cases with fewer than
#: 1000 multiply-adds, so with the default small dims these ops would get few or no positives.
EXTRA_ARGS: dict[str, tuple[str, ...]] = {
    "FFT2D": ("--target-shape", "2,32,64", "--target-shape", "1,64,16", "--target-shape", "3,8,128"),
    "RFFT2D": ("--target-shape", "2,32,64", "--target-shape", "1,64,16", "--target-shape", "3,8,128"),
    "MATMUL": ("--tensor-dim-range", "8,24"),
    "MATMUL_T_BLOCK_SCALED": ("--tensor-dim-range", "8,24"),
    "CONV2D_BLOCK_SCALED": ("--tensor-dim-range", "4,16"),
    "AVG_POOL2D": ("--tensor-dim-range", "4,16"),
}


def cache_root() -> Path:
    """Where generated cases are kept between runs (``TOSA_VERIFY_CTS_CACHE`` overrides)."""
    env = os.environ.get("TOSA_VERIFY_CTS_CACHE")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / ".cts_cache"
    root.mkdir(parents=True, exist_ok=True)
    return root


def selection_config(op_name: str, maximum: int, num_errorifs: int) -> dict:
    """A selection config for the generator: a few positive cases per dtype, each ERROR_IF once."""
    criteria = {"permutes": ["type"], "maximum": maximum, "num_errorifs": num_errorifs}
    if op_name == "rescale":
        criteria = {
            "permutes": ["type", "output_dtype", "rounding_mode"],
            "full_params": ["per_channel", "input_unsigned", "output_unsigned", "scale"],
            "maximum": maximum,
            "num_errorifs": num_errorifs,
        }
    return {op_name: {"selection": {"default": criteria}}}


#: Positive cases per dtype combination in the default run: one keeps every op and dtype in the
#: 10-minute CI budget; RESCALE keeps three (its rounding modes, zero points and per-channel
#: forms are the heart of integer bit-exactness). The sweep marker asks for twelve.
DEFAULT_MAXIMUM = 1
MAXIMUM_OF = {"RESCALE": 3}


#: Other seeds and generator parameters for the TOSA 1.1 operators (the sweep's "hidden cases"):
#: two more seeds, larger tensors, and constant (instead of graph-input) operands.
OTHER_CONFIGS_11: dict[str, dict] = {
    "seed1": {"seed": 1, "maximum": 4, "num_errorifs": 3},
    "seed2026": {"seed": 2026, "maximum": 4, "num_errorifs": 3},
    "dims1-12": {"seed": 99, "maximum": 4, "num_errorifs": 2, "extra_args": ("--tensor-dim-range", "1,12")},
    "const-inputs": {"seed": 5, "maximum": 4, "num_errorifs": 2, "extra_args": ("--random-const-inputs",)},
}


def generate(op: str, *, maximum: int | None = None, num_errorifs: int = 1, seed: int = 42,
             extra_args: tuple[str, ...] = (), tosa11: bool = False) -> Path:
    """Generate (once, cached) the conformance cases of ``op``; return their root directory.

    ``tosa11`` generates a 1.0 operator's cases as TOSA 1.1 (with the 1.1 extensions, e.g. its
    EXT-INT64 types with ``extra_args=("--target-dtype", "int64")``).
    """
    if maximum is None:
        maximum = MAXIMUM_OF.get(op, DEFAULT_MAXIMUM)
    op_name = op.lower()
    v11 = tosa11 or op in SPEC_OPS_11
    args = [
        "--filter", f"^{op_name}$",
        "--tosa-version", "1.1" if v11 else "1.0",
        "--generate-lib-path", str(GENERATE_LIB),
        "--test-type", "both",
        "--tensor-dim-range", "1,6",
        "--seed", str(seed),
        "--max-resize-output-dim", "24",
        "--profile", "tosa-pro-int", "tosa-pro-fp",
        "--extension", *EXTENSIONS, *(EXTENSIONS_11 if v11 else ()),
        *EXTRA_ARGS.get(op, ()),
        *extra_args,
    ]
    # the key holds what decides the generator's output: its arguments (the library by name, not
    # by this machine's path) and the tosa-tools version; shipped.py's cases are named by it
    portable = [a.replace(str(GENERATE_LIB), GENERATE_LIB.name) for a in args]
    key = hashlib.sha256(json.dumps([portable, maximum, num_errorifs, TOSA_TOOLS_VERSION])
                         .encode()).hexdigest()[:12]
    shipped.unpack(cache_root())
    out = cache_root() / f"{op_name}-{key}"
    done = out / ".complete"
    lock_path = cache_root() / f".{op_name}-{key}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return out
        if out.exists():
            shutil.rmtree(out)
        tmp = Path(tempfile.mkdtemp(prefix=f"{op_name}-", dir=cache_root()))
        sel = tmp / "selection.json"
        sel.write_text(json.dumps(selection_config(op_name, maximum, num_errorifs)))
        cmd = [sys.executable, str(GENERATOR), "-o", str(tmp / "cases"), *args,
               "--test-selection-config", str(sel)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 and _only_discarded_own_cases(proc.stderr, tmp / "cases"):
            # The 1.1 draft generator's self-check threw away a negative case it built wrongly
            # (e.g. an ASSERT_EQUAL_SHAPE "not equal" case with equal shapes); keep the rest.
            (tmp / "cases" / "discarded.txt").write_text(proc.stderr[-4000:])
        elif proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"generator failed for {op}: {proc.stderr[-2000:]}")
        (tmp / "cases").mkdir(exist_ok=True)
        os.replace(tmp / "cases", out)
        shutil.rmtree(tmp, ignore_errors=True)
        done.write_text("ok")
    return out


def _only_discarded_own_cases(stderr: str, cases: Path) -> bool:
    """True when the generator failed only because it discarded invalid ERROR_IF cases of its own
    ("Invalid ERROR_IF test created") and still wrote cases."""
    failed = [ln for ln in stderr.splitlines() if ln.startswith("ERROR:") and "Missed ERROR_IF" not in ln
              and "Invalid ERROR_IF test created" not in ln and not ln.startswith("ERROR:tosa_verif_build_tests:  ")]
    return "Invalid ERROR_IF test created" in stderr and not failed and any(cases.rglob("desc.json"))


@dataclass
class Case:
    """One generated conformance case."""

    path: Path
    desc: dict = field(repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def negative(self) -> bool:
        return bool(self.desc.get("expected_failure"))

    @property
    def operator(self) -> str:
        return self.desc.get("test_details", {}).get("operator", "")

    def inputs(self) -> list[np.ndarray | tuple[np.ndarray, np.ndarray]]:
        """The case's input arrays; a block-scaled input is the pair (values, scales), its scales
        read from ``<file>_scale.npy`` beside the values, where the reference model's CLI finds them."""
        return [_with_scales(self.path / f) for f in self.desc["ifm_file"]]


def _with_scales(path: Path) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``path``'s array, paired with ``<stem>_scale.npy`` when that file exists."""
    scales = path.with_name(f"{path.stem}_scale.npy")
    return (np.load(path), np.load(scales)) if scales.is_file() else np.load(path)


def find_cases(root: Path) -> list[Case]:
    """All case directories (those with a desc.json) under ``root``, sorted by name."""
    cases = []
    for desc in sorted(root.rglob("desc.json")):
        cases.append(Case(desc.parent, json.loads(desc.read_text())))
    return cases


@dataclass
class ReferenceResult:
    status: str  # "VALID", "ERROR", "UNPREDICTABLE", "OTHER"
    outputs: list[np.ndarray]
    bounds: list[np.ndarray | None]
    message: str = ""


def run_reference_cli(case: Case, workdir: Path) -> ReferenceResult:
    """Run the reference model CLI in precise (FP64) mode on a case's description."""
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [
        tool("tosa_reference_model"),
        "--test_desc", str(case.path / "desc.json"),
        "--flatbuffer_dir", str(case.path),
        "--output_dir", str(workdir),
        "--precise_mode=1",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=case.path)
    status = {0: "VALID", 1: "UNPREDICTABLE", 2: "ERROR"}.get(proc.returncode, "OTHER")
    outputs, bounds = [], []
    if status == "VALID":
        for f in case.desc["ofm_file"]:
            outputs.append(_with_scales(workdir / f))  # a block-scaled output: (values, scales)
            bnd = workdir / f"bounds_{f}"
            bounds.append(np.load(bnd) if bnd.exists() else None)
    return ReferenceResult(status, outputs, bounds, (proc.stdout + proc.stderr)[-1500:])


_VERIFIER = None


def verifier():
    """The tosa-tools verifier library (FP compliance modes), loaded once per process."""
    global _VERIFIER
    if _VERIFIER is None:
        from checker.verifier import VerifierLibrary

        _VERIFIER = VerifierLibrary(VERIFY_LIB)
    return _VERIFIER


def check_case(case: Case, workdir: Path) -> str:
    """Check one case; return "" when our interpreter conforms, else a one-line failure reason."""
    graph_file = case.path / case.desc["tosa_file"]
    if case.negative:
        try:
            tosa_verify.run(graph_file, case.inputs())
        except TosaValidationError:
            return ""
        except Exception as exc:  # noqa: BLE001 - report any other outcome as a failure
            return f"{case.name}: expected ERROR_IF rejection, got {type(exc).__name__}: {exc}"
        return f"{case.name}: expected ERROR_IF ({case.desc.get('expected_failure_desc')}) but the graph ran"
    ref = run_reference_cli(case, workdir / case.name)
    try:
        ours = tosa_verify.run(graph_file, case.inputs())
    except TosaRequireError as exc:
        if ref.status == "UNPREDICTABLE":
            return ""
        return f"{case.name}: we raised REQUIRE failure, reference said {ref.status}: {exc}"
    except TosaValidationError as exc:
        if ref.status == "ERROR":
            # a "positive" case the generator built invalid (e.g. ASSERT_EQUAL_SHAPE's RESHAPE of a
            # broadcast-equal shape whose element count differs): both executors reject it
            return ""
        return f"{case.name}: interpreter raised {type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001
        return f"{case.name}: interpreter raised {type(exc).__name__}: {exc}"
    if ref.status == "UNPREDICTABLE":
        return ""  # a REQUIRE failed in the reference: any result conforms
    if ref.status != "VALID":
        return f"{case.name}: reference model status {ref.status} on a positive case: {ref.message}"
    return judge_outputs(case, ours, ref, workdir)


def judge_outputs(case: Case, ours: list[np.ndarray], ref: ReferenceResult, workdir: Path) -> str:
    """Judge an executor's outputs of a positive case against the reference model's (precise) run.

    Returns "" when they conform, else a one-line reason; ``workdir`` holds the reference run's
    files (block-scaled pairs are verified from them). Used for the interpreter here and for
    VGF in tests/test_vgf_pkg.
    """
    graph_file = case.path / case.desc["tosa_file"]
    compliance = case.desc.get("meta", {}).get("compliance", {"tensors": {}})
    paired = _block_scaled_pairs(compliance, case.desc["ofm_name"])
    for name, mine, theirs, bound in zip(case.desc["ofm_name"], ours, ref.outputs, ref.bounds, strict=True):
        cfg = compliance.get("tensors", {}).get(name, {})
        mode = cfg.get("mode", "EXACT")
        if name in paired:
            if paired[name] is not None and not _verify_pair(case, workdir, name, paired[name], ours):
                return f"{case.name}: outputs {name}, {paired[name]} not compliant under {mode} (block scaled)"
            continue
        data_type = cfg.get("data_type") or _output_dtype(graph_file, name)
        if isinstance(mine, tuple) or isinstance(theirs, tuple):
            reason = _block_scaled_reason(mine, theirs, _output_dtype(graph_file, name), mode)
            if reason:
                return f"{case.name}: block-scaled output {name} {reason}"
            continue
        if data_type in MX_DECODED and theirs.dtype == np.float64:
            # precise mode writes the MX types decoded (FP4/FP6 unpacked, MXINT8 as q / 64)
            mine = _as_comparable(mine, data_type)
        if tuple(mine.shape) != tuple(theirs.shape):
            return f"{case.name}: output {name} shape {mine.shape} != reference {theirs.shape}"
        # Integer outputs are compared exactly, except RESCALE_INEXACT: there the reference returns
        # one edge of the allowed interval and the bounds file the other, so only the verifier
        # (which reads both) can judge.
        if mode == "EXACT" or (theirs.dtype.kind in "biu" and mode != "RESCALE_INEXACT"):
            reason = _exact_reason(mine, theirs, data_type)
            if reason:
                return f"{case.name}: output {name} {reason}"
            continue
        ok = verifier().verify_data(name, compliance, mine, theirs, bound)
        if not ok:
            return f"{case.name}: output {name} not compliant under {mode}"
    return ""


def _exact_reason(mine: np.ndarray, theirs: np.ndarray, data_type: str | None) -> str:
    """Why ``mine`` is not bit-exactly the reference's ``theirs`` ("" when it is)."""
    a = _as_comparable(mine, data_type)
    b = _as_comparable(theirs)
    if a.shape != b.shape:
        return f"shape {a.shape} != reference {b.shape}"
    if _exactly_equal(a, b):
        return ""
    bad = np.flatnonzero(~_elementwise_equal(a.ravel(), b.ravel()))
    i = int(bad[0])
    return f"differs at {bad.size} of {a.size} elements; first flat index {i}: ours {a.ravel()[i]} reference {b.ravel()[i]}"


def _block_scaled_reason(mine, theirs, dtype: str, mode: str) -> str:
    """Judge a block-scaled output, the pair (values, scales) on both sides: both parts exactly
    (the one mode the generator gives a block-scaled output of the 1.1 operators)."""
    if not (isinstance(mine, tuple) and isinstance(theirs, tuple)):
        return f"is a (values, scales) pair on one side only: ours {type(mine).__name__}, reference {type(theirs).__name__}"
    if mode != "EXACT":
        return f"has compliance mode {mode}; only EXACT is judged for block-scaled outputs"
    info = dtype_info(dtype)
    for part, ours, ref, part_dtype in zip(("values", "scales"), mine, theirs, (info.value, info.scale), strict=True):
        reason = _exact_reason(ours, ref, part_dtype)
        if reason:
            return f"{part}: {reason}"
    return ""


#: Dtypes the reference CLI writes as decoded float64 values in precise mode.
MX_DECODED = {"FP4E2M1", "FP6E2M3", "FP6E3M2", "FP8UE8M0", "MXINT8"}


def _block_scaled_pairs(compliance: dict, outputs: list[str]) -> dict[str, str | None]:
    """Block-scaled outputs: data tensor -> its scale tensor, scale tensor -> None.

    The verifier judges such a pair together (the data values depend on the chosen scales), which
    only tosa-tools' ``tosa_verify`` CLI offers (the library's C entry point takes one tensor).
    A scale the graph does not output (the generator's implicit "<name>_scale" of a ROW_GATHER of
    a block-scaled type) leaves its data tensor to the ordinary per-tensor check.
    """
    pairs: dict[str, str | None] = {}
    for name, cfg in compliance.get("tensors", {}).items():
        scale = cfg.get("scale_tensor_name")
        if scale and name in outputs and scale in outputs:
            pairs[name] = scale
            pairs.setdefault(scale, None)
    return pairs


def _verify_pair(case: Case, workdir: Path, data: str, scale: str, ours: list[np.ndarray]) -> bool:
    """Run tosa-tools' ``tosa_verify`` on our (data, scale) outputs against the reference's."""
    from tosa_verify.reference import _write_npy

    graph = tosa_verify.load(case.path / case.desc["tosa_file"])
    names, files = case.desc["ofm_name"], case.desc["ofm_file"]
    imp, ref = [], []
    for name in (data, scale):
        i = names.index(name)
        path = workdir / case.name / f"imp-{files[i]}"
        _write_npy(path, ours[i], graph.main.tensors[name].dtype)
        imp.append(str(path))
        ref.append(str(workdir / case.name / files[i]))
    cmd = [tool("tosa_verify"), "--test_desc", str(case.path / "desc.json"), "--ofm_name", data,
           "--imp_result_file", ",".join(imp), "--ref_result_file", ",".join(ref)]
    return subprocess.run(cmd, capture_output=True, text=True).returncode == 0


def _as_comparable(a: np.ndarray, data_type: str | None = None) -> np.ndarray:
    """Integers as int64, floats as float64 (the reference CLI writes FP outputs as float64).

    ``data_type`` (the TOSA dtype) decodes raw BF16/FP8 views (``|V2``/``|V1``) before widening.
    """
    if data_type is not None and (dtype_info(data_type).is_float or data_type == "MXINT8"):
        if a.dtype == np.float64:
            return a  # the reference CLI's precise-mode output: already the decoded values
        return float_values(to_working(a, data_type), data_type)
    if a.dtype.kind == "V":
        return a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint16)
    if a.dtype.kind == "b":
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    return a.astype(np.int64)


def _elementwise_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit-exact equality for EXACT mode: NaN matches NaN, and -0.0 does not match +0.0."""
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        return a == b
    both_nan = np.isnan(a) & np.isnan(b)
    return both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))


def _exactly_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(_elementwise_equal(a, b)))


def _output_dtype(graph_file: Path, name: str) -> str | None:
    """TOSA dtype of main-block output ``name`` of the case's graph (None if undeclared)."""
    decl = tosa_verify.load(graph_file).main.tensors.get(name)
    return decl.dtype if decl is not None else None


def check_op(op: str, workdir: Path, **gen_kwargs) -> tuple[int, int, list[str]]:
    """Generate and check every selected case of ``op``: (positives, negatives, failures)."""
    root = generate(op, **gen_kwargs)
    cases = [c for c in find_cases(root) if c.operator in ("", op) or op in ("COND_IF", "WHILE_LOOP")]
    failures = [msg for c in cases if (msg := check_case(c, workdir))]
    positives = sum(not c.negative for c in cases)
    return positives, len(cases) - positives, failures


if __name__ == "__main__":  # python -m tests.conformance.harness OP [OP ...]
    for name in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            pos, neg, fails = check_op(name.upper(), Path(tmp))
        print(f"{name.upper()}: {pos} positive, {neg} negative, {len(fails)} failing")
        for f in fails[:20]:
            print("   ", f)
