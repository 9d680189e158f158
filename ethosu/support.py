"""Which TOSA operators Vela will refuse for an Ethos-U target, and why, without compiling.

Vela 5.x compiles every TOSA network with its C++ core (``ethosu.regor``); TOSA has no CPU
fallback, so one unsupported operator fails the whole compilation. Vela's Python
``TosaSupportedOperators`` class belongs to the deprecated legacy core: it works on the graph
built by the legacy TOSA reader, which only reads TOSA 0.80, so it cannot judge TOSA 1.0
graphs. Regor's own checks are not exposed to Python (``regor.tflite_operator_constraints``
covers TFLite only).

What Vela does publish is its TOSA support report (``vela --supported-ops-report``, the
``generate_supported_ops()`` function): the operator table for Ethos-U55/U65, the operators
it does not support, per-operator constraints, and the Ethos-U85 exceptions. This module
runs that report generator, parses the result, and applies the constraints that can be
decided from the graph alone (operator, dtypes, constness, axes, channel counts). Each rule
was checked against real Vela 5.2.0 compilations (see ``tests/test_ethosu_pkg``); documented
constraints that Vela 5.2.0 does not actually enforce (TABLE int16, ARITHMETIC_RIGHT_SHIFT
without rounding, down-casts from int32, pooling strides above 3, REVERSE on int32,
TRANSPOSE_CONV2D kernel sizes) are not flagged.

Two Ethos-U55/U65 rules go beyond the report, because the report's wording does not match what
Vela 5.2.0 compiles: which RESIZE forms it can rebuild from 2x nearest-neighbour upsampling
(:func:`_u55_resize_problems`) and which TRANSPOSE_CONV2D strides and int16 rescales it can map
onto a convolution over a zero-upsampled input (:func:`_u55_transpose_conv_problems`).
Ethos-U85 has a RESIZE unit and decomposes any TRANSPOSE_CONV2D stride: every valid form we
probed compiles there. Other shape-size limits (e.g. dimensions up to 65536) are not checked.
"""

from __future__ import annotations

import contextlib
import functools
import re
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

from ethosu._capture import capture_output
from ethosu.config import check_target, family_of

#: TOSA dtypes inside the PRO-INT profile and its integer extensions (Vela's baseline).
_INT_DTYPES = {"BOOL", "INT4", "INT8", "INT16", "INT32", "INT48", "SHAPE"}
#: Operators that only carry data into the graph.
_STRUCTURAL_OPS = {"CONST", "CONST_SHAPE"}
_CONV_OPS = {"CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"}
#: Operators Vela 5.2.0 compiles for Ethos-U55/U65 although its report's table omits them.
_U55_UNLISTED_BUT_SUPPORTED = {"DEPTHWISE_CONV2D"}
_CONTROL_FLOW_OPS = {"COND_IF", "WHILE_LOOP"}
#: Operators TOSA 1.0 PRO-INT defines on int32 inputs only; Vela's graph validator refuses
#: other input types on every target (a graph-validity error rather than a target limit).
_INT32_ONLY_OPS = {
    "ABS", "ADD", "SUB", "MAXIMUM", "MINIMUM", "INTDIV", "EQUAL", "GREATER", "GREATER_EQUAL",
}

#: Upscale factors Ethos-U55/U65 build a RESIZE from: one to three 2x upsampling passes.
_U55_RESIZE_UPSCALES = (2, 4, 8)
#: TRANSPOSE_CONV2D strides (y, x) Ethos-U55/U65 accept on any input; 1x2 and 2x1 need more.
_U55_TRANSPOSE_CONV_STRIDES = ((1, 1), (2, 2))

_report_lock = threading.Lock()


