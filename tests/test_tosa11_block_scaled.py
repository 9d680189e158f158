"""Block-scaled tensors of the TOSA 1.1 draft (``bs32_fp8ue8m0_<value>_t``) end to end.

A block-scaled tensor is one tensor of values plus an FP8UE8M0 scale per 32 innermost elements;
the flatbuffer declares it with ScaleType / BlockShape (constants: ScaleData), the reference
model's CLI takes its scales from ``<file>_scale.npy``. Every expectation here comes from the
reference model (``tosa_reference_model``) or from the schema tosa-tools generates.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess

import numpy as np
import pytest
from fuzz.builder import random_block_scaled  # tests/ is on sys.path

import tosa_verify
from tosa_verify import reference
from tosa_verify.dtypes import (
    BS_VALUE_TYPES,
    block_scaled_name,
    dtype_info,
    to_reference_form,
)
from tosa_verify.errors import TosaFormatError, TosaInputError, TosaValidationError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.reference import _write_npy, reference_binary
from tosa_verify.writer import to_flatbuffer


def _matmul_t_graph(a_dt: str, b_dt: str, out_dt: str, n: int, h: int, w: int, c: int, d: int,
                    b_const: np.ndarray | None = None) -> Graph:
    """MATMUL_T A [n,h,c] x B [d,w,c]; B a constant when ``b_const`` is given."""
    # a block-scaled operand's zero point is fp32 (as tosa-tools generates and runs it)
    zp_types = ["FP32" if dtype_info(dt).block else dt for dt in (a_dt, b_dt)]
    za, zb = (Tensor(name, (1,), zt, np.zeros(1, dtype_info(zt).working)) for name, zt in zip(("zp_a", "zp_b"), zp_types, strict=True))
    tensors = {"a": Tensor("a", (n, h, c), a_dt), "b": Tensor("b", (d, w, c), b_dt, b_const),
               za.name: za, zb.name: zb, "o": Tensor("o", (n, h, w), out_dt)}
    ops = [Operator("CONST", {}, [], [za.name]), Operator("CONST", {}, [], [zb.name])]
    if b_const is not None:
        ops.append(Operator("CONST", {}, [], ["b"]))
    ops.append(Operator("MATMUL_T", {}, ["a", "b", za.name, zb.name], ["o"]))
    inputs = ["a"] if b_const is not None else ["a", "b"]
    return Graph((1, 1, 0, True), [Region("main", [Block("main", ops, tensors, inputs, ["o"])])])


def _operand(rng: np.random.Generator, dt: str, shape: tuple[int, ...]):
    """A caller's input of type ``dt``: the (values, scales) pair for a block-scaled type."""
    if dtype_info(dt).block:
        return to_reference_form(random_block_scaled(rng, shape, dtype_info(dt).value), dt)
    return to_reference_form(rng.standard_normal(shape).astype(dtype_info(dt).working), dt)


MATMUL_T_CASES = [
    # (A_t, B_t, out_t, N, H, W, C, D)
    ("FP32", block_scaled_name("FP6E3M2"), "FP32", 2, 3, 4, 64, 2),
    (block_scaled_name("FP4E2M1"), block_scaled_name("FP8E4M3"), "FP32", 1, 2, 5, 96, 1),
    (block_scaled_name("MXINT8"), "BF16", "BF16", 2, 2, 3, 32, 1),
    ("FP16", block_scaled_name("FP6E2M3"), "BF16", 1, 4, 2, 64, 1),
    (block_scaled_name("FP8E5M2"), block_scaled_name("FP8E5M2"), "FP32", 3, 1, 2, 32, 3),
]


