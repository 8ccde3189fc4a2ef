"""moto_server for scripts/moto.sh start-iam: atomic conditional writes
(scripts/lib/moto_atomic.py), and two fixes to its IAM check (moto 5.x), both in this
stand-in only, never in Wisp's code:

1. moto verifies a request's signature against the URL as Flask decoded it, so a query
   with an escaped character (ListObjectsV2 with `prefix=wisp%2Flog%2F`, as every SDK
   sends it) fails with SignatureDoesNotMatch although the request is correctly signed.
   Here the check sees the query exactly as sent.
2. moto's IAM check reads the credentials from the `Authorization` header only
   (`IAMRequestBase.__init__` indexes `headers["Authorization"]`), so a presigned S3 URL
   (SigV4 query authentication: `X-Amz-Credential`, `X-Amz-Signature` in the query, no
   header), which AWS verifies and authorizes as its signer, ends in a KeyError: HTTP
   500. The `http` function answers the console's bundles with such URLs, so the
   browser got no script. Here a presigned S3 request is checked as AWS checks it: the
   query signature (SigV4, payload UNSIGNED-PAYLOAD), its expiry (`X-Amz-Date` +
   `X-Amz-Expires`), then the signer's policies for the action on the object. An S3
   request with neither is refused as anonymous (403 AccessDenied) instead of a 500.

Arguments as moto_server's.
"""

import datetime
import hashlib
import hmac
import sys
from urllib.parse import quote, unquote

import moto_atomic  # noqa: F401  (patches S3's conditional writes on import)
from moto.core.authorization import ActionAuthenticatorMixin
from moto.iam.access_control import S3IAMRequest, create_access_key
from moto.s3.exceptions import S3AccessDeniedError, S3ClientError
from moto.server import main
from moto.utilities.utils import get_partition

_check = ActionAuthenticatorMixin._authenticate_and_authorize_action

SIGNATURE = "X-Amz-Signature"


def _query_pairs(path):
    """The (name, value) pairs of `path`'s query, percent-decoded."""
    query = path.split("?", 1)[1] if "?" in path else ""
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


def _uri_encode(s):
    # SigV4's encoding: everything but the unreserved characters.
    return quote(s, safe="-_.~")


def _hmac(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


class PresignedS3IAMRequest(S3IAMRequest):
    """An S3 request authenticated by its query (a presigned URL), as AWS checks it."""

    def __init__(self, account_id, method, path, data, body, headers, action):
        self.account_id = account_id
        self._method = method
        self._path = path
        self._data = data
        self._body = body
        self._headers = headers
        self._params = dict(_query_pairs(path))
        credential = self._params["X-Amz-Credential"].split("/")
        self._credential = credential
        self._region = credential[2]
        self._service = credential[3]
        self._action = f"{self._service}:{action[0] if isinstance(action, list) else action}"
        token_headers = dict(headers)
        if "X-Amz-Security-Token" in self._params:
            token_headers["X-Amz-Security-Token"] = self._params["X-Amz-Security-Token"]
        try:
            self._access_key = create_access_key(
                account_id=self.account_id,
                partition=get_partition(self._region),
                access_key_id=credential[0],
                headers=token_headers,
            )
        except Exception as e:  # moto's CreateAccessKeyFailure
            self._raise_invalid_access_key(getattr(e, "reason", "InvalidId"))

    def check_signature(self):
        params = self._params
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            raise S3AccessDeniedError()
        amz_date = params["X-Amz-Date"]
        signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc
        )
        expires = int(params.get("X-Amz-Expires", "0"))
        if datetime.datetime.now(datetime.timezone.utc) > signed_at + datetime.timedelta(
            seconds=expires
        ):
            raise S3ClientError("AccessDenied", "Request has expired")
        path = self._path.split("?", 1)[0]
        canonical_uri = quote(unquote(path), safe="/-_.~")
        canonical_query = "&".join(
            f"{_uri_encode(k)}={_uri_encode(v)}"
            for k, v in sorted(_query_pairs(self._path))
            if k != SIGNATURE
        )
        signed = params.get("X-Amz-SignedHeaders", "host").split(";")
        lower = {k.lower(): v for k, v in self._headers.items()}
        canonical_headers = "".join(
            f"{h}:{' '.join(str(lower.get(h, '')).split())}\n" for h in signed
        )
        payload = params.get("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
        canonical = "\n".join(
            [self._method, canonical_uri, canonical_query, canonical_headers, ";".join(signed), payload]
        )
        scope = "/".join(self._credential[1:])
        to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256",
                amz_date,
                scope,
                hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
            ]
        )
        secret = self._access_key.create_credentials().secret_key
        key = _hmac(f"AWS4{secret}".encode("utf-8"), self._credential[1])
        for part in self._credential[2:]:
            key = _hmac(key, part)
        calculated = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(calculated, params.get(SIGNATURE, "")):
            self._raise_signature_does_not_match()


class _Anonymous:
    """An S3 request that carries no credentials: refused, as on a private bucket."""

    def __init__(self, **_):
        pass

    def check_signature(self):
        raise S3AccessDeniedError()

    def check_action_permitted(self, _resource):
        raise S3AccessDeniedError()


def _request_class(iam_request_cls, headers, query):
    """The check for this request: moto's, or one for presigned or anonymous S3 ones."""
    if iam_request_cls is not S3IAMRequest or "Authorization" in headers:
        return iam_request_cls
    names = {part.partition("=")[0] for part in query.split("&")}
    if "X-Amz-Credential" in names and SIGNATURE in names:
        return PresignedS3IAMRequest
    return _Anonymous


def _check_raw_query(self, iam_request_cls, resource="*"):
    from flask import has_request_context, request

    if not has_request_context():
        return _check(self, iam_request_cls, resource)
    decoded = self.uri
    query = request.query_string.decode("latin-1")
    self.uri = decoded.split("?", 1)[0] + (f"?{query}" if query else "")
    try:
        return _check(self, _request_class(iam_request_cls, self.headers, query), resource)
    finally:
        self.uri = decoded


ActionAuthenticatorMixin._authenticate_and_authorize_action = _check_raw_query

if __name__ == "__main__":
    main(sys.argv[1:])