@dataclass(frozen=True)
class VelaTosaReport:
    """Vela's published TOSA support, parsed from its supported-operators report.

    Example:
        >>> vela_tosa_report().constraint("MATMUL", "DataTypes")
        'DataTypes (IFM, IFM2, OFM): (i8_t, i8_t, i32_t)'
    """

    vela_version: str
    u55_supported: frozenset[str]
    u55_not_supported: frozenset[str]
    u55_generic: tuple[str, ...]
    u55_constraints: dict[str, tuple[str, ...]]
    u85_extensions: tuple[str, ...]
    u85_unsupported: tuple[str, ...]

    def constraint(self, op: str, *words: str) -> str:
        """Vela's wording of an Ethos-U55/U65 constraint of ``op`` mentioning all ``words``."""
        for line in self.u55_constraints.get(op, ()):
            if all(w.lower() in line.lower() for w in words):
                return line
        return ""


def _bullets(lines: Iterable[str]) -> list[tuple[int, str]]:
    result = []
    for line in lines:
        match = re.match(r"^(\s*)- (.*\S)\s*$", line)
        if match:
            result.append((len(match.group(1)), match.group(2)))
    return result


def _flatten(bullets: list[tuple[int, str]]) -> tuple[str, ...]:
    """Top-level bullets, each with its nested bullets appended after a colon."""
    out: list[str] = []
    for indent, text in bullets:
        if indent == 0 or not out:
            out.append(text)
        else:
            out[-1] = f"{out[-1].rstrip(':')}: {text}" if out[-1].endswith(":") else f"{out[-1]}; {text}"
    return tuple(out)


def parse_supported_ops_report(text: str, vela_version: str = "") -> VelaTosaReport:
    """Parse the TOSA sections of Vela's ``SUPPORTED_OPS.md``.

    Example:
        >>> md = '''## Ethos-U55 and Ethos-U65 TOSA Summary Table
        ... | Operator | TOSA Constraints |
        ... | --- | --- |
        ... | ADD | [Generic](#x) |
        ... ### Ethos-U55 and Ethos-U65 TOSA Not Supported Operators
        ... - GATHER
        ... '''
        >>> r = parse_supported_ops_report(md)
        >>> sorted(r.u55_supported), sorted(r.u55_not_supported)
        (['ADD'], ['GATHER'])
    """
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.lstrip("#").strip()
            sections.setdefault(current, [])
        else:
            sections.setdefault(current, []).append(line)

    supported: set[str] = set()
    for line in sections.get("Ethos-U55 and Ethos-U65 TOSA Summary Table", []):
        match = re.match(r"^\|\s*([A-Z0-9_]+)\s*\|", line)
        if match:
            supported.add(match.group(1))
    not_supported = {
        text for _, text in _bullets(sections.get("Ethos-U55 and Ethos-U65 TOSA Not Supported Operators", []))
    }
    constraints: dict[str, tuple[str, ...]] = {}
    for title, lines in sections.items():
        match = re.match(r"^Ethos-U55 and Ethos-U65 TOSA ([A-Z0-9_]+) Constraints$", title)
        if match:
            constraints[match.group(1)] = _flatten(_bullets(lines))
    generic = _flatten(_bullets(sections.get("Ethos-U55 and Ethos-U65 TOSA Generic Constraints", [])))

    extensions: list[str] = []
    unsupported: list[str] = []
    target: list[str] | None = None
    for indent, text in _bullets(sections.get("Ethos-U85 TOSA Operator Support", [])):
        if indent == 0:
            target = {"Supported extensions:": extensions, "Unsupported operators:": unsupported}.get(text)
        elif target is not None:
            target.append(text)
    return VelaTosaReport(
        vela_version=vela_version,
        u55_supported=frozenset(supported),
        u55_not_supported=frozenset(not_supported),
        u55_generic=generic,
        u55_constraints=constraints,
        u85_extensions=tuple(extensions),
        u85_unsupported=tuple(unsupported),
    )


