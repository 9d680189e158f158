"""The VGF device gate for tests: skip on a developer's machine without Vulkan, fail in CI.

Any test that runs VGF programs asks for the ``vgf_device`` fixture (``tests/conftest.py``
exports it to the whole suite) or calls :func:`require_vgf` first. Where
:func:`vgf.available` is false, the test is skipped with the reason *unless* the run must
execute VGF: in CI (``CI`` set, as the CI runner does) or with ``TOSA_VERIFY_REQUIRE_VGF=1``
(``.ci/run`` sets it after installing the Vulkan driver), where it fails with that reason.
So CI never skips a VGF test silently.

>>> import vgf.testing
>>> vgf.testing.vgf_required({"TOSA_VERIFY_REQUIRE_VGF": "1"})
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

import vgf

__all__ = ["REQUIRE_ENV", "require_vgf", "vgf_device", "vgf_required"]

#: Set to a non-empty value other than ``0`` to make a missing VGF device a test failure.
REQUIRE_ENV = "TOSA_VERIFY_REQUIRE_VGF"


def vgf_required(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a test run must execute VGF (CI, or ``TOSA_VERIFY_REQUIRE_VGF`` set).

    Example:
        >>> vgf_required({}), vgf_required({"CI": "true"}), vgf_required({REQUIRE_ENV: "0"})
        (False, True, False)
    """
    env = os.environ if environ is None else environ
    return any(env.get(key, "") not in ("", "0") for key in ("CI", REQUIRE_ENV))


def require_vgf() -> None:
    """Return when VGF programs can run here; else skip the test, or fail it when VGF is required.

    Example:
        >>> def test_my_graph_on_vgf():      # doctest: +SKIP
        ...     require_vgf()
        ...     vgf.run("model.tosa", inputs)
    """
    ok, reason = vgf.available()
    if ok:
        return
    if vgf_required():
        pytest.fail(f"VGF is required here ({REQUIRE_ENV} or CI is set) but not available: {reason}",
                    pytrace=False)
    pytest.skip(f"VGF not available: {reason}")


@pytest.fixture
def vgf_device() -> None:
    """Fixture form of :func:`require_vgf`: ``@pytest.mark.usefixtures("vgf_device")``.

    Example:
        >>> pytestmark = pytest.mark.usefixtures("vgf_device")   # doctest: +SKIP
    """
    require_vgf()
