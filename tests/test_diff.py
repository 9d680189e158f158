"""tosa_verify.diff: operator-by-operator diffs, repros, random inputs and the CLI entry."""

from __future__ import annotations

import copy
import json
import subprocess

import numpy as np
import pytest
from fuzz.strategies import Builder, RandomDraw, b_conv, b_pool, b_rescale

import tosa_verify
from tosa_verify import reference
from tosa_verify.diff import diff, diff_main, extract_operator, random_inputs, run_repro
from tosa_verify.errors import TosaValidationError
from tosa_verify.graph import Block, Graph, Region, Tensor
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.writer import to_flatbuffer


def _quantized_net(seed: int = 3):
    """int8 input -> CONV2D (int32) -> RESCALE (int8) -> MAX_POOL2D -> RESCALE (int16)."""
    b = Builder(np.random.default_rng(seed))
    d = RandomDraw(seed)
    x = b.input((1, 6, 6, 3), "INT8")
    y = b_conv(d, b, x, depthwise=False)
    z = b_rescale(d, b, y, out_dtype="INT8")
    w = b_pool(d, b, z, avg=False)
    out = b_rescale(d, b, w, out_dtype="INT16")
    return b.finish([out])


def _rescale_indices(graph: Graph) -> list[int]:
    return [i for i, op in enumerate(graph.main.operators) if op.op == "RESCALE"]