@functools.lru_cache(maxsize=1)
def vela_tosa_report() -> VelaTosaReport:
    """Run Vela's supported-operators report generator (in a temporary directory) and parse it.

    Example:
        >>> "CONV2D" in vela_tosa_report().u55_supported
        True
    """
    from ethosu.vela import vela
    from ethosu.vela._version import __version__

    with _report_lock, tempfile.TemporaryDirectory(prefix="ethosu-ops-") as tmp:
        with contextlib.chdir(tmp), capture_output(native=False):
            vela.generate_supported_ops()
        text = (Path(tmp) / "SUPPORTED_OPS.md").read_text(encoding="utf-8")
    report = parse_supported_ops_report(text, __version__)
    if not report.u55_supported:
        raise RuntimeError("could not read the TOSA operator table of Vela's supported-ops report")
    return report


@dataclass(frozen=True)
class UnsupportedOperator:
    """One operator Vela will refuse (``severity="error"``) or only accept with a caveat.

    ``vela_constraint`` quotes Vela's report where it states the rule; ``reason`` says what in
    this graph breaks it.

    Example:
        >>> str(UnsupportedOperator(3, "GATHER", "not supported here"))
        '#3 GATHER: not supported here'
    """

    index: int
    op: str
    reason: str
    vela_constraint: str = ""
    block: str = "main"
    severity: str = "error"

    def __str__(self) -> str:
        where = f"#{self.index}" if self.block == "main" else f"{self.block}#{self.index}"
        text = f"{where} {self.op}: {self.reason}"
        if self.vela_constraint:
            text += f" [Vela: {self.vela_constraint}]"
        return text


@dataclass(frozen=True)
class SupportReport:
    """The result of :func:`check_support`: what Vela will refuse, per operator.

    Iterating yields the refused operators (errors only); ``warnings`` holds the rest.

    Example:
        >>> report = SupportReport("ethos-u55-128", 3, ())
        >>> report.ok, len(report)
        (True, 0)
    """

    target: str
    operators_checked: int
    issues: tuple[UnsupportedOperator, ...]
    vela_version: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def unsupported(self) -> tuple[UnsupportedOperator, ...]:
        """Operators Vela will refuse."""
        return tuple(i for i in self.issues if i.severity == "error")

    @property
    def warnings(self) -> tuple[UnsupportedOperator, ...]:
        """Operators Vela accepts with a caveat (e.g. experimental support)."""
        return tuple(i for i in self.issues if i.severity != "error")

    @property
    def ok(self) -> bool:
        """True when no operator will be refused."""
        return not self.unsupported

    def __iter__(self):
        return iter(self.unsupported)

    def __len__(self) -> int:
        return len(self.unsupported)

    def format(self) -> str:
        """Human-readable lines, one per issue."""
        head = (
            f"{self.target}: all {self.operators_checked} operators are accepted by Vela"
            if self.ok
            else f"{self.target}: Vela will refuse {len(self)} of {self.operators_checked} operators"
        )
        lines = [head]
        lines += [f"  {issue}" for issue in self.unsupported]
        lines += [f"  warning: {issue}" for issue in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "target": self.target,
            "ok": self.ok,
            "operators_checked": self.operators_checked,
            "vela_version": self.vela_version,
            "unsupported": [asdict(i) for i in self.unsupported],
            "warnings": [asdict(i) for i in self.warnings],
            "notes": list(self.notes),
        }


class _OpView:
    """An operator with its tensors resolved, and what the block knows about constness."""

    def __init__(self, block, index: int, op) -> None:
        self.block = block
        self.index = index
        self.op = op
        self.name = op.op

    def tensor(self, name: str):
        return self.block.tensors.get(name) or self.block.shapes.get(name)

    def dtypes(self, names: Iterable[str]) -> list[str]:
        return [t.dtype for t in (self.tensor(n) for n in names) if t is not None]

    @property
    def all_dtypes(self) -> list[str]:
        return self.dtypes([*self.op.inputs, *self.op.outputs])

    def shape(self, name: str) -> tuple[int, ...]:
        t = self.tensor(name)
        return tuple(t.shape) if t is not None else ()

    def values(self, name: str) -> tuple[int, ...] | None:
        """The integers of a constant tensor, flattened; None when it is not constant."""
        t = self.tensor(name)
        if t is None or t.data is None:
            return None
        return tuple(int(v) for v in t.data.reshape(-1).tolist())


