"""What one piped connection costs a `wisp serve` in memory: opens N HTTP/2 connections,
each making one authenticated ListUnhandledCommands call (or none with CALL=0), and
prints the server's RSS before and after, per connection. Frames are written by hand (no
HPACK indexing, no Huffman), so that nothing but the standard library is needed.

    python3 benches/fleet/conns.py HOST PORT N SERVER_PID "PIPED-TOKEN project,piped-id,key"

Run it within 30 s of the server's HTTP/2 keepalive (the connections do not answer its
pings).
"""
import os, socket, struct, sys, time
addr, port, n, pid, token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
call = os.environ.get("CALL", "1") == "1"
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
def frame(t, flags, sid, payload): return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload
def lit(name, value):
    name, value = name.encode(), value.encode()
    return b"\x00" + bytes([len(name)]) + name + (bytes([len(value)]) if len(value) < 127 else b"\x7f" + enc_int(len(value) - 127)) + value
def enc_int(v):
    out = b""
    while v >= 128: out += bytes([(v % 128) + 128]); v //= 128
    return out + bytes([v])
hdrs = b"".join([lit(":method", "POST"), lit(":scheme", "http"), lit(":path", "/grpc.service.pipedservice.PipedService/ListUnhandledCommands"),
    lit(":authority", f"{addr}:{port}"), lit("content-type", "application/grpc"), lit("te", "trailers"), lit("authorization", token)])
hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
req = frame(1, 4, 1, hdrs) + frame(0, 1, 1, b"\x00\x00\x00\x00\x00")
socks = []
def drain(ss, secs):
    time.sleep(secs)
    for s in ss:
        try:
            while s.recv(65536): pass
        except OSError: pass
def open_one():
    s = socket.create_connection((addr, port)); s.setblocking(False)
    s.sendall(hello + frame(4, 1, 0, b"") + (req if call else b""))
    return s
w = open_one(); time.sleep(1); drain([w], 1)
time.sleep(2)
base = rss(); t0 = time.time()
for i in range(n):
    socks.append(open_one())
    if i % 200 == 199: drain(socks, 0.2)
for _ in range(20): drain(socks, 0.2)
time.sleep(3); drain(socks, 0.5)
after = rss()
print(f"{n} connections{' each with one call' if call else ' (preface only)'}: RSS {base} -> {after} KiB, "
      f"{(after - base) / n:.1f} KiB per connection ({time.time() - t0:.1f} s)")
for s in socks: s.close()
w.close()
