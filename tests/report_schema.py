"""The published schemas (docs/report.schema.json, docs/snapshot.schema.json,
docs/doctor.schema.json) as validators for the tests.

``check(doc, schema="report")`` raises AssertionError naming every place where ``doc`` breaks the
schema. The snapshot schema refers to the report's evidence: the three are one registry. The
validator needs ``jsonschema`` (the ``test`` extra); CI installs it, and there (CI=true) a missing
one is an error, elsewhere the tests that need it skip with the reason.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
SCHEMA_PATH = DOCS / "report.schema.json"
SCHEMAS = ("report", "snapshot", "doctor")


def _load(name: str) -> dict:
    return json.loads((DOCS / f"{name}.schema.json").read_text())


def validator(schema: str = "report") -> Any:
    if os.environ.get("CI"):
        import jsonschema
    else:
        jsonschema = pytest.importorskip(
            "jsonschema", reason="jsonschema is not installed (pip install -e '.[test]')")
    from referencing import Registry, Resource
    docs = {name: _load(name) for name in SCHEMAS}
    registry = Registry().with_resources(
        (d["$id"], Resource.from_contents(d)) for d in docs.values())
    cls = jsonschema.validators.validator_for(docs[schema])
    cls.check_schema(docs[schema])
    return cls(docs[schema], registry=registry, format_checker=cls.FORMAT_CHECKER)


def errors(doc: Any, schema: str = "report") -> list:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator(schema).iter_errors(doc),
                            key=lambda e: list(e.absolute_path))]


def check(doc: Any, schema: str = "report") -> None:
    problems = errors(doc, schema)
    assert not problems, (f"document breaks docs/{schema}.schema.json:\n"
                          + "\n".join(problems[:20]))
