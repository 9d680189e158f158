"""``Tensor.tile`` (fewer, as many and more reps than dims), ``F.adaptive_avg_pool3d`` /
``F.adaptive_max_pool3d`` (uniform windows, uneven windows, outputs larger than the input,
batchless inputs) and ``torch.isclose`` in INT, lowered whole in FP, INT8 and INT16 by the
decompositions of ``lowering/passes/decompositions/`` (``shape.tile``,
``spatial.adaptive_avg_pool3d``, ``bags_pools.adaptive_max_pool3d``, ``compare_count.isclose``).

FP is checked against PyTorch within 1e-5 (tile and max pools move values; the average pools
sum in another order). INT is checked against the fake-quant model within one output
quantization step (the max pools and tile exactly: they move quantized values unchanged);
isclose's boolean exactly against the fake-quant model, and exactly against PyTorch's isclose
of the dequantized inputs on inputs whose decision is far (many quantization steps) from the
tolerance boundary.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int, max_step_error

import lowering
from lowering.quantizer import QuantConfig

torch.set_num_threads(1)

qd = torch.ops.quantized_decomposed

FP_TOL = 1e-5
#: quantization name -> the ``quantization`` argument of ``lowering.lower``
QUANT = {"int8": None, "int16": QuantConfig.int16()}


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _targets(lm) -> set[str]:
    return set(lm.op_counts)


# --------------------------------------------------------------------------- tile

X3 = _x(2, 3, 4, seed=1)

#: name -> (fn, inputs)
TILES = {
    "fewer_reps": (lambda a: a.tile((2,)), (X3,)),
    "more_reps": (lambda a: a.tile((2, 1, 1, 1, 1)), (X3,)),
    "as_many_reps": (lambda a: a.tile((1, 2, 3)), (X3,)),
    "two_of_three": (lambda a: a.tile((3, 1)), (X3,)),
    "more_reps_repeating": (lambda a: a.tile((2, 1, 2, 1)), (X3,)),
    "torch_tile_then_add": (lambda a: torch.tile(a, (2, 2)) * 2.0 + 1.0, (X3,)),
    "vector": (lambda a: a.tile((3, 2)), (_x(5, seed=2),)),
}


@pytest.mark.parametrize("name", sorted(TILES))
def test_tile_fp(name):
    fn, inputs = TILES[name]
    lm = check_fp(Fn(fn), inputs, atol=FP_TOL, rtol=FP_TOL)
    assert lm.cpu_nodes == []
    assert "TILE" in _targets(lm)


@pytest.mark.parametrize("quant", sorted(QUANT))
@pytest.mark.parametrize("name", sorted(TILES))
def test_tile_int(name, quant):
    fn, inputs = TILES[name]
    lm = check_int(Fn(fn), inputs, quantization=QUANT[quant], max_steps=1.0)
    assert lm.cpu_nodes == []
    assert "TILE" in _targets(lm)
    if name != "torch_tile_then_add":  # a TILE alone moves the quantized values unchanged
        assert max_step_error(lm, inputs) == 0
    # and the values are the tiled fake-quant inputs
    qp = lm.input_qparams[0]
    fq = qd.dequantize_per_tensor(qd.quantize_per_tensor(inputs[0], qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype),
                                  qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
    if name != "torch_tile_then_add":
        torch.testing.assert_close(lm.run(*inputs)[0], fn(fq), atol=0, rtol=0)


# --------------------------------------------------------------------------- adaptive pools 3d

V = _x(1, 2, 4, 6, 5, seed=3)

#: name -> (output size, input)
POOLS3D = {
    "uniform": ((2, 3, 1), V),                  # the brief's case: kernel = stride = (2, 2, 5)
    "uniform_keep_depth": ((4, 2, 5), V),
    "uniform_none": ((None, 3, 1), V),
    "global": ((1, 1, 1), V),
    "global_depth_hw_uneven": ((1, 4, 3), V),
    "uneven_all": ((3, 4, 2), V),
    "uneven_depth_only": ((3, 3, 5), V),
    "uneven_hw_depth_even": ((2, 4, 3), V),
    "larger_than_input": ((5, 7, 6), V),
    "batch_two_uneven": ((3, 4, 2), _x(2, 3, 5, 4, 7, seed=4)),
    "batchless_uniform": ((2, 3, 1), _x(2, 4, 6, 5, seed=5)),
    "batchless_uneven": ((3, 4, 2), _x(2, 4, 6, 5, seed=6)),
}

POOL_FNS = {
    "avg": lambda size: (lambda a: F.adaptive_avg_pool3d(a, size)),
    "max": lambda size: (lambda a: F.adaptive_max_pool3d(a, size)),
    "max_module": lambda size: torch.nn.AdaptiveMaxPool3d(size, return_indices=False),
}


def _pool_model(kind, size):
    m = POOL_FNS[kind](size)
    return m if isinstance(m, torch.nn.Module) else Fn(m)


@pytest.mark.parametrize("kind", sorted(POOL_FNS))
@pytest.mark.parametrize("name", sorted(POOLS3D))
def test_adaptive_pool3d_fp(name, kind):
    size, v = POOLS3D[name]
    lm = check_fp(_pool_model(kind, size), (v,), atol=FP_TOL, rtol=FP_TOL)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("quant", sorted(QUANT))
@pytest.mark.parametrize("kind", sorted(POOL_FNS))
@pytest.mark.parametrize("name", sorted(POOLS3D))
def test_adaptive_pool3d_int(name, kind, quant):
    size, v = POOLS3D[name]
    lm = check_int(_pool_model(kind, size), (v,), quantization=QUANT[quant], max_steps=1.0)
    assert lm.cpu_nodes == []
    if kind != "avg":  # gathers and maxima move quantized values unchanged
        assert max_step_error(lm, (v,)) == 0


def test_adaptive_max_pool3d_matches_the_max_of_the_dequantized_input():
    """INT8 uneven windows: the lowered max pool is PyTorch's max pool of the dequantized input."""
    size, v = POOLS3D["uneven_all"]
    lm = check_int(_pool_model("max", size), (v,))
    qp = lm.input_qparams[0]
    fq = qd.dequantize_per_tensor(qd.quantize_per_tensor(v, qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype),
                                  qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
    torch.testing.assert_close(lm.run(v)[0], F.adaptive_max_pool3d(fq, size), atol=0, rtol=0)


def test_uniform_adaptive_pool3d_is_a_plain_pool():
    """Uniform windows: one AVG_POOL2D / MAX_POOL2D per pooled axis group, no SLICE or GATHER."""
    avg = lowering.lower(_pool_model("avg", (2, 3, 1)), (V,), profile="FP")
    assert avg.cpu_nodes == [] and "SLICE" not in avg.op_counts and avg.op_counts.get("AVG_POOL2D") == 2
    mx = lowering.lower(_pool_model("max", (2, 3, 1)), (V,), profile="FP")
    assert mx.cpu_nodes == [] and "GATHER" not in mx.op_counts and mx.op_counts.get("MAX_POOL2D") == 2


def test_adaptive_max_pool3d_indices_stay_on_the_cpu():
    """return_indices=True with the indices used: not claimed (the values alone are)."""
    m = Fn(lambda a: F.adaptive_max_pool3d(a, (2, 3, 1), return_indices=True)[1])
    lm = lowering.lower(m.eval(), (V,), profile="FP")
    assert [c.target for c in lm.cpu_nodes][:1] == ["aten.adaptive_max_pool3d.default"]
    assert torch.equal(lm.run(V)[0], m(V))


# --------------------------------------------------------------------------- isclose in INT


def _isclose_inputs(shape, atol, rtol, seed, margin=0.4):
    """``(x, y)`` whose isclose decision is ``margin`` x the tolerance away from its boundary:
    ``x - y`` is ``(1 - margin)`` or ``(1 + margin)`` x ``atol + rtol * |y|`` (or more), signs
    mixed."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.rand(shape, generator=gen) * 4.0 - 2.0
    allowed = atol + rtol * y.abs()
    factor = torch.tensor([0.0, 1.0 - margin, 0.3, 1.0 + margin, 2.0, 3.0])
    f = factor[torch.randint(len(factor), shape, generator=gen)]
    sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
    return y + sign * f * allowed, y


def _fake_quant(t, qp):
    return qd.dequantize_per_tensor(qd.quantize_per_tensor(t, qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype),
                                    qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)


#: name -> (atol, rtol, x shape, y shape)
ISCLOSE = {
    "brief": (0.3, 0.1, (4, 6), (4, 6)),
    "atol_only": (0.25, 0.0, (3, 8), (3, 8)),
    "rtol_only": (0.0, 0.3, (3, 8), (3, 8)),
    "broadcast": (0.3, 0.1, (5, 6), (6,)),
}


def _isclose_case(name, seed=7):
    atol, rtol, xs, ys = ISCLOSE[name]
    if xs == ys:
        x, y = _isclose_inputs(xs, atol, rtol, seed)
        return atol, rtol, x, y
    _, y = _isclose_inputs(ys, atol, rtol, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    allowed = atol + rtol * y.abs()
    factor = torch.tensor([0.0, 0.6, 1.4, 2.5])
    f = factor[torch.randint(len(factor), xs, generator=gen)]
    return atol, rtol, y + f * allowed, y


@pytest.mark.parametrize("quant", sorted(QUANT))
@pytest.mark.parametrize("name", sorted(ISCLOSE))
def test_isclose_int(name, quant):
    atol, rtol, x, y = _isclose_case(name)
    model = Fn(lambda a, b: torch.isclose(a, b, atol=atol, rtol=rtol))
    expected = torch.isclose(x, y, atol=atol, rtol=rtol)
    assert 0 < int(expected.sum()) < expected.numel()  # both decisions present
    lm = check_int(model, (x, y), quantization=QUANT[quant], max_steps=0)  # == fake-quant model
    assert lm.cpu_nodes == []
    got = lm.run(x, y)[0]
    assert got.dtype == torch.bool and got.shape == expected.shape
    fx_, fy = (_fake_quant(t, qp) for t, qp in zip((x, y), lm.input_qparams, strict=True))
    # the decisions are far from the boundary: the dequantized inputs decide as the float ones
    assert torch.equal(torch.isclose(fx_, fy, atol=atol, rtol=rtol), expected)
    assert torch.equal(got, expected)


def test_isclose_fp_brief_case():
    atol, rtol, x, y = _isclose_case("brief")
    lm = check_fp(Fn(lambda a, b: torch.isclose(a, b, atol=atol, rtol=rtol)), (x, y))
    assert lm.cpu_nodes == []


def test_isclose_int_mask_feeding_more_work():
    """isclose's mask selecting between inputs (where), in INT8: all of it lowers."""
    atol, rtol, x, y = _isclose_case("brief", seed=9)
    model = Fn(lambda a, b: torch.where(torch.isclose(a, b, atol=atol, rtol=rtol), a, b * 0.5))
    lm = check_int(model, (x, y), max_steps=1.0)
    assert lm.cpu_nodes == []


def test_isclose_int_exact_only_is_an_equality():
    """rtol = atol = 0: ``x == y`` of the quantized inputs."""
    x = torch.tensor([0.0, 1.0, -1.0, 0.5, 2.0, -2.0])
    y = torch.tensor([0.0, 1.0, -0.5, 0.5, -2.0, -2.0])
    lm = check_int(Fn(lambda a, b: torch.isclose(a, b, rtol=0.0, atol=0.0)), (x, y), max_steps=0,
                   calibration=[(x, y)])
    assert lm.cpu_nodes == []
    assert torch.equal(lm.run(x, y)[0], torch.isclose(x, y, rtol=0.0, atol=0.0))
