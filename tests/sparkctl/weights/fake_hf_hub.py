#!/usr/bin/env python3
"""A small stand-in for the Hugging Face Hub, for tests that run the real `hf` client.

It serves local folders as model repositories the way the Hub does, on two ports of one
address (loopback or the simulator's management bridge), reached through HF_ENDPOINT:

  hub port
    GET  /api/models/{repo}/revision/{rev}        model info (sha, siblings; ?blobs=1 sizes
                                                    and LFS hashes; ?expand=... only those keys)
    GET  /api/models/{repo}/tree/{rev}[/{path}]    file listing (?recursive=1), one page
    HEAD /{repo}/resolve/{rev}/{path}              small files: 200, ETag = git blob id,
    GET  /{repo}/resolve/{rev}/{path}              Content-Length, X-Repo-Commit (Range on GET);
                                                    LFS files: 302 to the "CDN" port with
                                                    X-Linked-Etag (SHA-256), X-Linked-Size,
                                                    X-Repo-Commit, Location
  cdn port (another origin, so the client does not forward its token, as with the Hub's CDN)
    HEAD/GET /lfs/{sha256}                          the LFS object, Range -> 206 Content-Range

Errors as the Hub gives them (status plus X-Error-Code / X-Error-Message, which
huggingface_hub turns into its typed errors): an unknown repository 401 RepoNotFound (404 when a
token was sent), a gated repository 401 GatedRepo without a token and 403 GatedRepo with a token
that was not granted, an unknown revision 404 RevisionNotFound, an unknown file 404
EntryNotFound. Revisions: the repository's commit, any prefix of it of 7+ digits, or "main".

Files of at least --lfs-threshold bytes (or *.safetensors) are LFS files, as git-lfs would store
them. --rate throttles the CDN's bodies (bytes/s) so a test can interrupt a download;
--drop-after N closes the CDN's connection once per object after N bytes of a whole-object GET
(a network interruption the client must resume with a Range request); every request is appended to --log as one JSON line (method, path, status, range start, bytes sent).
Once both ports listen, "HUB_PORT CDN_PORT" is written to --ready-file.

Usage: fake_hf_hub.py --bind 127.0.0.1 --repo OWNER/NAME=DIR@COMMIT[,gated] [--grant TOKEN]
"""
import argparse
import hashlib
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

POINTER_SIZE = 134  # size of a git-lfs pointer file with a 64-digit oid and a short size


class Repo:
    def __init__(self, name, folder, commit, gated):
        self.name = name
        self.commit = commit
        self.gated = gated
        self.files = {}  # path -> dict(size, blob_id, sha256, lfs, full)
        for root, _, names in os.walk(folder):
            for n in sorted(names):
                full = os.path.join(root, n)
                rel = os.path.relpath(full, folder).replace(os.sep, "/")
                with open(full, "rb") as f:
                    data = f.read()
                blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
                self.files[rel] = {"size": len(data), "blob_id": blob,
                                   "sha256": hashlib.sha256(data).hexdigest(), "full": full}

    def mark_lfs(self, threshold):
        for path, f in self.files.items():
            f["lfs"] = f["size"] >= threshold or path.endswith(".safetensors")

    def resolves(self, rev):
        return rev == "main" or (len(rev) >= 7 and self.commit.startswith(rev))


class Hub:
    def __init__(self, args):
        self.repos = {}
        for spec in args.repo:
            name, rest = spec.split("=", 1)
            folder, rest = rest.split("@", 1)
            commit, _, flags = rest.partition(",")
            repo = Repo(name, folder, commit, gated=(flags == "gated"))
            repo.mark_lfs(args.lfs_threshold)
            self.repos[name] = repo
        self.grants = set(args.grant)
        self.rate = args.rate
        self.drop_after = args.drop_after
        self.dropped = set()  # objects whose first transfer was cut
        self.log_path = args.log
        self.log_lock = threading.Lock()
        self.cdn_base = None  # "http://ADDR:PORT", set once the CDN port is known
        self.by_sha = {}
        for repo in self.repos.values():
            for f in repo.files.values():
                self.by_sha[f["sha256"]] = f

    def log(self, entry):
        if not self.log_path:
            return
        with self.log_lock, open(self.log_path, "a") as out:
            out.write(json.dumps(entry) + "\n")


