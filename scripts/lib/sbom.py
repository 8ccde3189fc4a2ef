#!/usr/bin/env python3
"""The SBOM of the `wisp` binary: SPDX 2.3 JSON of every crate compiled into it.

Reads `cargo metadata --locked --format-version 1 --filter-platform TRIPLE` on stdin (the
dependency graph as Cargo resolved it from Cargo.lock for that target) and Cargo.lock's
checksums, follows the normal (not dev, not build) dependencies of the root package and
writes SPDX JSON to stdout. Deterministic: packages sorted, `created` from
SOURCE_DATE_EPOCH, the namespace from the revision, so that the image stays reproducible.

    cargo metadata ... | scripts/lib/sbom.py --lock Cargo.lock --revision REV \
        --version V --source URL --arch amd64 > sbom.spdx.json
"""

import argparse
import datetime
import json
import os
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def spdx_id(name, version):
    return "SPDXRef-Package-" + re.sub(r"[^A-Za-z0-9.-]", "-", f"{name}-{version}")


def license_expression(text):
    """Cargo's licence field as an SPDX expression ("MIT/Apache-2.0" is the old form of
    "MIT OR Apache-2.0")."""
    if not text:
        return "NOASSERTION"
    return " OR ".join(part.strip() for part in text.split("/")) if "/" in text else text


def lock_checksums(path):
    if tomllib is None:
        return {}
    with open(path, "rb") as f:
        lock = tomllib.load(f)
    return {
        (p["name"], p["version"]): p["checksum"]
        for p in lock.get("package", [])
        if "checksum" in p
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--root", default="wisp")
    args = ap.parse_args()

    meta = json.load(sys.stdin)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next(
        p["id"] for p in meta["packages"] if p["name"] == args.root and p["source"] is None
    )

    # The crates linked into the binary: normal dependencies, transitively.
    linked, edges, todo = {root}, set(), [root]
    while todo:
        node = nodes[todo.pop()]
        for dep in node["deps"]:
            if not any(k["kind"] is None for k in dep["dep_kinds"]):
                continue
            edges.add((node["id"], dep["pkg"]))
            if dep["pkg"] not in linked:
                linked.add(dep["pkg"])
                todo.append(dep["pkg"])

    checksums = lock_checksums(args.lock)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )

    def package(pid):
        p = packages[pid]
        entry = {
            "SPDXID": spdx_id(p["name"], p["version"]),
            "name": p["name"],
            "versionInfo": p["version"],
            "supplier": "NOASSERTION",
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": license_expression(p.get("license")),
            "copyrightText": "NOASSERTION",
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": f"pkg:cargo/{p['name']}@{p['version']}",
                }
            ],
        }
        source = p.get("source") or ""
        if source.startswith("registry+https://github.com/rust-lang/crates.io-index"):
            entry["downloadLocation"] = (
                f"https://crates.io/api/v1/crates/{p['name']}/{p['version']}/download"
            )
        elif not source:
            # A crate of this workspace.
            entry["downloadLocation"] = args.source
            entry["versionInfo"] = args.version
            entry["sourceInfo"] = f"revision {args.revision}"
        checksum = checksums.get((p["name"], p["version"]))
        if checksum:
            entry["checksums"] = [{"algorithm": "SHA256", "checksumValue": checksum}]
        return entry

    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"wisp-{args.version}-linux-{args.arch}",
        "documentNamespace": f"{args.source}/spdx/{args.revision}/linux-{args.arch}",
        "creationInfo": {
            "created": created,
            "creators": ["Tool: wisp scripts/lib/sbom.py (cargo metadata, Cargo.lock)"],
        },
        "documentDescribes": [spdx_id(packages[root]["name"], packages[root]["version"])],
        "packages": sorted(
            (package(pid) for pid in linked), key=lambda e: (e["name"], e["versionInfo"])
        ),
        "relationships": sorted(
            [
                {
                    "spdxElementId": "SPDXRef-DOCUMENT",
                    "relationshipType": "DESCRIBES",
                    "relatedSpdxElement": spdx_id(
                        packages[root]["name"], packages[root]["version"]
                    ),
                }
            ]
            + [
                {
                    "spdxElementId": spdx_id(packages[a]["name"], packages[a]["version"]),
                    "relationshipType": "DEPENDS_ON",
                    "relatedSpdxElement": spdx_id(
                        packages[b]["name"], packages[b]["version"]
                    ),
                }
                for a, b in edges
            ],
            key=lambda r: (r["spdxElementId"], r["relationshipType"], r["relatedSpdxElement"]),
        ),
    }
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
