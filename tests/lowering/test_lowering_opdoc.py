"""The supported-op documentation is generated from the registry and committed up to date."""

from __future__ import annotations

from pathlib import Path

import lowering
from lowering.opdoc import supported_ops_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "lowering-ops.md"


def test_docs_table_is_generated_from_the_registry():
    text = supported_ops_markdown()
    for name in lowering.SUPPORTED_OPS:
        assert f"`{name}`" in text
    assert DOC.read_text() == text, "regenerate with: python -m lowering.opdoc > docs/lowering-ops.md"