def _constant_names(block) -> set[str]:
    names = {n for op in block.operators if op.op in _STRUCTURAL_OPS for n in op.outputs}
    names |= {n for n, t in block.tensors.items() if getattr(t, "data", None) is not None}
    return names


def _consumers(block) -> dict[str, list]:
    """Tensor name -> the operators of ``block`` that read it."""
    users: dict[str, list] = {}
    for op in block.operators:
        for name in op.inputs:
            users.setdefault(name, []).append(op)
    return users


def _check_u55(view: _OpView, report: VelaTosaReport, consts: set[str], users) -> list[UnsupportedOperator]:
    op = view.name
    issue = functools.partial(UnsupportedOperator, view.index, op, block=view.block.name)
    if op in report.u55_not_supported:
        return [issue("Vela lists it as not supported on Ethos-U55 and Ethos-U65",
                      "Not Supported Operators: " + op)]
    if op not in report.u55_supported and op not in _U55_UNLISTED_BUT_SUPPORTED:
        generic = next((g for g in report.u55_generic if "not listed" in g), "")
        return [issue("not in Vela's Ethos-U55/U65 TOSA operator table", generic)]
    found: list[UnsupportedOperator] = []
    inputs, outputs = view.op.inputs, view.op.outputs
    in_types, out_types = view.dtypes(inputs), view.dtypes(outputs)
    if "BOOL" in view.all_dtypes:
        found.append(issue(
            "bool tensors are not supported on Ethos-U55/U65",
            report.constraint(op, "bool") or report.constraint("PAD", "bool"),
        ))
    if op in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT") and set(in_types[:2] + out_types) != {"INT32"}:
        found.append(issue(f"operands are {'/'.join(sorted(set(in_types[:2] + out_types)))}, not int32",
                           report.constraint(op, "int32")))
    if op == "MATMUL" and set(in_types[:2]) != {"INT8"}:
        found.append(issue(f"inputs are {'/'.join(sorted(set(in_types[:2])))}, only int8 is supported",
                           report.constraint(op, "DataTypes")))
    if op in ("REDUCE_MAX", "REDUCE_MIN") and not set(in_types[:1]) <= {"INT8", "INT16"}:
        found.append(issue(f"input is {in_types[0]}, only int8 and int16 are supported",
                           report.constraint(op, "DataTypes")))
    if op == "REVERSE":
        rank = len(view.shape(inputs[0]))
        axis = int(view.op.attrs.get("axis", -1))
        if axis not in (rank - 3, rank - 2) or axis < 0:
            found.append(issue(f"reverses axis {axis} of a rank-{rank} tensor (only H or W)",
                               report.constraint(op, "axis")))
    if op == "ARGMAX":
        shape = view.shape(inputs[0])
        axis = int(view.op.attrs.get("axis", -1))
        if axis != len(shape) - 1:
            found.append(issue(f"reduces axis {axis}, not the channel axis {len(shape) - 1}",
                               report.constraint(op, "channel")))
        elif shape and not 1 <= shape[-1] <= 127:
            found.append(issue(f"has {shape[-1]} channels (1..127 supported)",
                               report.constraint(op, "Tensor axis")))
        if len(shape) == 4 and shape[0] != 1:
            found.append(issue(f"has batch {shape[0]} (N=1 required)", report.constraint(op, "N=1")))
    if op in _CONV_OPS:
        dynamic = [n for n in inputs[1:3] if n not in consts]
        if dynamic:
            found.append(issue(f"weights/bias {', '.join(dynamic)} are not constant; Vela needs "
                               "constant weights and bias on Ethos-U55/U65"))
        # an int16 TRANSPOSE_CONV2D has a stricter RESCALE rule: _u55_transpose_conv_problems
        if "INT48" in out_types and op != "TRANSPOSE_CONV2D":
            consumers = [u for o in outputs for u in users.get(o, [])]
            if not consumers or any(u.op != "RESCALE" for u in consumers):
                found.append(issue("16-bit result (int48) is not consumed by a RESCALE",
                                   report.constraint(op, "EXT-INT16")))
    if op in ("RESIZE", "TRANSPOSE_CONV2D"):
        problems = (_u55_resize_problems(view) if op == "RESIZE"
                    else _u55_transpose_conv_problems(view, users))
        found += [issue(reason, report.constraint(op, word) if word else "")
                  for reason, word in problems]
    return found


