"""The supported-op documentation is generated from the registries and committed up to date."""

from __future__ import annotations

from pathlib import Path

import lowering
from lowering.opdoc import supported_ops_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "lowering-ops.md"


def test_docs_table_is_generated_from_the_registries():
    text = supported_ops_markdown()
    rows = {line.split("|")[1].strip(" `"): line for line in text.splitlines()
            if line.startswith("| `")}
    assert set(rows) == set(lowering.SUPPORTED_OPS)
    for name, row in rows.items():
        int_mark, fp_mark = (cell.strip() for cell in row.split("|")[3:5])
        assert (int_mark == "yes") == (name in lowering.SUPPORTED_OPS_INT), row
        assert (fp_mark == "yes") == (name in lowering.SUPPORTED_OPS_FP), row
    assert DOC.read_text() == text, "regenerate with: python -m lowering.opdoc > docs/lowering-ops.md"
