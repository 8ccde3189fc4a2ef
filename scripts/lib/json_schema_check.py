#!/usr/bin/env python3
"""Validates each YAML document of FILE whose `kind` is KIND against the JSON schema
SCHEMA (draft 2020-12), for objects kubernetes-validate has no schema for (custom
resources such as the Prometheus Operator's ServiceMonitor). Prints one line per document
checked; exits 1 on the first invalid one, naming the field, 2 when none has that kind.

    scripts/lib/json_schema_check.py SCHEMA KIND FILE

Needs PyYAML and jsonschema (kubernetes-validate depends on both).
"""

import json
import sys

import jsonschema
import yaml


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    schema_path, kind, path = sys.argv[1:]
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if isinstance(d, dict) and d.get("kind") == kind]
    if not docs:
        print(f"no {kind} in {path}", file=sys.stderr)
        sys.exit(2)
    for doc in docs:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        name = doc.get("metadata", {}).get("name")
        if errors:
            for e in errors:
                where = ".".join(str(p) for p in e.absolute_path) or "(top)"
                print(f"{kind} {name}: {where}: {e.message}", file=sys.stderr)
            sys.exit(1)
        print(f"{kind} {name}: valid")


if __name__ == "__main__":
    main()
