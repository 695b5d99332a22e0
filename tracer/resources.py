"""Where hangtrace's data files are: the BPF C programs, the demo's scenario programs and the
JSON schemas of ``--json``.

Contract: the source checkout keeps them at the top (``bpf/``, ``fixtures/scenarios/``); the
build maps them into the package as ``tracer.bpf`` and ``tracer.scenarios`` (setup.py's
package-dir), so a wheel carries them. ``bpf_dir()`` and ``scenario_dir()`` return a real
directory, found as ``_data_dir`` says (hangtrace is never run from a zip: BCC and gcc need
file paths). ``is_checkout(dir)`` tells a folder of the source tree from one inside the
installed package. The schemas (draft 2020-12, tracer/data/NAME.schema.json, NAME one of
``SCHEMAS``): ``schema(name)`` is one as shipped, ``bundled_schema(name)`` one document that
resolves with nothing else (``hangtrace schema NAME`` prints it). An unknown name is a
KeyError.
"""
from __future__ import annotations

import importlib.resources
import json
import re
from pathlib import Path
from typing import Any, Dict

__all__ = ["bpf_dir", "scenario_dir", "is_checkout", "PACKAGE_DIR", "SCHEMAS", "schema_path",
           "schema", "bundled_schema"]

PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMAS = ("report", "snapshot", "doctor")
_SCHEMA_REF = re.compile(r'"\$ref": "([a-z]+)\.schema\.json#')
_CHECKOUT = {"tracer.bpf": "bpf", "tracer.scenarios": "fixtures/scenarios"}


def _data_dir(package: str) -> Path:
    """The folder of ``package``'s data. The scenarios' ``__init__.py`` is written by the build:
    the source folder has none. Both packages are found through ``importlib.resources``: in an
    installed copy, and for ``tracer.bpf`` in a checkout with an editable install too; where the
    package cannot be imported (the scenarios in a checkout, whose folder has no ``__init__.py`` so
    that py-spy and tracebacks name a scenario by its file, or a checkout run without installing,
    ``PYTHONPATH=.``) the folders beside the package are used."""
    try:
        found = importlib.resources.files(package)
    except ModuleNotFoundError:          # a checkout run without installing
        return PACKAGE_DIR.parent / _CHECKOUT[package]
    if not isinstance(found, Path):          # a namespace package: its one folder
        children = list(found.iterdir())
        if not children or not isinstance(children[0], Path):
            raise RuntimeError(f"{package} is not a directory on disk ({found!r}): install "
                               "hangtrace unzipped")
        found = children[0].parent
    return found.resolve()


def bpf_dir() -> Path:
    """The folder of the BPF C programs (hangtrace.bpf.c, its parts, cuda_calls.bpf.c), and of
    their CO-RE objects (*.bpf.o) where the build made them."""
    return _data_dir("tracer.bpf")


def scenario_dir() -> Path:
    """The folder of the demo's scenario programs (Python and C, fixtures/scenarios/)."""
    return _data_dir("tracer.scenarios")


def is_checkout(path: Path) -> bool:
    """True for a data folder of the source tree (beside the package, not inside it).
    The C scenarios are built beside their sources in the first, in a cache directory in the
    second: record/demo.py."""
    return PACKAGE_DIR not in Path(path).resolve().parents


def schema_path(name: str) -> Path:
    """The shipped schema file of ``name``. The schemas ship in the package with relative ``$id``s
    ("report.schema.json"), so that a ``$ref`` from one to another
    ("report.schema.json#/$defs/evidence") resolves beside it, offline."""
    if name not in SCHEMAS:
        raise KeyError(name)
    return PACKAGE_DIR / "data" / f"{name}.schema.json"


def schema(name: str) -> Dict[str, Any]:
    """One schema as shipped (module doc)."""
    return json.loads(schema_path(name).read_text())


def bundled_schema(name: str) -> Dict[str, Any]:
    """``name``'s schema with every schema it refers to embedded under ``$defs`` (each keeping its
    ``$id``: draft 2020-12's bundling), one document that resolves with nothing else."""
    doc = schema(name)
    refers = sorted(set(_SCHEMA_REF.findall(schema_path(name).read_text())) - {name})
    if refers:
        doc["$defs"] = {**doc.get("$defs", {}), **{f"{r}.schema.json": schema(r)
                                                    for r in refers}}
    return doc
