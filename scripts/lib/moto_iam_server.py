"""moto_server for scripts/moto.sh start-iam: atomic conditional writes
(scripts/lib/moto_atomic.py), and one fix to its IAM check: moto
verifies a request's signature against the URL as Flask decoded it, so a query with an
escaped character (ListObjectsV2 with `prefix=wisp%2Flog%2F`, as every SDK sends it)
fails with SignatureDoesNotMatch although the request is correctly signed. Here the
check sees the query exactly as sent. Arguments as moto_server's.
"""

import sys

import moto_atomic  # noqa: F401  (patches S3's conditional writes on import)
from moto.core.authorization import ActionAuthenticatorMixin
from moto.server import main

_check = ActionAuthenticatorMixin._authenticate_and_authorize_action


def _check_raw_query(self, iam_request_cls, resource="*"):
    from flask import has_request_context, request

    if not has_request_context():
        return _check(self, iam_request_cls, resource)
    decoded = self.uri
    query = request.query_string.decode("latin-1")
    self.uri = decoded.split("?", 1)[0] + (f"?{query}" if query else "")
    try:
        return _check(self, iam_request_cls, resource)
    finally:
        self.uri = decoded


ActionAuthenticatorMixin._authenticate_and_authorize_action = _check_raw_query

if __name__ == "__main__":
    main(sys.argv[1:])