@pytest.mark.parametrize("case", MATMUL_T_CASES, ids=lambda c: f"{c[0]}x{c[1]}-{c[2]}")
def test_block_scaled_matmul_t_matches_the_reference_model(case):
    """MATMUL_T with block-scaled operands (graph inputs, the scales in ``<file>_scale.npy``)
    against the reference model in precise (fp64) mode: the result is the fp64 dot product of
    value * scale terms rounded once to out_t, so ours is within one out_t rounding of it."""
    a_dt, b_dt, out_dt, n, h, w, c, d = case
    rng = np.random.default_rng(sum(map(ord, "".join(map(str, case)))))
    data = to_flatbuffer(_matmul_t_graph(a_dt, b_dt, out_dt, n, h, w, c, d))
    inputs = [_operand(rng, a_dt, (n, h, c)), _operand(rng, b_dt, (d, w, c))]
    ours = tosa_verify.run(data, inputs)[0]
    theirs = reference.run(data, inputs, precise=True)[0]
    assert theirs.dtype == np.float64 and theirs.shape == (n, h, w)
    ours64 = to_ours64(ours, out_dt)
    eps = 2.0 ** -(24 if out_dt == "FP32" else 8)
    np.testing.assert_allclose(ours64, theirs, rtol=eps, atol=1e-30)
    # the scales matter: the same values with every scale 1 give another result
    assert not np.allclose(theirs, reference.run(data, _unit_scales(inputs, (a_dt, b_dt)), precise=True)[0])


def to_ours64(value: np.ndarray, dtype: str) -> np.ndarray:
    """Our output (reference-model numpy form) as float64."""
    return np.asarray(tosa_verify.dtypes.to_working(value, dtype), dtype=np.float64)


def _unit_scales(inputs: list, dtypes: tuple[str, ...]) -> list:
    return [(v[0], np.full(v[1].shape, 127, np.uint8).view("V1")) if dtype_info(dt).block else v
            for v, dt in zip(inputs, dtypes, strict=True)]


@pytest.mark.parametrize("value", BS_VALUE_TYPES)
def test_block_scaled_constants_round_trip_and_run_as_the_reference_model(value):
    """A constant block-scaled B (values in Data, scales in ScaleData, FP4/FP6 packed) survives
    our writer and loader unchanged, and MATMUL_T on it agrees with the reference model."""
    rng = np.random.default_rng(len(value))
    dt = block_scaled_name(value)
    b = random_block_scaled(rng, (1, 3, 64), value)
    graph = _matmul_t_graph("FP32", dt, "FP32", 2, 2, 3, 64, 1, b_const=b)
    data = to_flatbuffer(graph)
    loaded = tosa_verify.load(data).main.tensors["b"]
    assert loaded.dtype == dt and loaded.shape == (1, 3, 64)
    assert loaded.data.tobytes() == b.tobytes()  # values and scales, element for element
    x = rng.standard_normal((2, 2, 64)).astype(np.float32)
    theirs = reference.run(data, [x], precise=True)[0]
    np.testing.assert_allclose(tosa_verify.run(data, [x])[0].astype(np.float64), theirs, rtol=2.0 ** -24)


def _patched(data: bytes, slot: int, value: int) -> bytes:
    """``data`` with uint32 field ``slot`` of tensor "b" set to ``value`` (in place in the buffer)."""
    import tosa.TosaGraph as tosa_graph

    buf = bytearray(data)
    block = tosa_graph.TosaGraph.GetRootAs(buf, 0).Regions(0).Blocks(0)
    tensor = next(block.Tensors(i) for i in range(block.TensorsLength()) if block.Tensors(i).Name() == b"b")
    at = tensor._tab.Offset(slot)
    assert at, f"slot {slot} not written"
    struct.pack_into("<I", buf, tensor._tab.Pos + at, value)
    return bytes(buf)


