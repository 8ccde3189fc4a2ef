#!/usr/bin/env python3
"""A stand-in for the AWS Lambda API, just enough for the hashicorp/aws provider to update
functions that publish versions and move their aliases: infra/terraform/tests/
release.tftest.hcl applies a changed config_revision with the real provider against it,
so that the provider itself decides whether a new version is published (Terraform's own
overrides and mock providers skip the provider's plan, which is where that is decided).

It keeps per function its configuration, its published versions and its aliases.
A function or alias it has not seen is answered as if it existed at version 1 (the test's
earlier run "deployed" them with a mock provider). Every call is logged to stderr.

    lambda_stub.py PORT_FILE      # binds 127.0.0.1:0, writes the port to PORT_FILE
"""

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse, parse_qs

ACCOUNT = "123456789012"
REGION = "us-east-1"
functions = {}


def function(name):
    name = name.split(":")[-1] if name.startswith("arn:") else name
    if name not in functions:
        functions[name] = {
            "config": {
                "FunctionName": name,
                "FunctionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
                "Runtime": "provided.al2023",
                "Handler": "bootstrap",
                "Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
                "Architectures": ["arm64"],
                "MemorySize": 128,
                "Timeout": 3,
                "Description": "",
                "State": "Active",
                "LastUpdateStatus": "Successful",
                "PackageType": "Zip",
                "CodeSha256": "",
                "Version": "$LATEST",
                "RevisionId": "r0",
            },
            "versions": {"1": None},
            "aliases": {},
        }
    return functions[name]


def config(fn, version="$LATEST"):
    c = dict(fn["config"])
    if version != "$LATEST":
        c.update(fn["versions"].get(version) or {})
        c["Version"] = version
        c["FunctionArn"] = f"{c['FunctionArn']}:{version}"
    return c


def alias(fn, name):
    a = fn["aliases"].setdefault(name, {"FunctionVersion": "1", "Description": ""})
    return {
        "AliasArn": f"{fn['config']['FunctionArn']}:{name}",
        "Name": name,
        "FunctionVersion": a["FunctionVersion"],
        "Description": a["Description"],
        "RevisionId": "r0",
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("lambda_stub: " + (fmt % args) + "\n")

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def handle_any(self, method):
        url = urlparse(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        qualifier = (query.get("Qualifier") or ["$LATEST"])[0]
        m = re.match(r"^/[0-9-]+/functions/([^/]+)(/.*)?$", path)
        if re.match(r"^/[0-9-]+/tags/", path):
            return self.answer(200, {"Tags": {}})
        if not m:
            return self.answer(404, {"Type": "User", "message": f"stub: no route {method} {path}"})
        fn, rest = function(m.group(1)), m.group(2) or ""
        if rest == "" and method == "GET":
            return self.answer(200, {"Configuration": config(fn, qualifier), "Code": {"RepositoryType": "S3"}, "Tags": {}})
        if rest == "/configuration" and method == "GET":
            return self.answer(200, config(fn, qualifier))
        if rest == "/configuration" and method == "PUT":
            fn["config"].update({k: v for k, v in self.body().items() if not isinstance(v, dict) or k == "Environment"})
            return self.answer(200, config(fn))
        if rest == "/versions" and method == "POST":
            number = str(max(int(v) for v in fn["versions"]) + 1)
            fn["versions"][number] = dict(fn["config"])
            return self.answer(201, config(fn, number))
        if rest == "/versions" and method == "GET":
            return self.answer(200, {"Versions": [config(fn)] + [config(fn, v) for v in sorted(fn["versions"], key=int)]})
        m2 = re.match(r"^/aliases/([^/]+)$", rest)
        if m2 and method in ("GET", "PUT"):
            if method == "PUT":
                a = fn["aliases"].setdefault(m2.group(1), {"FunctionVersion": "1", "Description": ""})
                a.update({k: v for k, v in self.body().items() if k in ("FunctionVersion", "Description")})
            return self.answer(200, alias(fn, m2.group(1)))
        if rest == "/code-signing-config":
            return self.answer(200, {"FunctionName": fn["config"]["FunctionName"]})
        if rest in ("/runtime-management-config",):
            return self.answer(200, {"UpdateRuntimeOn": "Auto"})
        if rest in ("/concurrency",):
            return self.answer(200, {})
        if rest.startswith("/policy"):
            return self.answer(404, {"Type": "User", "message": "no policy"})
        if rest.startswith("/event-invoke-config"):
            return self.answer(404, {"Type": "User", "message": "none"})
        return self.answer(404, {"Type": "User", "message": f"stub: no route {method} {path}"})

    def do_GET(self):
        self.handle_any("GET")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()
