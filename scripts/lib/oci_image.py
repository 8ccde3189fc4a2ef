#!/usr/bin/env python3
"""Writes Wisp's OCI image layout: one layer per platform on an empty base, reproducibly.

`scripts/image build` calls this with the `wisp` binary and SBOM of each platform. The
layer holds only:

  /usr/local/bin/wisp                    the binary (static; or, for a dynamically linked
                                         binary such as a test build, its ELF interpreter
                                         and libraries under their own paths)
  /etc/ssl/certs/ca-certificates.crt     Debian's ca-certificates bundle
  /etc/passwd, /etc/group                root and the user `wisp` (65532), no shell
  /etc/nsswitch.conf                     hosts: files dns (static glibc resolves both)
  /etc/hosts                             localhost (runtimes usually mount their own)
  /home/wisp (65532), /tmp (1777)        writable places for a non-root user
  /usr/share/doc/wisp/sbom.spdx.json     the SBOM (SPDX 2.3) of the binary

Same inputs, same bytes: entries sorted by name, every mtime SOURCE_DATE_EPOCH, numeric
owners without names, gzip without a timestamp, JSON with sorted keys. The layout's
index.json names one image index (tag TAG) with a manifest per platform; its digest is the
image's digest, which `skopeo copy --all --preserve-digests` keeps in a registry.
"""

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile

USER_ID = 65532
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
BINARY = "/usr/local/bin/wisp"
SBOM = "/usr/share/doc/wisp/sbom.spdx.json"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Layout:
    def __init__(self, path):
        self.path = path
        if os.path.exists(path):
            shutil.rmtree(path)
        os.makedirs(os.path.join(path, "blobs", "sha256"))
        with open(os.path.join(path, "oci-layout"), "wb") as f:
            f.write(canonical({"imageLayoutVersion": "1.0.0"}))

    def blob(self, data, media_type):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.path, "blobs", "sha256", digest), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def elf_interpreter(path):
    """The PT_INTERP of a 64-bit little-endian ELF file, or None (static)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"oci_image: {path} is not a 64-bit little-endian ELF binary")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        off = phoff + i * phentsize
        p_type, = struct.unpack_from("<I", data, off)
        if p_type == 3:  # PT_INTERP
            p_offset, = struct.unpack_from("<Q", data, off + 8)
            p_filesz, = struct.unpack_from("<Q", data, off + 32)
            return data[p_offset : p_offset + p_filesz].rstrip(b"\0").decode()
    return None


def shared_libraries(binary):
    """For a dynamically linked binary of this machine: (path in image, file) of its
    interpreter and every library `ldd` resolves."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target.startswith("/"):
                libs.append((target, os.path.realpath(target)))
        elif parts and parts[0].startswith("/"):
            libs.append((parts[0], os.path.realpath(parts[0])))
    return sorted(set(libs))


