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
without rounding, down-casts from int32, pooling strides above 3, REVERSE on int32) are not
flagged. Shape-size limits (e.g. dimensions up to 65536, RESIZE ratios) are not checked.
"""

from __future__ import annotations

import contextlib
import functools
import re
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
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


def _constant_names(block) -> set[str]:
    names = {n for op in block.operators if op.op in _STRUCTURAL_OPS for n in op.outputs}
    names |= {n for n, t in block.tensors.items() if getattr(t, "data", None) is not None}
    return names


def _consumers(block) -> dict[str, list[str]]:
    users: dict[str, list[str]] = {}
    for op in block.operators:
        for name in op.inputs:
            users.setdefault(name, []).append(op.op)
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
        if "INT48" in out_types:
            consumers = [u for o in outputs for u in users.get(o, [])]
            if not consumers or any(u != "RESCALE" for u in consumers):
                found.append(issue("16-bit result (int48) is not consumed by a RESCALE",
                                   report.constraint(op, "EXT-INT16")))
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