def _reference_exit_code(data: bytes, inputs: list, dtypes: list[str], tmp_path, names=("a", "b")) -> int:
    """Exit code of the reference model's CLI on raw graph bytes (our loader never sees them)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "g.tosa").write_bytes(data)
    files = []
    for i, (value, dt) in enumerate(zip(inputs, dtypes, strict=True)):
        info = dtype_info(dt)
        if info.block:
            _write_npy(tmp_path / f"in{i}.npy", value[0], info.value)
            _write_npy(tmp_path / f"in{i}_scale.npy", value[1], info.scale)
        else:
            _write_npy(tmp_path / f"in{i}.npy", value, dt)
        files.append(f"in{i}.npy")
    desc = {"tosa_file": "g.tosa", "ifm_name": list(names), "ifm_file": files, "ofm_name": ["o"],
            "ofm_file": ["o.npy"], "expected_failure": False}
    (tmp_path / "desc.json").write_text(json.dumps(desc))
    cmd = [reference_binary(), "--test_desc", str(tmp_path / "desc.json"), "--flatbuffer_dir", str(tmp_path),
           "--output_dir", str(tmp_path / "out"), "--terminate_early"]
    env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False).returncode


#: TosaTensor vtable slots (tosa/TosaTensor.py): Type 8, ScaleType 22, BlockShape 26.
MALFORMED = {
    # the reference model rejects these with status ERROR (exit code 2)
    "scale type FP16": (22, 8, "scale type FP16 is not FP8UE8M0", True),
    "value type INT8": (8, 3, "value type INT8 cannot be block scaled", True),
    # these the reference model does not reject cleanly (it asserts: exit code < 0)
    "block shape 16": (26, 16, "BlockShape 16 is not a block_shape_t value", False),
    "no scale type": (22, 0, "BlockShape 32 without a ScaleType", False),
    "no block shape": (26, 0, "ScaleType FP8UE8M0 without a BlockShape", False),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_block_scaled_declarations_are_rejected(kind, tmp_path):
    slot, value, message, clean = MALFORMED[kind]
    dt = block_scaled_name("FP8E4M3")
    rng = np.random.default_rng(5)
    data = _patched(to_flatbuffer(_matmul_t_graph("FP32", dt, "FP32", 1, 2, 3, 32, 1)), slot, value)
    inputs = [_operand(rng, "FP32", (1, 2, 32)), _operand(rng, dt, (1, 3, 32))]
    with pytest.raises(TosaValidationError, match=f"block-scaled tensor 'b' of shape \\[1, 3, 32\\]: {message}"):
        tosa_verify.load(data)
    code = _reference_exit_code(data, inputs, ["FP32", dt], tmp_path)
    assert code == 2 if clean else code not in (0, 1)


def test_innermost_dimension_not_a_multiple_of_the_block_is_rejected(tmp_path):
    """A bs32 tensor of shape [1, 3, 33] (the scale index c / 32 of the spec's tensor_read would
    leave a partial block): our ERROR; the reference model refuses it too, though not cleanly (an
    uncaught "block-scaled tensor last dimension must be a multiple of block size": abort)."""
    import tosa.TosaGraph as tosa_graph

    dt = block_scaled_name("FP8E4M3")
    buf = bytearray(to_flatbuffer(_matmul_t_graph("FP32", dt, "FP32", 1, 2, 3, 32, 1)))
    block = tosa_graph.TosaGraph.GetRootAs(buf, 0).Regions(0).Blocks(0)
    for i in range(block.TensorsLength()):
        if block.Tensors(i).Name() in (b"a", b"b"):
            block.Tensors(i).ShapeAsNumpy()[-1] = 33  # a writable view into buf
    data = bytes(buf)
    with pytest.raises(TosaValidationError, match="innermost dimension 33 is not a multiple of the block size 32"):
        tosa_verify.load(data)
    inputs = [np.zeros((1, 2, 33), np.float32), (np.zeros((1, 3, 33), np.uint8).view("V1"), np.zeros((1, 3, 1), "V1"))]
    assert _reference_exit_code(data, inputs, ["FP32", dt], tmp_path) not in (0, 1)  # neither VALID nor REQUIRE


def test_a_block_scaled_input_takes_a_values_scales_pair():
    dt = block_scaled_name("FP4E2M1")
    data = to_flatbuffer(_matmul_t_graph("FP32", dt, "FP32", 1, 1, 1, 32, 1))
    a = np.ones((1, 1, 32), np.float32)
    values = np.zeros((1, 1, 16), np.uint8)  # 32 packed FP4 values
    with pytest.raises(TosaInputError, match="input 'b': a BS32_FP8UE8M0_FP4E2M1 tensor takes the pair"):
        tosa_verify.run(data, [a, values])
    with pytest.raises(TosaInputError, match=r"input 'b': BS32_FP8UE8M0_FP4E2M1 scales of shape \[1, 1, 2\]"):
        tosa_verify.run(data, [a, (values, np.zeros((1, 1, 2), "V1"))])


@pytest.mark.parametrize("op", ["MATMUL_T", "ROW_GATHER"])
def test_extensions_of_block_scaled_graphs_are_the_generators(op):
    """``info``'s extensions of each generated positive case are the ones tosa-tools' generator
    requires for it (a block-scaled type: EXT-MX-COMMON and EXT-MX-<value type>)."""
    from conformance.harness import find_cases, generate

    from tosa_verify.profiles import profiles_and_extensions

    cases = [c for c in find_cases(generate(op)) if not c.negative]
    scaled = [c for c in cases if "bs32" in c.name]
    assert scaled, f"no block-scaled {op} case generated"
    for case in cases:
        _, extensions = profiles_and_extensions(tosa_verify.load(case.path / case.desc["tosa_file"]))
        required = case.desc["test_requirements"].get("extensions_required", [])
        assert extensions == sorted(e.upper().removeprefix("TOSA-") for e in required), case.name


def _row_gather_graph(value: str) -> Graph:
    """ROW_GATHER of a block-scaled [2, 3, 64] input, 2 indices a batch, row_count 2."""
    dt = block_scaled_name(value)
    tensors = {"v": Tensor("v", (2, 3, 64), dt), "i": Tensor("i", (2, 2), "INT32"),
               "rc": Tensor("rc", (1,), "INT32", np.array([2], np.int32)), "o": Tensor("o", (2, 4, 64), dt)}
    ops = [Operator("CONST", {}, [], ["rc"]), Operator("ROW_GATHER", {}, ["v", "i", "rc"], ["o"])]
    return Graph((1, 1, 0, True), [Region("main", [Block("main", ops, tensors, ["v", "i"], ["o"])])])


@pytest.mark.parametrize("precise", [False, True])
def test_diff_and_repro_of_a_block_scaled_row_gather(precise, tmp_path):
    """diff judges a block-scaled output by both its parts against the reference model, and the
    one-op repro writes every (values, scales) pair as <file>.npy + <file>_scale.npy."""
    from tosa_verify.diff import diff, run_repro

    dt = block_scaled_name("FP6E2M3")
    data = to_flatbuffer(_row_gather_graph("FP6E2M3"))
    rng = np.random.default_rng(11)
    inputs = [to_reference_form(random_block_scaled(rng, (2, 3, 64), "FP6E2M3"), dt), np.array([[1, 0], [0, 1]], np.int32)]
    report = diff(data, inputs, precise=precise)
    assert report.ok, report.format_table()
    report.write_repro(tmp_path, op=1)
    for stem in ("input-0", "expected-0", "actual-0"):
        assert (tmp_path / f"{stem}_scale.npy").is_file(), stem
    verdicts = run_repro(tmp_path)
    assert verdicts and all(v is not None and v.status == "exact" for v in verdicts)


def test_compare_judges_values_and_scales_of_a_block_scaled_tensor():
    from tosa_verify.compare import compare

    dt = block_scaled_name("FP4E2M1")
    values, scales = to_reference_form(random_block_scaled(np.random.default_rng(2), (2, 64), "FP4E2M1"), dt)
    assert compare((values, scales), (values.copy(), scales.copy()), dtype=dt).status == "exact"
    other_scales = (scales.view(np.uint8) ^ 1).view(scales.dtype)  # each scale doubled or halved
    assert not compare((values, scales), (values, other_scales), dtype=dt).ok
    other_values = values.copy()
    other_values[0, 0] ^= 0x01  # one FP4 code changed
    assert not compare((values, scales), (other_values, scales), dtype=dt).ok


def test_cli_run_reads_and_writes_block_scaled_files_as_the_reference_model(tmp_path):
    """``tosa-verify run``: a block-scaled input is FILE.npy plus FILE_scale.npy, a block-scaled
    output is written the same way; the files hold what the reference model returns."""
    from tosa_verify.cli import main

    dt = block_scaled_name("FP4E2M1")
    graph = tmp_path / "g.tosa"
    graph.write_bytes(to_flatbuffer(_row_gather_graph("FP4E2M1")))
    values, scales = to_reference_form(random_block_scaled(np.random.default_rng(4), (2, 3, 64), "FP4E2M1"), dt)
    indices = np.array([[0, 1], [1, 0]], np.int32)
    _write_npy(tmp_path / "v.npy", values, "FP4E2M1")
    _write_npy(tmp_path / "v_scale.npy", scales, "FP8UE8M0")
    np.save(tmp_path / "i.npy", indices)
    out = tmp_path / "out"
    assert main(["run", str(graph), "--input", str(tmp_path / "v.npy"), "--input", str(tmp_path / "i.npy"),
                 "-o", str(out)]) == 0
    theirs = reference.run(graph, [(values, scales), indices])[0]
    np.testing.assert_array_equal(np.load(out / "output_0.npy"), theirs[0])
    np.testing.assert_array_equal(np.load(out / "output_0_scale.npy").view(np.uint8), theirs[1].view(np.uint8))


def _tensor_b(buf: bytearray):
    import tosa.TosaGraph as tosa_graph

    block = tosa_graph.TosaGraph.GetRootAs(buf, 0).Regions(0).Blocks(0)
    return next(block.Tensors(i) for i in range(block.TensorsLength()) if block.Tensors(i).Name() == b"b")


def _without_field(data: bytes, slot: int) -> bytes:
    """``data`` with field ``slot`` of tensor "b" absent (its vtable entry zeroed)."""
    buf = bytearray(data)
    pos = _tensor_b(buf)._tab.Pos
    vtable = pos - struct.unpack_from("<i", buf, pos)[0]
    struct.pack_into("<H", buf, vtable + 4 + 2 * ((slot - 4) // 2), 0)
    return bytes(buf)


def _shortened(data: bytes, slot: int, length: int) -> bytes:
    """``data`` with vector field ``slot`` of tensor "b" claiming only ``length`` bytes."""
    buf = bytearray(data)
    tab = _tensor_b(buf)._tab
    struct.pack_into("<I", buf, tab.Vector(tab.Offset(slot)) - 4, length)
    return bytes(buf)


#: Broken constants (TosaTensor slots: Data 10, ScaleData 24) -> (error, message).
BROKEN_CONSTANTS = {
    "no scale data": (lambda d: _without_field(d, 24), TosaValidationError, "constant values without scale data"),
    "no values": (lambda d: _without_field(d, 10), TosaValidationError, "scale data without constant values"),
    "short scale data": (lambda d: _shortened(d, 24, 3), TosaFormatError,
                         r"tensor 'b': constant data of a FP8UE8M0 tensor of shape \[1, 3, 2\] has 3 bytes, needs 6"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN_CONSTANTS))
def test_broken_block_scaled_constants_are_rejected(kind, tmp_path):
    """A constant block-scaled B whose values or scales are missing or short: a clear error naming
    the tensor here; the reference model does not run such a graph either."""
    breaks, error, message = BROKEN_CONSTANTS[kind]
    dt = block_scaled_name("FP8E4M3")
    b = random_block_scaled(np.random.default_rng(6), (1, 3, 64), "FP8E4M3")
    data = breaks(to_flatbuffer(_matmul_t_graph("FP32", dt, "FP32", 1, 2, 3, 64, 1, b_const=b)))
    with pytest.raises(error, match=message):
        tosa_verify.load(data)
    a = np.ones((1, 2, 64), np.float32)
    assert _reference_exit_code(data, [a], ["FP32"], tmp_path, names=("a",)) not in (0, 1)