def parse_range(header, size):
    """Start and end (inclusive) of a 'bytes=A-[B]' header, or None."""
    if not header or not header.startswith("bytes="):
        return None
    first = header[len("bytes="):].split(",")[0]
    a, _, b = first.partition("-")
    if a == "":
        return None
    start = int(a)
    end = int(b) if b else size - 1
    return start, min(end, size - 1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub = None  # set on the class per server
    is_cdn = False

    def log_message(self, fmt, *args):  # quiet: the JSON log says what happened
        pass

    # ---- plumbing ----
    def reply(self, status, headers=None, body=b"", log=None):
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        self.hub.log(dict(log or {}, method=self.command, path=self.path, status=status,
                          cdn=self.is_cdn))

    def reply_json(self, obj, headers=None):
        h = {"Content-Type": "application/json; charset=utf-8"}
        h.update(headers or {})
        self.reply(200, h, json.dumps(obj).encode())

    def error(self, status, code, message):
        self.reply(status, {"X-Error-Code": code, "X-Error-Message": message,
                            "Content-Type": "application/json"},
                   json.dumps({"error": message}).encode())

    def token(self):
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None

    def send_file(self, f, extra_headers):
        size = f["size"]
        rng = parse_range(self.headers.get("Range"), size) if self.command == "GET" else None
        start, end = (rng if rng else (0, size - 1))
        length = max(0, end - start + 1)
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes",
                   "Content-Length": str(length if rng else size)}
        headers.update(extra_headers)
        status = 200
        if rng:
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        sent = 0
        cut_at = None
        if self.is_cdn and self.hub.drop_after and not rng and f["sha256"] not in self.hub.dropped:
            self.hub.dropped.add(f["sha256"])
            cut_at = self.hub.drop_after
        if self.command == "GET":
            with open(f["full"], "rb") as src:
                src.seek(start)
                left = length
                chunk = 65536
                began = time.monotonic()
                try:
                    while left > 0:
                        if cut_at is not None and sent >= cut_at:
                            self.close_connection = True
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            break
                        data = src.read(min(chunk, left, (cut_at - sent) if cut_at else chunk))
                        if not data:
                            break
                        self.wfile.write(data)
                        sent += len(data)
                        left -= len(data)
                        if self.hub.rate:
                            ahead = sent / self.hub.rate - (time.monotonic() - began)
                            if ahead > 0:
                                time.sleep(ahead)
                except (BrokenPipeError, ConnectionResetError):
                    pass
        self.hub.log({"method": self.command, "path": self.path, "status": status,
                      "cdn": self.is_cdn, "range_start": start if rng else None, "sent": sent,
                      "cut": cut_at is not None})

    # ---- routing ----
    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        if self.is_cdn:
            if len(parts) == 2 and parts[0] == "lfs" and parts[1] in self.hub.by_sha:
                f = self.hub.by_sha[parts[1]]
                return self.send_file(f, {"ETag": '"%s"' % f["sha256"]})
            return self.reply(404, {}, b"no such object")
        if len(parts) >= 5 and parts[0] == "api" and parts[1] == "models":
            return self.api(parts[2] + "/" + parts[3], parts[4:], query)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]))
        return self.reply(404, {}, b"not found")

    def check_access(self, name, rev):
        """The repo when the request may see `rev` of it; else None after replying an error."""
        repo = self.hub.repos.get(name)
        token = self.token()
        if repo is None:
            self.error(404 if token else 401, "RepoNotFound", "Repository not found")
            return None
        if repo.gated and token not in self.hub.grants:
            if token is None:
                self.error(401, "GatedRepo", "Access to model %s is restricted. You must have "
                           "access to it and be authenticated to access it. Please log in." % name)
            else:
                self.error(403, "GatedRepo", "Access to model %s is restricted and you are not "
                           "in the authorized list. Visit %s to ask for access." % (name, name))
            return None
        if not repo.resolves(rev):
            self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
            return None
        return repo

    def api(self, name, rest, query):
        if len(rest) >= 2 and rest[0] in ("revision", "tree"):
            repo = self.check_access(name, rest[1])
            if repo is None:
                return
            if rest[0] == "revision":
                return self.reply_json(self.model_info(repo, query))
            prefix = "/".join(rest[2:])
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            return self.reply_json(self.tree(repo, prefix, recursive))
        return self.reply(404, {}, b"not found")

    def sibling(self, path, f, blobs):
        s = {"rfilename": path}
        if blobs:
            s.update(size=f["size"], blobId=f["blob_id"])
            if f["lfs"]:
                s["lfs"] = {"sha256": f["sha256"], "size": f["size"], "pointerSize": POINTER_SIZE}
        return s

    def model_info(self, repo, query):
        blobs = query.get("blobs", ["false"])[0].lower() in ("1", "true")
        info = {"_id": hashlib.sha1(repo.name.encode()).hexdigest()[:24], "id": repo.name,
                "modelId": repo.name, "sha": repo.commit, "private": False,
                "gated": "manual" if repo.gated else False, "disabled": False, "downloads": 0,
                "likes": 0, "tags": [], "lastModified": "2026-11-01T00:00:00.000Z",
                "createdAt": "2026-10-01T00:00:00.000Z",
                "siblings": [self.sibling(p, f, blobs) for p, f in sorted(repo.files.items())]}
        expand = query.get("expand")
        if expand:
            keys = set(expand)
            info = {k: v for k, v in info.items() if k in keys or k in ("_id", "id")}
        return info

    def tree(self, repo, prefix, recursive):
        entries, folders = [], set()
        base = prefix + "/" if prefix else ""
        for path, f in sorted(repo.files.items()):
            if not path.startswith(base):
                continue
            rest = path[len(base):]
            dirs = rest.split("/")[:-1]
            for i in range(len(dirs) if recursive else min(1, len(dirs))):
                folders.add(base + "/".join(dirs[: i + 1]))
            if "/" in rest and not recursive:
                continue
            e = {"type": "file", "oid": f["blob_id"], "size": f["size"], "path": path}
            if f["lfs"]:
                e["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": POINTER_SIZE}
            entries.append(e)
        dirs = [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0,
                 "path": d} for d in sorted(folders)]
        return dirs + entries

    def resolve(self, name, rev, path):
        repo = self.check_access(name, urllib.parse.unquote(rev))
        if repo is None:
            return
        f = repo.files.get(path)
        if f is None:
            return self.error(404, "EntryNotFound", "%s does not exist on \"%s\"" % (path, rev))
        common = {"X-Repo-Commit": repo.commit}
        if not f["lfs"]:
            common["ETag"] = '"%s"' % f["blob_id"]
            return self.send_file(f, common)
        common.update({"X-Linked-Etag": '"%s"' % f["sha256"], "X-Linked-Size": str(f["size"]),
                       "ETag": '"%s"' % hashlib.sha1(f["sha256"].encode()).hexdigest(),
                       "Location": "%s/lfs/%s" % (self.hub.cdn_base, f["sha256"])})
        self.reply(302, common, b"Found. Redirecting")


