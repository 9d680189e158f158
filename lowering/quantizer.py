"""Our PT2E quantizer for TOSA INT: int8 (or int16) per-tensor activations, symmetric
int8 weights (per-channel by default), int32 biases derived from input x weight scale.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace

import torch
import torch.fx as fx
from torchao.quantization.pt2e.fake_quantize import FakeQuantize
from torchao.quantization.pt2e.observer import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
)

from .control_flow import CONTROL_FLOW, is_control_flow, operands
from .graph_utils import get_constant, val
from .observers import (
    SpikeAwareHistogramObserver,
    ZeroSafeMinMaxObserver,
    ZeroSafeMovingAverageMinMaxObserver,
    ZeroSafeMovingAveragePerChannelMinMaxObserver,
    ZeroSafePerChannelMinMaxObserver,
)
from .ops.registry import table_ops
from .passes.base import PassContext
from .passes.fold_batch_norm import transposed_groups
from .passes.fold_qdq import FUSED_ACTIVATIONS
from .pipeline import annotation_passes

aten = torch.ops.aten

#: Post-training observers for activation ranges, by the name ``QuantConfig`` takes.
ACTIVATION_OBSERVERS = {"histogram": SpikeAwareHistogramObserver, "minmax": MinMaxObserver}


@dataclass(frozen=True)
class QuantConfig:
    """How to quantize for the TOSA INT profile.

    Example:
        >>> QuantConfig().activation_dtype
        torch.int8
        >>> QuantConfig.int16().activation_dtype
        torch.int16
        >>> QuantConfig(activation_observer="minmax").activation_observer
        'minmax'

    ``activation_observer`` picks the post-training calibration of activation ranges:
    ``"histogram"`` (default) chooses the range that minimises the L2 quantization error
    over a histogram of the calibration values, so a few outliers do not cost every other
    value its resolution; ``"minmax"`` takes the observed extremes (nothing is ever
    clipped). QAT always uses moving-average min/max fake-quantize.

    ``exact_int16_lookups`` (int16 only): a function whose 513-entry int16 TABLE would be more
    than two output steps off the fake-quant model somewhere in its input range (1/x, rsqrt,
    sqrt and log near 0, a kink or saturation inside one of the TABLE's 128-level segments:
    tens to hundreds of steps) is looked up exactly instead, a GATHER from all 65,536 levels
    (128 KiB of constants each). Off by default: Ethos-U85 runs GATHER, but Vela refuses a
    graph holding one for Ethos-U55 and U65, where the TABLE is native.
    """

    activation_dtype: torch.dtype = torch.int8
    per_channel: bool = True
    symmetric_activations: bool = False
    qat: bool = False
    activation_observer: str = "histogram"
    exact_int16_lookups: bool = False

    def __post_init__(self) -> None:
        if self.activation_observer not in ACTIVATION_OBSERVERS:
            raise ValueError(f"activation_observer must be one of {sorted(ACTIVATION_OBSERVERS)}, "
                             f"not {self.activation_observer!r}")

    @staticmethod
    def int16(per_channel: bool = True, qat: bool = False, activation_observer: str = "histogram",
              exact_lookups: bool = False) -> QuantConfig:
        """int16 activations (symmetric) with int8 weights (``exact_lookups``: see
        ``exact_int16_lookups``)."""
        return QuantConfig(torch.int16, per_channel, True, qat, activation_observer, exact_lookups)

    # -- specs ---------------------------------------------------------------
    def act_spec(self) -> QuantizationSpec:
        if self.activation_dtype == torch.int16:
            qmin, qmax, scheme = -32767, 32767, torch.per_tensor_symmetric
        elif self.symmetric_activations:
            qmin, qmax, scheme = -127, 127, torch.per_tensor_symmetric
        else:
            qmin, qmax, scheme = -128, 127, torch.per_tensor_affine
        obs = MovingAverageMinMaxObserver if self.qat else ACTIVATION_OBSERVERS[self.activation_observer]
        ctr = obs.with_args(eps=2**-20)
        if self.qat:
            ctr = FakeQuantize.with_args(observer=obs, quant_min=qmin, quant_max=qmax,
                                         dtype=self.activation_dtype, qscheme=scheme, eps=2**-20)
        return QuantizationSpec(dtype=self.activation_dtype, observer_or_fake_quant_ctr=ctr,
                                quant_min=qmin, quant_max=qmax, qscheme=scheme)

    def weight_spec(self, ch_axis: int = 0) -> QuantizationSpec:
        # (zero-safe: an all-zero channel keeps a usable scale for its bias, see lowering.observers)
        if self.per_channel:
            obs = ZeroSafeMovingAveragePerChannelMinMaxObserver if self.qat else ZeroSafePerChannelMinMaxObserver
            scheme = torch.per_channel_symmetric
        else:
            obs = ZeroSafeMovingAverageMinMaxObserver if self.qat else ZeroSafeMinMaxObserver
            scheme = torch.per_tensor_symmetric
        ctr = obs.with_args(eps=2**-30)
        if self.qat:
            kw = {"ch_axis": ch_axis} if self.per_channel else {}
            ctr = FakeQuantize.with_args(observer=obs, quant_min=-127, quant_max=127,
                                         dtype=torch.int8, qscheme=scheme, eps=2**-30, **kw)
        return QuantizationSpec(dtype=torch.int8, observer_or_fake_quant_ctr=ctr, quant_min=-127,
                                quant_max=127, qscheme=scheme,
                                ch_axis=ch_axis if self.per_channel else None)


def _share_with_first(ins: dict, operands: list, node: fx.Node, act) -> None:
    """``operands[0]`` of ``node`` observed with ``act``, every other operand sharing its
    quantization. A repeated operand (``cat([x, x])``, ``x == x``, ``where(c, x, x)``) is one
    edge and keeps the first's spec: shared with itself, torchao's union-find recursed without
    end."""
    first = operands[0]
    ins[first] = act
    for a in operands[1:]:
        if a is not first:
            ins[a] = SharedQuantizationSpec((first, node))


def _derive_bias_qparams(obs_or_fqs):
    act, wt = obs_or_fqs
    a_scale, _ = act.calculate_qparams()
    w_scale, _ = wt.calculate_qparams()
    scale = (a_scale.reshape(-1)[0] * w_scale).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


WEIGHTED = {aten.conv2d.default, aten.conv2d.padding, aten.conv1d.default, aten.conv1d.padding,
            aten.linear.default, aten.conv_transpose2d.input, aten.convolution.default,
            aten.conv3d.default, aten.conv3d.padding}
FUSABLE_PRODUCERS = WEIGHTED | {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor}
#: each operand and the output quantized on their own (atan2's int8 form is one 2-D table:
#: lowering.ops.unary.atan2_table)
BINARY = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.matmul.default,
          aten.bmm.default, aten.mm.default, aten.atan2.default}
SHARED_BINARY = {aten.maximum.default, aten.minimum.default}
COMPARE = {aten.eq.Tensor, aten.ne.Tensor, aten.gt.Tensor, aten.ge.Tensor, aten.lt.Tensor,
           aten.le.Tensor}
SHARED = {
    aten.max_pool2d.default, aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default,
    aten.view.default, aten.reshape.default, aten.flatten.using_ints,
    aten.permute.default, aten.transpose.int, aten.t.default, aten.squeeze.dim,
    aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default,
    aten.slice.Tensor, aten.select.int, aten.constant_pad_nd.default, aten.pad.default,
    aten.expand.default, aten.repeat.default, aten.upsample_nearest2d.vec,
    aten.upsample_nearest2d.default, aten.amax.default, aten.amin.default,
    aten.index_select.default, aten.unflatten.int, aten.max_pool1d.default,
    aten.avg_pool1d.default, aten.adaptive_avg_pool1d.default, aten.flip.default,
    aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default,
    aten.relu.default, aten.hardtanh.default, aten.clamp.default, aten.relu6.default,
    aten._unsafe_view.default, aten.view_copy.default, aten.narrow.default,
    aten.expand_copy.default, aten.numpy_T.default, aten._adaptive_avg_pool2d.default,
    aten.gather.default, aten.index.Tensor,
}
# Activations as output-quantized standalone ops (relu & co. are SHARED when not fused
# would waste half the range; annotate them with their own observer instead).
OWN_OUTPUT_ACT = {aten.relu.default, aten.relu_.default, aten.hardtanh.default,
                  aten.hardtanh_.default, aten.clamp.default, aten.relu6.default}
#: one TABLE each in INT: every unary function of the activation / unary visitors
TABLE = set(table_ops())
OWN_OUTPUT = {aten.sum.dim_IntList, aten.sum.default, aten.mean.default, aten.cumsum.default}
# Ops reading a quantized input whose result is not a real value (indices): the input is
# observed (a graph input would otherwise stay float), the output is not.
INPUT_ONLY = {aten.argmax.default, aten.argmin.default}
CAT = {aten.cat.default, aten.stack.default}
WHERE = {aten.where.self}
GATHER_WEIGHT = {aten.embedding.default}
#: x[indices] = values: values (the argument at this position) share the quantization of x
SCATTER = {aten.index_put.default: 2, aten.index_copy.default: 3}


def _is_window_sum(n: fx.Node) -> bool:
    """avg_pool2d with a ``divisor_override`` gets its own observer: its windows' sums over
    the override are no average, their range not the input's (an lp_pool's ``sum(x ** p)``,
    :mod:`lowering.passes.decompositions.lp_pool`); a shared scale clipped them."""
    if n.target != aten.avg_pool2d.default:
        return False
    override = n.args[6] if len(n.args) > 6 else n.kwargs.get("divisor_override")
    return override is not None


def _is_float(n) -> bool:
    """Whether ``n`` is a float32 tensor, the only dtype TosaQuantizer quantizes: float64
    side computations and integer tensors keep their dtype (unknown values count as float)."""
    if not isinstance(n, fx.Node):
        return False
    raw = n.meta.get("tv_val", n.meta.get("val"))
    if raw is not None and not isinstance(raw, torch.Tensor):
        return False  # a python or symbolic number (``x.max().item()``): nothing to observe
    v = val(n)
    return v is None or (isinstance(v, torch.Tensor) and v.dtype == torch.float32)


def _output_is_other_dtype(n: fx.Node) -> bool:
    """A node whose (known) result is a tensor of another dtype than float32 (float64, int,
    bool) gets no output observer."""
    v = val(n)
    return isinstance(v, torch.Tensor) and v.dtype != torch.float32


class TosaQuantizer(Quantizer):
    """PT2E quantizer producing graphs :func:`lowering.lower` turns into TOSA INT.

    Example:
        >>> from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
        >>> m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        >>> x = (torch.randn(2, 4),)
        >>> gm = torch.export.export(m, x).module(check_guards=False)
        >>> p = prepare_pt2e(gm, TosaQuantizer(QuantConfig(), example_inputs=x)); _ = p(*x)
        >>> q = convert_pt2e(p); q(*x).shape
        torch.Size([2, 3])
    """

    def __init__(self, config: QuantConfig | None = None, example_inputs=None):
        super().__init__()
        self.config = config or QuantConfig()
        self.example_inputs = tuple(example_inputs) if example_inputs is not None else ()

    # ------------------------------------------------------------------
    def transform_for_annotation(self, model: fx.GraphModule) -> fx.GraphModule:
        from .graph_utils import propagate_values

        # a control-flow sub-graph carries its own example inputs (lowering.control_flow)
        example = getattr(model, "_tv_example", None)
        if example is None:
            example = self.example_inputs
        known = bool(example) or not any(n.op == "placeholder" for n in model.graph.nodes)
        ctx = PassContext(profile="INT", example_inputs=example)
        if known and any("tv_val" not in n.meta for n in model.graph.nodes
                         if n.op in ("placeholder", "call_function")):
            propagate_values(model, example)
        for p in annotation_passes():
            p(model, ctx, recompile=False)
        _unshare_layer_parameters(model)
        model.recompile()
        if known:
            propagate_values(model, example)
        return model

    def validate(self, model: fx.GraphModule) -> None:
        return None

    # ------------------------------------------------------------------
    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        cfg = self.config
        act = cfg.act_spec()
        table_act = _table_output_spec(cfg, act)
        for n in model.graph.nodes:
            if n.op != "call_function" or "quantization_annotation" in n.meta:
                continue
            t = n.target
            if _output_is_other_dtype(n) and t not in COMPARE and t not in INPUT_ONLY:
                continue  # float64 side computations and integer / bool math stay as they are
            ins: dict = {}
            out = None
            x = n.args[0] if n.args else None
            fused = False
            if t in FUSABLE_PRODUCERS and len(n.users) == 1:
                u = next(iter(n.users))
                fused = u.op == "call_function" and u.target in FUSED_ACTIVATIONS and u.args[0] is n
            if t in WEIGHTED:
                if t == aten.convolution.default and n.args[6]:
                    ch_axis = 1
                else:
                    ch_axis = 1 if t == aten.conv_transpose2d.input else 0
                if not _is_float(x):
                    continue
                w = n.args[1]
                ins[x] = act
                # a grouped transposed conv's weight [Cin, Cout/g, ...] has no axis holding
                # every output channel: its weights are quantized per tensor
                wcfg = replace(cfg, per_channel=False) if (transposed_groups(n) or 1) != 1 else cfg
                ins[w] = wcfg.weight_spec(ch_axis)
                b = n.args[2] if len(n.args) > 2 else None
                if isinstance(b, fx.Node):
                    ins[b] = DerivedQuantizationSpec(
                        derived_from=[(x, n), (w, n)],
                        derive_qparams_fn=_derive_bias_qparams,
                        dtype=torch.int32, quant_min=-(2**31) + 1, quant_max=2**31 - 1,
                        qscheme=torch.per_channel_symmetric if wcfg.per_channel
                        else torch.per_tensor_symmetric,
                        ch_axis=0 if wcfg.per_channel else None,
                    )
                out = None if fused else act
            elif t in BINARY:
                for a in n.args[:2]:
                    if _is_float(a):
                        ins[a] = act
                out = None if fused else act
            elif t in SHARED_BINARY or t in COMPARE or t in WHERE:
                args = [a for a in (n.args[1:3] if t in WHERE else n.args[:2])
                        if isinstance(a, fx.Node) and _is_float(a)]
                if not args:
                    continue
                _share_with_first(ins, args, n, act)
                out = None if t in COMPARE else SharedQuantizationSpec((args[0], n))
            elif t in OWN_OUTPUT_ACT:
                if not _is_float(x):
                    continue
                src_fused = isinstance(x, fx.Node) and x.op == "call_function" and \
                    x.target in FUSABLE_PRODUCERS and len(x.users) == 1
                if not src_fused:
                    ins[x] = act
                out = act
            elif t in SHARED and not _is_window_sum(n):
                if not _is_float(x):
                    continue
                ins[x] = act
                out = SharedQuantizationSpec((x, n))
            elif t in CAT:
                tensors = [a for a in n.args[0] if isinstance(a, fx.Node)]
                if not tensors or not all(_is_float(a) for a in tensors):
                    continue
                _share_with_first(ins, tensors, n, act)
                out = SharedQuantizationSpec((tensors[0], n))
            # (a mean has its own observer: it spans a narrower range than its input, a global
            # average of ReLU outputs a few of the input's levels at a shared scale, 25.6 dB
            # against float where its own gives 42.7; and at a shared scale sum/N lands exactly
            # on rounding ties, where float and TOSA rounding differ. The spatial mean is then
            # exact window sums and one RESCALE, lowering.ops.pool.avg_pool)
            elif t in TABLE or t in OWN_OUTPUT or t == aten.mean.dim or _is_window_sum(n):
                if not _is_float(x):
                    continue
                ins[x] = act
                out = table_act if t in TABLE else act
            elif t in INPUT_ONLY:
                if not _is_float(x):
                    continue
                ins[x] = act
            elif t in SCATTER:
                v = n.args[SCATTER[t]]
                if not _is_float(x) or not isinstance(v, fx.Node) or not _is_float(v):
                    continue
                _share_with_first(ins, [x, v], n, act)
                out = SharedQuantizationSpec((x, n))
            elif t in GATHER_WEIGHT:
                w = n.args[0]
                ins[w] = act
                out = SharedQuantizationSpec((w, n))
            elif t in CONTROL_FLOW:
                # each float value handed to a sub-graph is observed where it leaves the parent
                for a in operands(n):
                    if isinstance(a, fx.Node) and _is_float(a):
                        ins[a] = act
            elif t is operator.getitem:
                if not is_control_flow(x) or not _is_float(n):
                    continue
                out = act  # a result of a sub-graph, observed where the parent reads it
            else:
                continue
            n.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map=ins, output_qspec=out, _annotated=True
            )
        return model


def _unshare_layer_parameters(model: fx.GraphModule) -> None:
    """Give every layer of :data:`WEIGHTED` its own node for the bias it reads.

    A module applied twice (an FPN's output conv on every level) reads the same parameter
    nodes twice; PT2E then quantizes a shared bias once, at the first call's input scale times
    the weight scale, and the second call's int32 bias is off by the ratio of the two input
    scales (12 int8 steps, 3000 int16 steps). With a node per reader each gets its own. (The
    weight stays shared: its quantization does not depend on the input.)

    >>> class Twice(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__(); self.fc = torch.nn.Linear(2, 2)
    ...     def forward(self, a, b):
    ...         return self.fc(a), self.fc(b)
    >>> gm = torch.export.export(Twice(), (torch.ones(1, 2), torch.ones(1, 2))).module(check_guards=False)
    >>> _unshare_layer_parameters(gm)
    >>> sum(n.op == "get_attr" for n in gm.graph.nodes)
    3
    """
    seen: set[fx.Node] = set()
    for n in list(model.graph.nodes):
        if n.op != "call_function" or n.target not in WEIGHTED:
            continue
        p = n.args[2] if len(n.args) > 2 else None
        if not isinstance(p, fx.Node) or p.op != "get_attr":
            continue
        if p in seen:
            with model.graph.inserting_before(n):
                copy = model.graph.get_attr(p.target)
            copy.meta.update(p.meta)
            n.replace_input_with(p, copy)
        else:
            seen.add(p)


def _table_output_spec(cfg: QuantConfig, act: QuantizationSpec) -> QuantizationSpec:
    """The output spec of an op lowered as a TABLE: ``act``, but for int16 activations (post
    training) a min/max observer whatever ``cfg.activation_observer`` says.

    An int16 TABLE interpolates between samples 128 input levels apart; an output range that
    clips fn's values (the histogram observer trims the top of exp, silu, sigmoid, softmax's
    1/sum) puts a saturation kink inside a segment, which the interpolation cannot follow.
    The output's range is fn's over the input's (already chosen) range, so min/max only takes
    what the input's quantization lets through: int16 SQNR against float rose 1-9 dB
    (sigmoid 81.8 -> 90.5, softmax 73.8 -> 81.9, silu 68.6 -> 71.4). It does not remove the
    kink where the symmetric int16 input range reaches past the observed inputs (softmax's
    1/sum below 1, a steep function near 0): those stay tens of steps off the fake-quant
    model (``QuantConfig.exact_int16_lookups``). int8 TABLEs hold every level exactly and
    keep ``act``.

    >>> _table_output_spec(QuantConfig.int16(), QuantConfig.int16().act_spec()).observer_or_fake_quant_ctr.p.func
    <class 'torchao.quantization.pt2e.observer.MinMaxObserver'>
    """
    if cfg.activation_dtype != torch.int16 or cfg.qat or cfg.activation_observer == "minmax":
        return act
    return replace(cfg, activation_observer="minmax").act_spec()


def is_constant_input(gm, node) -> bool:  # pragma: no cover - small helper
    return get_constant(gm, node) is not None