def layer(binary, sbom, ca_bundle, epoch):
    files = {}  # path in image -> (bytes, mode, uid)

    def add(path, data, mode=0o644, uid=0):
        files[path.lstrip("/")] = (data, mode, uid)

    with open(binary, "rb") as f:
        add(BINARY, f.read(), 0o755)
    linking = "static"
    if elf_interpreter(binary):
        linking = "dynamic"
        for path, real in shared_libraries(binary):
            with open(real, "rb") as f:
                add(path, f.read(), 0o755)
    with open(ca_bundle, "rb") as f:
        add(CA_BUNDLE, f.read())
    with open(sbom, "rb") as f:
        add(SBOM, f.read())
    add(
        "/etc/passwd",
        b"root:x:0:0:root:/root:/nonexistent\n"
        + f"wisp:x:{USER_ID}:{USER_ID}:wisp:/home/wisp:/nonexistent\n".encode(),
    )
    add("/etc/group", f"root:x:0:\nwisp:x:{USER_ID}:\n".encode())
    add("/etc/nsswitch.conf", b"hosts: files dns\n")
    # Runtimes (Kubernetes, podman) mount their own; runc and chroot see this one.
    add("/etc/hosts", b"127.0.0.1 localhost\n::1 localhost\n")

    dirs = {"home/wisp": (0o755, USER_ID), "tmp": (0o1777, 0)}
    for path in list(files):
        parent = os.path.dirname(path)
        while parent:
            dirs.setdefault(parent, (0o755, 0))
            parent = os.path.dirname(parent)
    for path in list(dirs):
        parent = os.path.dirname(path)
        while parent:
            dirs.setdefault(parent, (0o755, 0))
            parent = os.path.dirname(parent)

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(set(files) | set(dirs)):
            info = tarfile.TarInfo(name)
            info.mtime = epoch
            info.uname = info.gname = ""
            if name in dirs:
                info.type = tarfile.DIRTYPE
                info.mode, uid = dirs[name]
                info.uid = info.gid = uid
                tar.addfile(info)
            else:
                data, info.mode, uid = files[name]
                info.uid = info.gid = uid
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    # WISP_IMAGE_GZIP_LEVEL=1 makes the tests' images (a 130 MB debug binary) quicker;
    # any one level gives the same bytes each time.
    level = int(os.environ.get("WISP_IMAGE_GZIP_LEVEL", "9"))
    return tar_bytes, gzip.compress(tar_bytes, compresslevel=level, mtime=0), linking


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="the OCI layout directory (replaced)")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--ca-bundle", default=CA_BUNDLE)
    ap.add_argument(
        "--platform",
        action="append",
        required=True,
        help="ARCH=BINARY,SBOM (amd64 or arm64)",
    )
    args = ap.parse_args()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    labels = {
        "org.opencontainers.image.title": "wisp",
        "org.opencontainers.image.description": (
            "Wisp, a serverless PipeCD control plane: wisp serve, wisp bridge, "
            "the admin CLI, wisp migrate, wisp import pipecd"
        ),
        "org.opencontainers.image.source": args.source,
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.version": args.version,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.created": created,
    }

    layout = Layout(args.out)
    manifests = []
    for spec in args.platform:
        arch, _, paths = spec.partition("=")
        binary, _, sbom = paths.partition(",")
        if arch not in ("amd64", "arm64") or not binary or not sbom:
            sys.exit(f"oci_image: bad --platform {spec!r} (ARCH=BINARY,SBOM)")
        tar_bytes, gz, linking = layer(binary, sbom, args.ca_bundle, epoch)
        layer_desc = layout.blob(gz, LAYER)
        config = {
            "architecture": arch,
            "os": "linux",
            "created": created,
            "config": {
                "User": f"{USER_ID}:{USER_ID}",
                "Entrypoint": [BINARY],
                "Cmd": ["--help"],
                "Env": [
                    "PATH=/usr/local/bin",
                    "HOME=/home/wisp",
                    f"SSL_CERT_FILE={CA_BUNDLE}",
                ],
                "WorkingDir": "/home/wisp",
                "Labels": dict(labels, **{"dev.wisp.linking": linking}),
            },
            "rootfs": {
                "type": "layers",
                "diff_ids": ["sha256:" + hashlib.sha256(tar_bytes).hexdigest()],
            },
            "history": [{"created": created, "created_by": "scripts/image build"}],
        }
        if arch == "arm64":
            config["variant"] = "v8"
        config_desc = layout.blob(canonical(config), CONFIG)
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": config_desc,
            "layers": [layer_desc],
            "annotations": dict(labels, **{"dev.wisp.sbom": SBOM}),
        }
        desc = layout.blob(canonical(manifest), MANIFEST)
        desc["platform"] = {"architecture": arch, "os": "linux"}
        if arch == "arm64":
            desc["platform"]["variant"] = "v8"
        manifests.append(desc)
        print(
            f"oci_image: linux/{arch}: layer {layer_desc['size']} bytes compressed "
            f"({len(tar_bytes)} uncompressed), binary {linking}",
            file=sys.stderr,
        )

    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": sorted(manifests, key=lambda d: d["platform"]["architecture"]),
        "annotations": labels,
    }
    index_desc = layout.blob(canonical(index), INDEX)
    index_desc["annotations"] = {"org.opencontainers.image.ref.name": args.tag}
    with open(os.path.join(args.out, "index.json"), "wb") as f:
        f.write(
            canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": [index_desc]})
        )
    print(index_desc["digest"])


if __name__ == "__main__":
    main()