def serve(hub, bind, port, is_cdn):
    handler = type("CdnHandler" if is_cdn else "HubHandler", (Handler,),
                   {"hub": hub, "is_cdn": is_cdn})
    server = ThreadingHTTPServer((bind, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cdn-port", type=int, default=0)
    p.add_argument("--repo", action="append", default=[],
                   help="OWNER/NAME=DIR@COMMIT[,gated]")
    p.add_argument("--grant", action="append", default=[], help="token that may read gated repos")
    p.add_argument("--lfs-threshold", type=int, default=10240)
    p.add_argument("--rate", type=float, default=0, help="CDN bytes per second (0: no limit)")
    p.add_argument("--drop-after", type=int, default=0,
                   help="cut each object's first whole GET after this many bytes (0: never)")
    p.add_argument("--log", default="")
    p.add_argument("--ready-file", default="")
    args = p.parse_args()
    hub = Hub(args)
    cdn_port = serve(hub, args.bind, args.cdn_port, True)
    hub.cdn_base = "http://%s:%d" % (args.bind, cdn_port)
    hub_port = serve(hub, args.bind, args.port, False)
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as out:
            out.write("%d %d\n" % (hub_port, cdn_port))
        os.rename(tmp, args.ready_file)
    print("fake hub on %s:%d (cdn %d)" % (args.bind, hub_port, cdn_port), file=sys.stderr)
    sys.stderr.flush()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
