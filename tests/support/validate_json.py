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

try:  # jsonschema >= 4.18 resolves $ref through a registry
    from referencing import Registry, Resource
except ImportError:  # older releases (Debian 12 ships 4.10) use RefResolver
    Registry = None


def main() -> int:
    docs = pathlib.Path(sys.argv[1])
    name = sys.argv[2]
    schemas = {}
    for path in sorted(docs.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        Draft202012Validator.check_schema(schema)
        schemas[schema["$id"]] = schema
    schema = json.loads((docs / name).read_text())
    document = json.load(sys.stdin)
    if Registry is not None:
        registry = Registry().with_resources(
            (uri, Resource.from_contents(s)) for uri, s in schemas.items()
        )
        validator = Draft202012Validator(schema, registry=registry)
    else:
        from jsonschema import RefResolver

        resolver = RefResolver.from_schema(schema, store=schemas)
        validator = Draft202012Validator(schema, resolver=resolver)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    for e in errors:
        print(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
