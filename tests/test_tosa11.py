"""TOSA 1.1 draft support around the operators: MX dtypes, profiles, info, diff/repro, writer.

The operators themselves are checked against tosa-tools' generated cases in tests/conformance;
here every expectation comes from tosa-tools (its serializer's packing, its reference model) or
the spec's extension tables, never from our own output.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from fuzz.strategies import RandomDraw  # tests/ is on sys.path
from fuzz.strategies_11 import build_v11

import tosa_verify
from tosa_verify import reference
from tosa_verify.compare import compare
from tosa_verify.diff import diff, run_repro
from tosa_verify.dtypes import (
    pack_subbyte,
    reference_shape,
    to_reference_form,
    to_working,
    unpack_subbyte,
)
from tosa_verify.errors import TosaFormatError
from tosa_verify.profiles import profiles_and_extensions
from tosa_verify.writer import to_flatbuffer


@pytest.mark.parametrize("dtype", ["FP4E2M1", "FP6E2M3", "FP6E3M2"])
def test_subbyte_packing_matches_the_tosa_serializer(dtype):
    from tosa_serializer.numpy_utils import pack_4bit_array, pack_6bit_array

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 16 if dtype == "FP4E2M1" else 64, (3, 64)).astype(np.uint8)
    theirs = (pack_4bit_array if dtype == "FP4E2M1" else pack_6bit_array)(codes)
    ml = {"FP4E2M1": ml_dtypes.float4_e2m1fn, "FP6E2M3": ml_dtypes.float6_e2m3fn, "FP6E3M2": ml_dtypes.float6_e3m2fn}
    ours = to_reference_form(codes.view(ml[dtype]), dtype)
    assert ours.shape == theirs.shape == reference_shape((3, 64), dtype)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(to_working(theirs, dtype).view(np.uint8), codes)
    np.testing.assert_array_equal(unpack_subbyte(pack_subbyte(codes, dtype), dtype, codes.size), codes.ravel())


def test_short_packed_data_is_a_format_error():
    with pytest.raises(TosaFormatError, match="FP6E2M3"):
        unpack_subbyte(np.zeros(2, np.uint8), "FP6E2M3", 4)


def _case(kind: str, seed: int, ops: set[str] | None = None, *, valid: bool = False):
    """The first v11 fuzz graph from ``seed`` on with ``ops`` (and, if asked, one the reference runs)."""
    for s in range(seed, seed + 200):
        case = build_v11(RandomDraw(s), s, kind)
        if ops is not None and not ops <= set(case.ops):
            continue
        if valid:
            try:
                reference.run(case.data, case.inputs)
            except tosa_verify.TosaError:
                continue
        return case
    raise AssertionError(f"no {kind} case with {ops}")


def test_profiles_name_the_11_extensions():
    """Extension names and rules from the 1.1 draft's operator tables (tosa.xml)."""
    conv = tosa_verify.load(_case("MX", 0, {"CONV2D_BLOCK_SCALED"}).data)
    mx_types = {t.dtype for t in conv.main.tensors.values()} & {"FP4E2M1", "FP6E2M3", "FP6E3M2", "MXINT8", "FP8E4M3", "FP8E5M2"}
    expected_mx = {"EXT-MX-INT8" if t == "MXINT8" else f"EXT-MX-{t}" for t in mx_types}
    if any(t.dtype == "BF16" for t in conv.main.tensors.values()):
        expected_mx.add("EXT-BF16")  # CAST_TO_BLOCK_SCALED from bf16 also needs EXT-BF16
    _, ext = profiles_and_extensions(conv)
    assert set(ext) == {"EXT-MX-COMMON", "EXT-MXFP-CONV", *expected_mx}
    shape = tosa_verify.load(_case("SHAPE", 0, {"DIM"}).data)
    assert profiles_and_extensions(shape) == (["PRO-INT"], ["EXT-SHAPE"])


def test_info_reports_a_11_graph(tmp_path, capsys):
    from tosa_verify.cli import main

    path = tmp_path / "g.tosa"
    path.write_bytes(_case("SHAPE", 0, {"DIM"}).data)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1.1.0d" in out and "EXT-SHAPE" in out and "DIM" in out


def test_a_12_graph_is_refused():
    g = tosa_verify.load(_case("MATMUL_T", 0).data)
    g.version = (1, 2, 0, True)
    with pytest.raises(TosaFormatError, match="1.2.0"):
        tosa_verify.load(to_flatbuffer(g))


@pytest.mark.parametrize("kind", ["MX", "SHAPE", "MATMUL_T", "ROW_GATHER", "POOL2D_ADAPTIVE"])
def test_writer_round_trip_runs_like_the_original_in_the_reference(kind):
    case = _case(kind, 10, valid=True)
    again = to_flatbuffer(tosa_verify.load(case.data))
    for a, b in zip(reference.run(case.data, case.inputs), reference.run(again, case.inputs), strict=True):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def test_diff_and_a_one_op_repro_of_a_block_scaled_matmul(tmp_path):
    case = _case("MX", 0, {"MATMUL_T_BLOCK_SCALED"})
    report = diff(case.data, case.inputs, precise=True)
    assert report.ok, report.format_table()
    index = next(i for i, op in enumerate(tosa_verify.load(case.data).main.operators) if op.op == "MATMUL_T_BLOCK_SCALED")
    report.write_repro(tmp_path, op=index)
    verdicts = run_repro(tmp_path)
    assert verdicts and all(v is not None and v.ok for v in verdicts)


def test_compare_reads_packed_fp4_against_the_precise_reference():
    """A packed FP4 result against the reference CLI's precise (unpacked float64) values."""
    values = np.array([[0.5, -1.0, 6.0, 0.0] * 8], np.float64)
    ours = to_reference_form(values.astype(ml_dtypes.float4_e2m1fn), "FP4E2M1")
    assert compare(values, ours, dtype="FP4E2M1", op="RESHAPE_BLOCK_SCALED").status == "exact"
    wrong = values.copy()
    wrong[0, 2] = 4.0
    assert not compare(wrong, ours, dtype="FP4E2M1", op="RESHAPE_BLOCK_SCALED").ok
