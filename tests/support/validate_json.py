#!/usr/bin/env python3
"""Validates JSON on stdin against one of the schemas in docs/.

Usage: validate_json.py DOCS_DIR SCHEMA_FILE < document.json
Exit 0 when valid; 1 with every error on stderr otherwise. Uses the
maintained `jsonschema` package (Draft 2020-12) with a registry of every
schema in DOCS_DIR, so `$ref`s between them resolve offline.
"""
import json
import pathlib
import sys

from jsonschema import Draft202012Validator
from referencing import Registry, Resource


def main() -> int:
    docs = pathlib.Path(sys.argv[1])
    name = sys.argv[2]
    resources = []
    for path in sorted(docs.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        Draft202012Validator.check_schema(schema)
        resources.append((schema["$id"], Resource.from_contents(schema)))
    registry = Registry().with_resources(resources)
    schema = json.loads((docs / name).read_text())
    document = json.load(sys.stdin)
    validator = Draft202012Validator(schema, registry=registry)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    for e in errors:
        print(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
