"""The operator registry: TOSA op name -> numpy implementation.

Every op module registers its functions here with :func:`register`; the interpreter looks ops up
in :data:`REGISTRY` and nothing else, so the supported-op list is this dictionary's keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from .._edits import WatchedDict
from ..errors import TosaRequireError, TosaValidationError
from .facts import FACTS, Compliance, ComplianceRule, KernelSize, OpFacts

if TYPE_CHECKING:
    from ..graph import Operator, Tensor

OpFunction = Callable[["OpCall"], Sequence[np.ndarray]]

#: TOSA op name -> implementation. Filled by the op-family modules at import time. Watched: a
#: replaced function (a test's or caller's wrapper) moves the edit tick, so a graph's plans,
#: which hold the functions, are checked again (see :mod:`tosa_verify._edits`).
REGISTRY: dict[str, OpFunction] = WatchedDict()

#: TOSA op name -> optional ``prepare`` (see :func:`register_prepare`).
PREPARE: dict[str, Callable[[OpCall], OpFunction | None]] = {}

#: Ops an execution plan must not evaluate ahead of a run even when every input is constant
#: (they read or change run state); see :mod:`tosa_verify.plan`.
IMPURE: set[str] = set()


def register(
    *op_names: str,
    operands: Sequence[str] = (),
    compliance: Compliance | ComplianceRule | None = None,
    kernel_size: KernelSize | None = None,
    extensions: Sequence[str] = (),
    int16: bool = False,
) -> Callable[[OpFunction], OpFunction]:
    """Register ``fn`` as the implementation of one or more TOSA ops, with the ops' facts.

    The keyword arguments are the op's facts (:class:`tosa_verify.ops.facts.OpFacts`): operand
    names, the compliance mode of a float result, the kernel size of a dot product, the
    extensions the op needs. They are declared here, once, and read by ``compare``, ``diff`` and
    ``profiles``.

    >>> from tosa_verify.ops.facts import FACTS, ulp
    >>> @register("EXAMPLE_NOP", operands=("input1",), compliance=ulp(0.5))
    ... def nop(call):
    ...     return [call.inputs[0]]
    >>> "EXAMPLE_NOP" in REGISTRY, FACTS["EXAMPLE_NOP"].operands
    (True, ('input1',))
    >>> del REGISTRY["EXAMPLE_NOP"], FACTS["EXAMPLE_NOP"]
    """
    facts = OpFacts(tuple(operands), compliance, kernel_size, tuple(extensions), int16)

    def decorate(fn: OpFunction) -> OpFunction:
        for name in op_names:
            if name in REGISTRY:
                raise RuntimeError(f"TOSA op {name} registered twice")
            REGISTRY[name] = fn
            FACTS[name] = facts
            if name in PREPARE and _PREPARED_FUNCTION.get(name) is None:
                _PREPARED_FUNCTION[name] = fn  # the prepare was registered first (module order)
        return fn

    return decorate


def register_prepare(*op_names: str) -> Callable[[Callable], Callable]:
    """Register an optional ``prepare`` for ops already registered with :func:`register`.

    An execution plan calls ``prepare(call)`` once per operator, before the first run, with
    ``call.inputs[i]`` the value of input ``i`` when it is a constant and None otherwise. It makes
    every ERROR_IF (and REQUIRE on constants) that does not depend on run-time data and returns a
    kernel ``kernel(call) -> outputs`` that only computes (with the data-dependent checks); or
    None to keep the op function. It must *raise* (``call.error_if``) where the op function
    would, so that a bad operator keeps its op function and reports at run time, in order.
    The kernel is called with numpy's floating-point warnings off (a run and a plan's fold).

    >>> @register("EXAMPLE_NOP")
    ... def nop(call):
    ...     call.check_arity(1, 1)
    ...     return [call.inputs[0]]
    >>> @register_prepare("EXAMPLE_NOP")
    ... def prepare_nop(call):
    ...     call.check_arity(1, 1)
    ...     return lambda run: [run.inputs[0]]
    >>> del REGISTRY["EXAMPLE_NOP"], PREPARE["EXAMPLE_NOP"], FACTS["EXAMPLE_NOP"]
    """

    def decorate(fn: Callable) -> Callable:
        for name in op_names:
            if name in PREPARE:
                raise RuntimeError(f"TOSA op {name} has two prepare functions")
            PREPARE[name] = fn
            _PREPARED_FUNCTION[name] = REGISTRY.get(name)
        return fn

    return decorate


#: op name -> the op function its prepare was registered with (see :func:`prepare_for`)
_PREPARED_FUNCTION: dict[str, OpFunction | None] = {}


def prepare_for(op_name: str) -> Callable | None:
    """The op's ``prepare``, unless :data:`REGISTRY` now holds another function for the op.

    A replaced op function (a test's or a caller's wrapper) must run as it is: the prepared
    kernel would bypass it.
    """
    prepare = PREPARE.get(op_name)
    if prepare is None or REGISTRY.get(op_name) is not _PREPARED_FUNCTION.get(op_name):
        return None
    return prepare


class OpCall:
    """Everything one operator invocation needs: values, declarations, attributes, context.

    ``inputs`` are working numpy arrays (see :mod:`tosa_verify.dtypes`) in operator input order;
    ``input_decls``/``output_decls`` are the block's tensor declarations (name, shape, dtype).
    ``runtime`` gives control-flow and variable ops access to the running interpreter.
    A plain slotted class, not a dataclass: one is made per operator per run, so its
    construction is on the interpreter's hot path.

    >>> OpCall(0, None, [], [], []).runtime is None
    True
    """

    __slots__ = ("index", "operator", "inputs", "input_decls", "output_decls", "runtime", "_extra")

    def __init__(self, index: int, operator: Operator, inputs: list[np.ndarray], input_decls: list[Tensor],
                 output_decls: list[Tensor], runtime: Any = None, extra: dict[str, Any] | None = None) -> None:
        self.index = index
        self.operator = operator
        self.inputs = inputs
        self.input_decls = input_decls
        self.output_decls = output_decls
        self.runtime = runtime
        self._extra = extra

    @property
    def extra(self) -> dict[str, Any]:
        """Free-form per-call scratch space for op implementations (made on first use)."""
        if self._extra is None:
            self._extra = {}
        return self._extra

    def __repr__(self) -> str:
        return f"OpCall({self._where()})"

    @property
    def op(self) -> str:
        return self.operator.op

    @property
    def attrs(self) -> dict[str, Any]:
        return self.operator.attrs

    def in_dtype(self, i: int = 0) -> str:
        """TOSA dtype name of input ``i``."""
        return self.input_decls[i].dtype

    def out_dtype(self, i: int = 0) -> str:
        """TOSA dtype name of output ``i``."""
        return self.output_decls[i].dtype

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        """Declared shape of output ``i``."""
        return self.output_decls[i].shape

    def _where(self) -> str:
        ins = ", ".join(t.name for t in self.input_decls)
        outs = ", ".join(t.name for t in self.output_decls)
        return f"operator {self.index} {self.op} ({ins} -> {outs})"

    def error_if(self, condition: bool | np.bool_, description: str) -> None:
        """Raise :class:`TosaValidationError` when a spec ERROR_IF ``condition`` holds.

        ``description`` should read like the spec's condition, e.g. ``"stride_y < 1"``.
        """
        if bool(condition):
            self.fail(description)

    def fail(self, description: str) -> NoReturn:
        """Raise the :class:`TosaValidationError` of the spec ERROR_IF ``description``, whose
        condition the caller found true.

        The form for checks on a hot path: ``if stride_y < 1: call.fail(f"stride_y {stride_y} < 1")``
        formats the message only when the check fails (``error_if`` takes it ready-made).
        """
        raise self._error(TosaValidationError, f"ERROR_IF({description})", description)

    def require(self, condition: bool | np.bool_, description: str) -> None:
        """Raise :class:`TosaRequireError` when a spec REQUIRE does *not* hold (data-dependent)."""
        if not bool(condition):
            raise self._error(TosaRequireError, f"REQUIRE({description}) failed: the result is unpredictable",
                              description)

    def _error(self, kind: type[TosaValidationError], what: str, description: str) -> TosaValidationError:
        """The ``kind`` error ``what`` at this operator, naming its tensors and the condition."""
        return kind(f"{self._where()}: {what}", op_index=self.index, op=self.op,
                    tensors=tuple(t.name for t in (*self.input_decls, *self.output_decls)), condition=description)

    def check_arity(self, n_inputs: int | tuple[int, ...], n_outputs: int = 1) -> None:
        """ERROR_IF the operator has the wrong number of inputs or outputs."""
        allowed = (n_inputs,) if isinstance(n_inputs, int) else n_inputs
        if len(self.inputs) not in allowed:  # (messages formatted only for a failing check)
            self.fail(f"input count {len(self.inputs)} not in {allowed}")
        if len(self.output_decls) != n_outputs:
            self.fail(f"output count {len(self.output_decls)} != {n_outputs}")

    def check_types(self, allowed: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
        """ERROR_IF the (input dtypes..., output dtypes...) signature is not in ``allowed``.

        Each entry lists dtypes of the tensors that matter, inputs first then outputs, exactly as
        the spec's "supported data types" table does for the op. Returns the matching signature.
        """
        sig = tuple(t.dtype for t in (*self.input_decls, *self.output_decls))
        n_sig = len(sig)
        for entry in allowed:
            if len(entry) == n_sig:  # (the common case: one dtype per operand, compared at once)
                if (entry if type(entry) is tuple else tuple(entry)) == sig:
                    return entry
                continue
            n_in = len(entry) - len(self.output_decls)
            if n_in < 0:
                continue
            if sig[:n_in] == tuple(entry[:n_in]) and sig[len(self.input_decls):] == tuple(entry[n_in:]):
                return entry
        self.fail(f"unsupported type combination {sig}")
