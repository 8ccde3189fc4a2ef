#!/usr/bin/env python3
# Peak RSS of `wisp serve` under 100 concurrent gzip bombs: 16 KB on the wire, 16 MiB of
# empty ReportDeploymentPlanned stages once inflated (gigabytes once decoded).
#   python3 benches/hostile/bombs.py        # without credentials: UNAUTHENTICATED, unread
#   python3 benches/hostile/bombs.py auth   # a registered piped's key: RESOURCE_EXHAUSTED
# WISP=path/to/wisp (default target/release/wisp). Standard library only.
import gzip, http.client, os, struct, subprocess, tempfile, threading, time, sys
W = os.environ.get("WISP", "target/release/wisp")
d = tempfile.mkdtemp()
srv = subprocess.Popen([W, "serve", "--data-dir", d, "--addr", "127.0.0.1:18788", "--no-jobs"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
srv.stdout.readline()  # "wisp listening on ..."
time.sleep(1)
def status(field):
    for line in open(f"/proc/{srv.pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])
# 16 MiB of empty ReportDeploymentPlanned stages (field 6), gzipped.
payload = gzip.compress(b"\x32\x00" * (8 * 1024 * 1024), 9)
body = bytes([1]) + struct.pack(">I", len(payload)) + payload
def bomb(results, auth):
    c = http.client.HTTPConnection("127.0.0.1", 18788, timeout=60)
    headers = {"content-type": "application/grpc-web+proto", "grpc-encoding": "gzip"}
    if auth: headers["authorization"] = auth
    c.request("POST", "/grpc.service.pipedservice.PipedService/ReportDeploymentPlanned", body, headers)
    r = c.getresponse(); r.read()
    results.append(r.getheader("grpc-status"))
idle = status("VmRSS:")
auth = None
if len(sys.argv) > 1 and sys.argv[1] == "auth":
    out = subprocess.run([W, "piped", "add", "--project", "quickstart", "--name", "bomber", "--data-dir", d, "--json"], capture_output=True, text=True).stdout
    import json; p = json.loads(out)
    auth = f"PIPED-TOKEN quickstart,{p['id']},{p['key']}"
results = []
threads = [threading.Thread(target=bomb, args=(results, auth)) for _ in range(100)]
[t.start() for t in threads]; [t.join() for t in threads]
peak = status("VmHWM:")
print(f"bomb {len(body)} bytes on the wire; 100 concurrent; auth={'yes' if auth else 'no'}; "
      f"statuses {sorted(set(results))} x{len(results)}; idle RSS {idle} KiB, peak {peak} KiB, +{(peak-idle)/1024:.1f} MiB")
srv.terminate(); srv.wait()
