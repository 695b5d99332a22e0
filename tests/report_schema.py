"""The shipped schemas (tracer/data/{report,snapshot,doctor}.schema.json, what ``hangtrace schema
NAME`` prints) as validators for the tests.

``check(doc, schema="report")`` raises AssertionError naming every place where ``doc`` breaks the
schema. Each validator is built from ``resources.bundled_schema`` alone, with no registry and no
network: the snapshot schema's ``$ref`` to the report's evidence must resolve inside the one
document, as it does for a user offline. ``check_output(args, stdout)`` validates what a
``--json`` command printed (cli_run calls it for every command the tests run): one document, or
one per line (``watch`` without ``--once``), against the schema its ``format`` names. The validator
needs ``jsonschema`` (the ``test`` extra); CI installs it, and there (CI=true) a missing one is
an error, elsewhere the tests that need it skip with the reason.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, List, Sequence

import pytest

from tracer.resources import SCHEMAS, bundled_schema, schema_path

SCHEMA_PATH = schema_path("report")


def _load(name: str) -> dict:
    return bundled_schema(name)


def _jsonschema() -> Any:
    if os.environ.get("CI"):
        import jsonschema
        return jsonschema
    return pytest.importorskip(
        "jsonschema", reason="jsonschema is not installed (pip install -e '.[test]')")


@functools.lru_cache(maxsize=None)
def validator(schema: str = "report") -> Any:
    jsonschema = _jsonschema()
    doc = _load(schema)
    cls = jsonschema.validators.validator_for(doc)
    cls.check_schema(doc)
    return cls(doc, format_checker=cls.FORMAT_CHECKER)


def errors(doc: Any, schema: str = "report") -> list:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator(schema).iter_errors(doc),
                            key=lambda e: list(e.absolute_path))]


def check(doc: Any, schema: str = "report") -> None:
    problems = errors(doc, schema)
    assert not problems, (f"document breaks {schema}.schema.json:\n"
                          + "\n".join(problems[:20]))


def _documents(stdout: str) -> List[Any]:
    try:
        return [json.loads(stdout)]
    except ValueError:
        return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@functools.lru_cache(maxsize=None)
def schema_of_format() -> dict:
    """``hangtrace.report/1`` -> "report", and so on, from the schemas' own format consts."""
    return {_load(name)["properties"]["format"]["const"]: name for name in SCHEMAS}


def check_output(args: Sequence[str], stdout: str) -> None:
    """Validate a ``--json`` command's stdout against the schema its format names (module
    doc); a document whose format no schema has is an error."""
    if "--json" not in args or not stdout.strip():
        return
    try:
        docs = _documents(stdout)
    except ValueError:
        return                           # not JSON at all: the test itself says what it expects
    for doc in docs:
        if isinstance(doc, dict) and "format" in doc:
            assert doc["format"] in schema_of_format(), f"no schema for {doc['format']!r}"
            check(doc, schema_of_format()[doc["format"]])