def _with_multiplier_changed(graph: Graph, inputs, which: int = 0) -> tuple[Graph, int]:
    """A copy of ``graph`` with one RESCALE multiplier changed so that its output changes."""
    index = _rescale_indices(graph)[which]
    op = graph.main.operators[index]
    before = tosa_verify.run(graph, inputs, capture=True).tensors[op.outputs[0]]
    m = int(graph.main.tensors[op.inputs[1]].data[0])
    limit = (1 << 31) - 1 if graph.main.tensors[op.inputs[1]].dtype == "INT32" else (1 << 15) - 1
    for candidate in (m // 2 + 1, m // 8 + 1, min(2 * m + 1, limit), limit, 1):
        changed = copy.deepcopy(graph)
        mult = changed.main.tensors[op.inputs[1]]
        mult.data = mult.data.copy()
        mult.data[0] = candidate
        after = tosa_verify.run(changed, inputs, capture=True).tensors[op.outputs[0]]
        if not np.array_equal(before, after):
            return changed, index
    raise AssertionError("no multiplier change alters this RESCALE's output")


def test_changed_rescale_multiplier_is_the_first_divergence_and_the_repro_reproduces(tmp_path):
    case = _quantized_net()
    original = tosa_verify.load(case.data)
    changed, index = _with_multiplier_changed(original, case.inputs)

    report = diff(changed, case.inputs, against=original)
    first = report.first_divergence
    assert first is not None and first.op == "RESCALE" and first.index == index
    assert not report.ok
    # every operator before it agrees exactly
    assert all(op.status == "exact" for op in report.ops if op.index < index)
    # attributes: the const operands of RESCALE with both values, and the plain attributes
    attrs = first.attributes
    assert attrs["multiplier"] == [int(changed.main.tensors[changed.main.operators[index].inputs[1]].data[0])]
    assert attrs["against"]["multiplier"] == [
        int(original.main.tensors[original.main.operators[index].inputs[1]].data[0])
    ]
    for key in ("shift", "input_zp", "output_zp", "rounding_mode", "per_channel", "scale32"):
        assert key in attrs
    verdict = first.outputs[0].verdict
    assert verdict.status == "mismatch" and verdict.worst_index is not None
    mult_name = changed.main.operators[index].inputs[1]
    assert mult_name in report.constant_differences

    text = report.format_table()
    assert "first divergence: operator" in text and "RESCALE" in text and "multiplier" in text
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["first_divergence"]["op"] == "RESCALE"
    assert data["first_divergence"]["worst"]["index"] == list(verdict.worst_index)

    out = report.write_repro(tmp_path / "repro")
    repro = tosa_verify.load(out / "repro.tosa")
    assert [op.op for op in repro.main.operators if op.op != "CONST"] == ["RESCALE"]
    assert (out / "against.tosa").exists()
    manifest = json.loads((out / "repro.json").read_text())
    assert manifest["reproduces"] is True and manifest["op"] == "RESCALE"
    # re-running the repro with both executions shows the same mismatch
    verdicts = run_repro(out)
    assert [v.status for v in verdicts] == ["mismatch"]
    actual, expected = np.load(out / "actual-0.npy"), np.load(out / "expected-0.npy")
    np.testing.assert_array_equal(actual, report.actual[first.outputs[0].tensor])
    np.testing.assert_array_equal(expected, report.expected[first.outputs[0].other])


def test_same_graph_against_the_reference_model_agrees():
    case = _quantized_net(5)
    report = diff(case.data, case.inputs)
    assert report.ok and report.first_divergence is None and report.error == ""
    assert {t.status for op in report.ops for t in op.outputs} == {"exact"}
    assert "operators agree" in report.format_table()
    assert report.against == "reference model"


def test_interpreter_bug_is_found_against_the_reference(tmp_path, monkeypatch):
    case = _quantized_net(7)
    graph = tosa_verify.load(case.data)
    real = REGISTRY["MAX_POOL2D"]

    def buggy(call):  # off by one on the first element
        (out,) = real(call)
        out = out.copy()
        out.reshape(-1)[0] = np.int8(out.reshape(-1)[0] ^ 1)
        return [out]

    monkeypatch.setitem(REGISTRY, "MAX_POOL2D", buggy)
    report = diff(graph, case.inputs)
    first = report.first_divergence
    assert first is not None and first.op == "MAX_POOL2D"
    v = first.outputs[0].verdict
    assert v.mismatched == 1 and v.first_mismatch == (0, 0, 0, 0) and v.max_lsb_error == 1
    out = report.write_repro(tmp_path)
    assert not (out / "against.tosa").exists()
    assert [v.status for v in run_repro(out)] == ["mismatch"]  # still buggy: reproduces
    desc = json.loads((out / "desc.json").read_text())
    proc = subprocess.run(
        [reference.reference_binary(), "--test_desc", str(out / "desc.json"), "--output_dir", str(out)],
        capture_output=True, text=True, cwd=out, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    np.testing.assert_array_equal(np.load(out / desc["ofm_file"][0]), np.load(out / "expected-0.npy"))
    monkeypatch.setitem(REGISTRY, "MAX_POOL2D", real)
    assert [v.status for v in run_repro(out)] == ["exact"]  # fixed: agrees


def test_interpreter_error_is_reported_at_its_operator(monkeypatch):
    case = _quantized_net(2)

    def broken(call):
        raise TosaValidationError("synthetic failure", op_index=call.index, op=call.op)

    monkeypatch.setitem(REGISTRY, "MAX_POOL2D", broken)
    report = diff(case.data, case.inputs)
    first = report.first_divergence
    assert first is not None and first.op == "MAX_POOL2D" and "synthetic failure" in first.error
    assert "ERROR" in report.format_table()


def _renamed(graph: Graph, prefix: str) -> Graph:
    """A copy whose tensors are all renamed; operators keep their locations."""
    g = copy.deepcopy(graph)
    block = g.main
    rename = {n: prefix + n for n in [*block.tensors, *block.shapes]}
    block.tensors = {rename[n]: Tensor(rename[n], t.shape, t.dtype, t.data) for n, t in block.tensors.items()}
    block.shapes = {rename[n]: Tensor(rename[n], t.shape, t.dtype, t.data) for n, t in block.shapes.items()}
    block.inputs = [rename[n] for n in block.inputs]
    block.outputs = [rename[n] for n in block.outputs]
    for op in block.operators:
        op.inputs = [rename[n] for n in op.inputs]
        op.outputs = [rename[n] for n in op.outputs]
    return g


def test_matching_by_location_and_by_explicit_provenance():
    case = _quantized_net(4)
    graph = tosa_verify.load(case.data)
    for i, op in enumerate(graph.main.operators):
        op.location = f"node_{i}"
    other = _renamed(graph, "o_")
    report = diff(graph, case.inputs, against=other, provenance={k: "o_" + k for k in case.inputs})
    statuses = [t for op in report.ops for t in op.outputs]
    assert statuses and all(t.status == "exact" for t in statuses)
    assert {t.matched_by for t in statuses} == {"location"}

    changed, index = _with_multiplier_changed(graph, case.inputs)
    report = diff(changed, case.inputs, against=other, provenance={k: "o_" + k for k in case.inputs})
    assert report.first_divergence.index == index

    plain = tosa_verify.load(case.data)  # no locations: explicit mapping only
    mapping = {n: "o_" + n for n in plain.main.tensors}
    other2 = _renamed(plain, "o_")
    report = diff(plain, case.inputs, against=other2, provenance=mapping)
    matched = [t for op in report.ops for t in op.outputs]
    assert all(t.matched_by == "provenance" and t.status == "exact" for t in matched)


def test_extract_operator_keeps_consts_and_turns_other_inputs_into_graph_inputs():
    case = _quantized_net(1)
    graph = tosa_verify.load(case.data)
    index = _rescale_indices(graph)[0]
    one = extract_operator(graph, index)
    op = graph.main.operators[index]
    assert one.main.inputs == [op.inputs[0]]
    assert one.main.outputs == op.outputs
    assert [o.op for o in one.main.operators] == ["CONST"] * 4 + ["RESCALE"]
    value = tosa_verify.run(case.data, case.inputs, capture=True).tensors[op.inputs[0]]
    np.testing.assert_array_equal(
        tosa_verify.run(to_flatbuffer(one), [value])[0],
        tosa_verify.run(case.data, case.inputs, capture=True).tensors[op.outputs[0]],
    )


def test_random_inputs_dtypes_ranges_and_seed():
    tensors = {
        "a": Tensor("a", (50,), "INT8"), "b": Tensor("b", (50,), "INT16"), "c": Tensor("c", (5,), "BF16"),
        "d": Tensor("d", (30,), "INT4"), "e": Tensor("e", (4,), "BOOL"), "f": Tensor("f", (3,), "FP32"),
    }
    g = Graph((1, 0, 0, False), [Region("main", [Block("main", [], tensors, list(tensors), [])])])
    r1, r2, r3 = random_inputs(g, 1), random_inputs(g, 1), random_inputs(g, 2)
    assert {k: v.dtype for k, v in r1.items()} == {
        "a": np.int8, "b": np.int16, "c": np.dtype("V2"), "d": np.int8, "e": np.bool_, "f": np.float32,
    }
    assert all(np.array_equal(r1[k].view(np.uint8), r2[k].view(np.uint8)) for k in r1)
    assert not np.array_equal(r1["a"], r3["a"])
    assert r1["d"].min() >= -7 and r1["d"].max() <= 7  # int4_t excludes -8
    assert r1["a"].min() < -64 and r1["a"].max() > 64  # the full int8 range is used


def test_diff_main_exit_codes_and_outputs(tmp_path, capsys):
    case = _quantized_net(3)
    good = tmp_path / "good.tosa"
    good.write_bytes(case.data)
    changed, _ = _with_multiplier_changed(tosa_verify.load(case.data), case.inputs)
    bad = tmp_path / "bad.tosa"
    bad.write_bytes(to_flatbuffer(changed))
    for i, value in enumerate(case.inputs.values()):
        np.save(tmp_path / f"in{i}.npy", value)

    assert diff_main([str(good), "--seed", "3"]) == 0
    assert "operators agree" in capsys.readouterr().out

    args = [str(bad), "--against", str(good), "--input", str(tmp_path / "in0.npy"),
            "--json", str(tmp_path / "r.json"), "--repro-dir", str(tmp_path / "repro")]
    assert diff_main(args) == 1
    printed = capsys.readouterr().out
    assert "first divergence" in printed and "repro written" in printed
    assert json.loads((tmp_path / "r.json").read_text())["first_divergence"]["op"] == "RESCALE"
    assert [v.status for v in run_repro(tmp_path / "repro")] == ["mismatch"]

    name = next(iter(case.inputs))
    assert diff_main([str(good), "--input", f"{name}={tmp_path / 'in0.npy'}"]) == 0
    capsys.readouterr()
    (tmp_path / "junk.tosa").write_bytes(b"not a graph at all")
    assert diff_main([str(tmp_path / "junk.tosa")]) == 2
    assert "error" in capsys.readouterr().err
    assert diff_main([str(good), "--input", str(tmp_path / "missing.npy")]) == 2


def test_float_graph_precise_diff_uses_the_verifier():
    b = Builder(np.random.default_rng(11))
    x = b.input((1, 4, 12), "FP32")
    w = b.input((1, 12, 3), "FP32")
    z1, z2 = b.const(np.array([0.0]), "FP32"), b.const(np.array([0.0]), "FP32")
    y = b.op("MATMUL", [x, w, z1, z2], (1, 4, 3), "FP32")
    t = b.op("TANH", [y], (1, 4, 3), "FP32")
    case = b.finish([t])
    fast = diff(case.data, case.inputs)
    assert fast.ok, fast.format_table()
    precise = diff(case.data, case.inputs, precise=True)
    assert precise.ok, precise.format_table()
    methods = {t.verdict.method for op in precise.ops for t in op.outputs}
    assert methods <= {"verifier", "exact"} and "verifier" in methods


def test_unknown_other_graph_inputs_are_reported():
    case = _quantized_net(1)
    other = _renamed(tosa_verify.load(case.data), "zz_")
    with pytest.raises(tosa_verify.TosaInputError):
        diff(case.data, case.inputs, against=other)


def test_write_repro_without_divergence_needs_an_operator(tmp_path):
    case = _quantized_net(8)
    report = diff(case.data, case.inputs)
    with pytest.raises(ValueError):
        report.write_repro(tmp_path)
    index = _rescale_indices(report.graph)[0]
    out = report.write_repro(tmp_path, op=index)
    assert [v.status for v in run_repro(out)] == ["exact"]
    assert json.loads((out / "repro.json").read_text())["reproduces"] is False


def test_operators_in_report_skip_constants():
    case = _quantized_net(9)
    report = diff(case.data, case.inputs)
    assert "CONST" not in {op.op for op in report.ops}
    graph = tosa_verify.load(case.data)
    assert [op.index for op in report.ops] == [
        i for i, op in enumerate(graph.main.operators) if op.op not in ("CONST", "CONST_SHAPE")
    ]


def test_operator_location_is_reported():
    case = _quantized_net(10)
    graph = tosa_verify.load(case.data)
    for i, op in enumerate(graph.main.operators):
        op.location = f"torch_node_{i}"
    report = diff(graph, case.inputs)
    assert all(op.location.startswith("torch_node_") for op in report.ops)


# --------------------------------------------------------------------------- local FP verdicts


def _float_chain(add_const: float = 0.5, seed: int = 11):
    """FP32: MATMUL -> RESHAPE -> ADD (const) -> MUL (const) -> TANH.

    The same ``seed`` gives the same tensor names and inputs, so two chains differing only in
    ``add_const`` can be diffed against each other.
    """
    b = Builder(np.random.default_rng(seed))
    x = b.input((1, 8, 32), "FP32")
    w = b.input((1, 32, 6), "FP32")
    z1, z2 = b.const(np.array([0.0]), "FP32"), b.const(np.array([0.0]), "FP32")
    m = b.op("MATMUL", [x, w, z1, z2], (1, 8, 6), "FP32")
    r = b.op("RESHAPE", [m, b.shape_const((8, 6))], (8, 6), "FP32")
    a = b.op("ADD", [r, b.const(np.full((1, 6), add_const), "FP32")], (8, 6), "FP32")
    s = b.op("MUL", [a, b.const(np.full((1, 6), 0.3), "FP32"), b.const(np.array([0], np.int8), "INT8")],
             (8, 6), "FP32")
    t = b.op("TANH", [s], (8, 6), "FP32")
    return b.finish([t])


def _by_op(report) -> dict:
    return {op.op: op for op in report.ops}


def test_precise_fp_rounding_differences_are_inherited_not_mismatches():
    case = _float_chain()
    report = diff(case.data, case.inputs, precise=True)
    assert report.first_divergence is None and report.ok, report.format_table()
    ops = _by_op(report)
    matmul, reshape = ops["MATMUL"].outputs[0], ops["RESHAPE"].outputs[0]
    # the fp32 MATMUL differs from the fp64 reference, within its dot-product bound
    assert matmul.status == "within_compliance" and matmul.local.method == "verifier"
    # RESHAPE is EXACT: globally it differs (it moved the MATMUL's rounding along) ...
    assert reshape.verdict.status == "mismatch" and not reshape.inputs_identical
    # ... but applied to our own input it is bit-exact: the difference is inherited
    assert reshape.local.status == "exact" and reshape.status == "inherited" and reshape.inherited
    assert not ops["RESHAPE"].diverges
    assert {op.status for op in report.ops} <= {"exact", "within_compliance", "inherited"}
    assert all(t.local is not None for op in report.ops for t in op.outputs if t.verdict.status != "exact")
    text = report.format_table()
    assert "inherited" in text and "local" in text and "operators agree on their own inputs" in text
    data = json.loads(report.to_json())
    rows = {op["op"]: op for op in data["ops"]}
    assert rows["RESHAPE"]["status"] == "inherited" and rows["RESHAPE"]["outputs"][0]["inherited"] is True
    assert rows["RESHAPE"]["outputs"][0]["local"]["status"] == "exact"
    assert data["counts"].get("mismatch", 0) == 0 and data["first_divergence"] is None


def test_fp_difference_of_a_compliant_op_propagates_as_inherited(monkeypatch):
    """Non-precise mode: an interpreter MATMUL one ULP off (allowed) is not blamed downstream."""
    case = _float_chain(seed=12)
    real = REGISTRY["MATMUL"]

    def one_ulp_up(call):
        (out,) = real(call)
        return [np.nextafter(out, np.float32(np.inf)).astype(out.dtype)]

    monkeypatch.setitem(REGISTRY, "MATMUL", one_ulp_up)
    report = diff(case.data, case.inputs)
    assert report.first_divergence is None and report.ok, report.format_table()
    ops = _by_op(report)
    assert ops["MATMUL"].status == "within_compliance"
    reshape = ops["RESHAPE"].outputs[0]
    assert reshape.verdict.status == "mismatch" and reshape.status == "inherited"
    assert reshape.local.status == "exact"
    assert all(op.status != "mismatch" for op in report.ops)


def test_fp_op_outside_its_bound_is_the_first_divergence_despite_upstream_differences(tmp_path, monkeypatch):
    case = _float_chain(seed=13)
    real = REGISTRY["ADD"]

    def off_by_a_permille(call):  # far outside ADD's 0.5 ULP
        (out,) = real(call)
        return [(out * np.float32(1.001)).astype(out.dtype)]

    monkeypatch.setitem(REGISTRY, "ADD", off_by_a_permille)
    report = diff(case.data, case.inputs, precise=True)
    first = report.first_divergence
    assert first is not None and first.op == "ADD", report.format_table()
    assert not report.ok
    out = first.outputs[0]
    assert out.status == "mismatch" and out.local.status == "mismatch" and out.local.method == "verifier"
    assert not out.inputs_identical  # its input already carried the MATMUL's rounding
    ops = _by_op(report)
    assert ops["RESHAPE"].status == "inherited"
    # downstream operators inherit the error but are themselves compliant
    assert ops["MUL"].status == "inherited" and ops["TANH"].status in ("inherited", "within_compliance")
    assert [op.op for op in report.ops if op.diverges] == ["ADD"]
    text = report.format_table()
    assert "first divergence: operator" in text and "local check: mismatch" in text
    worst = json.loads(report.to_json())["first_divergence"]["worst"]
    assert worst["check"] == "local" and worst["index"] is not None
    repro = report.write_repro(tmp_path / "repro")
    assert json.loads((repro / "repro.json").read_text())["reproduces"] is True
    assert [v.status for v in run_repro(repro)] == ["mismatch"]  # still wrong
    monkeypatch.setitem(REGISTRY, "ADD", real)
    assert [v.status for v in run_repro(repro)] == ["within_compliance"]  # fixed


def test_fp_graphs_differing_in_an_add_constant_name_that_add():
    mine, theirs = _float_chain(0.5, seed=14), _float_chain(3.0, seed=14)
    report = diff(mine.data, mine.inputs, against=theirs.data)
    first = report.first_divergence
    assert first is not None and first.op == "ADD", report.format_table()
    assert first.outputs[0].local.status == "mismatch"
    assert first.outputs[0].inputs_identical  # the changed constant is the operator's own
    ops = _by_op(report)
    assert ops["MATMUL"].status == ops["RESHAPE"].status == "exact"
    # after the ADD both graphs compute the same thing on different values: inherited
    assert ops["MUL"].outputs[0].verdict.status == "mismatch" and ops["MUL"].status == "inherited"
    assert ops["TANH"].status == "inherited"
    assert [op.op for op in report.ops if op.diverges] == ["ADD"]
    assert len(report.constant_differences) == 1
    assert report.local_inputs  # the other graph's operators were fed our values


def test_integer_differences_downstream_are_mismatches_but_not_the_divergence():
    case = _quantized_net(3)
    original = tosa_verify.load(case.data)
    changed, index = _with_multiplier_changed(original, case.inputs)
    report = diff(changed, case.inputs, against=original)
    assert report.first_divergence.index == index
    assert report.first_divergence.outputs[0].inputs_identical
    later = [op for op in report.ops if op.index > index and op.outputs[0].verdict.status != "exact"]
    assert later, "the change should reach a later operator"
    for op in later:  # never "inherited" for integers: still reported as mismatches ...
        t = op.outputs[0]
        assert t.status == "mismatch" and not t.inherited and not t.inputs_identical
        # ... but re-run on our inputs they are exact, so they are not divergences
        assert t.local is not None and t.local.status == "exact" and not op.diverges


def _reduce_product_of_overflows():
    """REDUCE_PRODUCT over rows whose fp32 product overflows on the way (1e30 * 1e30 * 0,
    inf * 0 * 1): the reference and the interpreter may differ there, both within compliance."""
    tensors = {"x": Tensor("x", (3, 3), "FP32"), "y": Tensor("y", (3, 1), "FP32")}
    op = tosa_verify.graph.Operator("REDUCE_PRODUCT", {"axis": 1}, ["x"], ["y"])
    graph = Graph((1, 0, 0, False), [Region("main", [Block("main", [op], tensors, ["x"], ["y"])])])
    x = np.array([[1e30, 1e30, 0], [np.inf, 0, 1], [1e20, 1e20, 1e-20]], np.float32)
    return graph, x


def test_an_operator_fed_only_by_graph_inputs_inherits_nothing():
    graph, x = _reduce_product_of_overflows()
    report = diff(graph, [x])
    (out,) = report.ops[0].outputs
    assert out.inputs_identical and out.local is not None
    assert out.status == out.local.status == "within_compliance" and not out.inherited, report.format_table()
    assert "inherited" not in report.format_table()


def test_a_reference_model_crash_is_one_error_line_on_stderr(tmp_path, capsys):
    """The SSA violation the reference model aborts on (our interpreter refuses it too): the
    table on stdout, the reference model's text on one line on stderr, exit 2."""
    tensors = {n: Tensor(n, (2, 3), "INT32") for n in ("x", "y")}
    ops = [tosa_verify.graph.Operator("ADD", {}, ["x", "x"], ["y"]),
           tosa_verify.graph.Operator("IDENTITY", {}, ["x"], ["y"])]
    path = tmp_path / "ssa.tosa"
    path.write_bytes(to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, ["x"], ["y"])])])))
    assert diff_main([str(path), "--json", str(tmp_path / "r.json")]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("tosa-verify diff: error: reference model: ") and err.count("\n") == 1, err
    assert len(err) < 300  # (trimmed)
    error_lines = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(error_lines) == 1 and "setProducer" in error_lines[0]
    assert "\n" in json.loads((tmp_path / "r.json").read_text())["error"]  # the full text is kept there
