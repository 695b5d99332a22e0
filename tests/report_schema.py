"""The published report schema (docs/report.schema.json) as a validator for the tests.

``check(doc)`` raises AssertionError naming every place where ``doc`` breaks the schema. The
validator needs ``jsonschema`` (the ``test`` extra); CI installs it, and there (CI=true) a missing
one is an error, elsewhere the tests that need it skip with the reason.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "docs" / "report.schema.json"


def validator() -> Any:
    if os.environ.get("CI"):
        import jsonschema
    else:
        jsonschema = pytest.importorskip(
            "jsonschema", reason="jsonschema is not installed (pip install -e '.[test]')")
    schema = json.loads(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def errors(doc: Any) -> list:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator().iter_errors(doc), key=lambda e: list(e.absolute_path))]


def check(doc: Any) -> None:
    problems = errors(doc)
    assert not problems, "report breaks docs/report.schema.json:\n" + "\n".join(problems[:20])
