"""moto_server with S3's conditional writes made atomic, as they are on AWS: moto checks
`If-Match` / `If-None-Match` and then stores the object as two steps, and its server
answers requests on many threads, so two writers that read the same ETag could both
succeed and one update be lost (seen as a lost revocation under 46 concurrent writers).
Here every conditional PutObject runs its check and its write under one lock.
Arguments as moto_server's.
"""

import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_put_object = S3Response.put_object
_conditional = threading.Lock()


def _atomic_put_object(self):
    if self.headers.get("If-Match") or self.headers.get("If-None-Match"):
        with _conditional:
            return _put_object(self)
    return _put_object(self)


S3Response.put_object = _atomic_put_object

if __name__ == "__main__":
    main(sys.argv[1:])