def _u55_resize_problems(view: _OpView) -> list[tuple[str, str]]:
    """Why Vela 5.2.0 cannot compile this RESIZE for Ethos-U55/U65, as (reason, a word of Vela's
    constraint to quote, "" when its report does not state the rule); empty when it can.

    Ethos-U55/U65 have no resize unit. Vela turns an identity RESIZE into a copy and one of a
    1x1 input into a broadcast; any other RESIZE must be a NEAREST upscale by 2, 4 or 8 that it
    rebuilds from 2x nearest-neighbour upsampling passes. Those reproduce TOSA's sampling only in
    half-pixel-centre form (scale 2u/2, offset 1-u on both axes) or in align-corners form
    ((OH-1)/(IH-1) equal to the scale numerator u, whatever the denominator), and only on
    batch 1. The report asks BILINEAR to be followed by a RESCALE of shift
    log2(upscale_x*upscale_y); Vela 5.2.0 does not fold that RESCALE into a RESIZE for
    Ethos-U55/U65, so it refuses every BILINEAR that is not an identity.
    """
    x, y = view.op.inputs[0], view.op.outputs[0]
    params = [view.values(name) for name in view.op.inputs[1:4]]
    in_shape, out_shape = view.shape(x), view.shape(y)
    if len(in_shape) != 4 or len(out_shape) != 4 or [p and len(p) for p in params] != [4, 2, 2]:
        return []  # not a valid TOSA RESIZE: its validation, not a target limit, refuses it
    (sy_n, sy_d, sx_n, sx_d), (off_y, off_x), (border_y, border_x) = params
    batch, ih, iw, _ = in_shape
    oh, ow = out_shape[1:3]
    mode = view.op.attrs.get("mode")
    form = f"{mode} RESIZE of {x} (scale {sy_n}/{sy_d} x {sx_n}/{sx_d}, offset {off_y},{off_x})"
    unshifted = off_y == off_x == border_y == border_x == 0
    if unshifted and ((sy_n, sy_d, sx_n, sx_d) == (1, 1, 1, 1)
                      or (mode == "NEAREST" and sy_n == sy_d and sx_n == sx_d)):
        return []  # an identity: Vela copies the input
    if mode != "NEAREST":
        return [(f"{form}: Vela 5.2.0 compiles BILINEAR for Ethos-U55/U65 only as an identity "
                 "(scale 1/1, no offset or border)", "Bilinear")]
    if ih * iw == 1:
        return []  # a 1x1 input: Vela broadcasts the pixel
    half_pixel = (sy_d == sx_d == 2 and sy_n % 2 == 0 and sx_n % 2 == 0
                  and (off_y, off_x) == (1 - sy_n // 2, 1 - sx_n // 2))
    up_y, up_x = (sy_n // 2, sx_n // 2) if half_pixel else (sy_n, sx_n)
    upscale = max(up_y, up_x)
    if upscale not in _U55_RESIZE_UPSCALES:
        read = "numerator, halved for half-pixel centres" if half_pixel else "numerator"
        return [(f"{form} counts as an upscale by {upscale} (Vela reads the scale {read}); "
                 "Ethos-U55/U65 upscale by 2, 4 or 8 only", "Upscale")]
    if (up_y == 1 and ih != 1) or (up_x == 1 and iw != 1):
        size = ih if up_y == 1 else iw
        return [(f"{form} upscales one axis only; Ethos-U55/U65 need the other axis (size {size}) "
                 "to be 1", "Upscale")]
    if not half_pixel:
        ratio = max(Fraction(oh - 1, max(ih - 1, 1)), Fraction(ow - 1, max(iw - 1, 1)))
        if ratio != upscale:
            return [(f"{form} is neither half-pixel-centre (scale 2u/2 and offset 1-u on both "
                     f"axes) nor align-corners ((OH-1)/(IH-1) equal to the scale numerator "
                     f"{upscale}), the only NEAREST forms Ethos-U55/U65 reproduce", "")]
    if batch != 1:
        return [(f"{form} has batch {batch}; Ethos-U55/U65 upscale batch 1 only", "")]
    return []


def _u55_transpose_conv_problems(view: _OpView, users) -> list[tuple[str, str]]:
    """Why Vela 5.2.0 cannot compile this TRANSPOSE_CONV2D for Ethos-U55/U65, as (reason, a word
    of Vela's constraint to quote); empty when it can.

    Vela runs it as a convolution over an input upsampled with zeros, which covers strides 1x1
    and 2x2 and, when input and kernel are one row high (one column wide), 1x2 (2x1). A stride
    along an axis on which the operator writes a single element does not count: Vela resets it
    to 1 (rows or columns of positive out_pad are filled separately). The int16 form must hand
    its int48 result to a RESCALE that Vela folds into the convolution, and on Ethos-U55/U65
    Vela folds into a TRANSPOSE_CONV2D only a scale of exactly 1 (multiplier = 2^shift).
    """
    x, weights, y = view.op.inputs[0], view.op.inputs[1], view.op.outputs[0]
    shapes = [view.shape(x), view.shape(weights), view.shape(y)]
    if any(len(shape) != 4 for shape in shapes):
        return []  # not a valid TOSA TRANSPOSE_CONV2D
    (ih, iw), (kh, kw), (oh, ow) = (shape[1:3] for shape in shapes)
    pad_top, pad_bottom, pad_left, pad_right = (max(p, 0) for p in view.op.attrs["out_pad"])
    stride_y, stride_x = view.op.attrs["stride"]
    if oh - pad_top - pad_bottom == 1:
        stride_y = 1
    if ow - pad_left - pad_right == 1:
        stride_x = 1
    found = []
    if not ((stride_y, stride_x) in _U55_TRANSPOSE_CONV_STRIDES
            or ((stride_y, stride_x) == (1, 2) and ih == kh == 1)
            or ((stride_y, stride_x) == (2, 1) and iw == kw == 1)):
        found.append((f"stride {stride_y}x{stride_x} on {x} ({ih}x{iw}, kernel {kh}x{kw}): "
                      "Ethos-U55/U65 support 1x1 and 2x2, 1x2 only when input and kernel height "
                      "are 1, 2x1 only when input and kernel width are 1", "Stride"))
    if view.dtypes([y]) == ["INT48"]:
        # Vela merges a chain of RESCALEs (each the only reader of the previous result) into one
        # before it folds it into the convolution: every link must have scale exactly 1
        chain, result = [], y
        while result not in view.block.outputs and [u.op for u in users.get(result, [])] == ["RESCALE"]:
            chain.append(users[result][0])
            result = chain[-1].outputs[0]
        if not chain:
            why = "is a graph output" if y in view.block.outputs else "is not consumed by exactly one RESCALE"
            found.append((f"int16 result {y} {why}; Ethos-U55/U65 need a RESCALE to take it", "EXT-INT16"))
        for rescale in chain:
            multipliers, shifts = (view.values(name) for name in rescale.inputs[1:3])
            scales = list(zip(multipliers or (), shifts or (), strict=False))
            off_unit = next(((m, s) for m, s in scales if m != 1 << s), None)
            if off_unit or not scales:
                scale = f"multiplier {off_unit[0]}, shift {off_unit[1]}" if off_unit else "a non-constant scale"
                found.append((f"int16 result {y} is rescaled (into {rescale.outputs[0]}) with {scale}; "
                              "Ethos-U55/U65 fold into an int16 TRANSPOSE_CONV2D only RESCALEs of scale "
                              "exactly 1 (multiplier = 2^shift)", "EXT-INT16"))
                break
    return found


def _check_u85(view: _OpView, report: VelaTosaReport, consts: set[str]) -> list[UnsupportedOperator]:
    op = view.name
    issue = functools.partial(UnsupportedOperator, view.index, op, block=view.block.name)
    found = []
    if op == "TRANSPOSE_CONV2D":
        dynamic = [n for n in view.op.inputs[1:3] if n not in consts]
        if dynamic:
            vela_says = next((u for u in report.u85_unsupported if u.startswith(op)), "")
            found.append(issue(f"weights/bias {', '.join(dynamic)} are not constant", vela_says))
    if op == "CONV3D":
        dynamic = [n for n in view.op.inputs[1:3] if n not in consts]
        if dynamic:
            vela_says = next((u for u in report.u85_unsupported if u.startswith(op)), "")
            found.append(issue(
                f"weights/bias {', '.join(dynamic)} are not constant; Vela's report lists this as "
                "unsupported, Vela 5.2.0 compiles it", vela_says, severity="warning"))
    if op in _CONTROL_FLOW_OPS:
        ext = next((e for e in report.u85_extensions if "CONTROLFLOW" in e), "EXT-CONTROLFLOW")
        found.append(issue("control flow is experimental on Ethos-U85", ext, severity="warning"))
    return found


def check_support(tosa, target: str) -> SupportReport:
    """The TOSA operators Vela will not accept for ``target``, and why, without compiling.

    ``tosa`` is TOSA 1.0 flatbuffer bytes, a path, or a :class:`tosa_verify.graph.Graph`.
    Every basic block is checked; ``CONST``/``CONST_SHAPE`` are not counted as operators.

    Example:
        >>> report = check_support("graph.tosa", "ethos-u55-128")   # doctest: +SKIP
        >>> for op in report:                                       # doctest: +SKIP
        ...     print(op)
        #0 BITWISE_AND: Vela lists it as not supported on Ethos-U55 and Ethos-U65 [Vela: ...]
    """
    from tosa_verify.graph import load

    target = check_target(target)
    family = family_of(target)
    graph = load(tosa)
    report = vela_tosa_report()
    issues: list[UnsupportedOperator] = []
    checked = 0
    for region in graph.regions:
        for block in region.blocks:
            consts = _constant_names(block)
            users = _consumers(block)
            for index, op in enumerate(block.operators):
                if op.op in _STRUCTURAL_OPS:
                    continue
                checked += 1
                view = _OpView(block, index, op)
                non_int = sorted({d for d in view.all_dtypes if d not in _INT_DTYPES})
                if non_int:
                    issues.append(UnsupportedOperator(
                        index, op.op, f"uses {', '.join(non_int)}: Vela only compiles integer TOSA",
                        "TOSA Profile: PRO-INT", block=block.name))
                    continue
                if op.op in _INT32_ONLY_OPS:
                    wrong = sorted({d for d in view.dtypes(op.inputs[:2]) if d != "INT32"})
                    if wrong:
                        issues.append(UnsupportedOperator(
                            index, op.op, f"inputs are {', '.join(wrong)}: TOSA 1.0 PRO-INT defines "
                            f"{op.op} on int32 only, so Vela's graph validation refuses it",
                            "TOSA Profile: PRO-INT", block=block.name))
                        continue
                if family in ("ethos-u55", "ethos-u65"):
                    issues += _check_u55(view, report, consts, users)
                else:
                    issues += _check_u85(view, report, consts)
    return SupportReport(target, checked, tuple(issues), report.vela_version)
