"""GCS's XML upload API in front of fake-gcs-server, for the tests (standard library only).

Cryo reaches GCS through the Rust `object_store` crate, which uploads with GCS's XML API:
`PUT /{bucket}/{object}` (create-if-absent and replace-if-generation through
`x-goog-if-generation-match`), `x-goog-copy-source` copies and XML multipart uploads. The GCS
emulator that runs offline here, fake-gcs-server, serves reads, listings and deletes that way but
not those writes (fsouza/fake-gcs-server#331); no other emulator in the registries does better.
Its JSON API has every one of those semantics, so this adapter turns each XML write into the JSON
call that does the same (a media upload with `ifGenerationMatch`, `copyTo`), answers as GCS's XML
API answers (`ETag`, `x-goog-generation`, 412 when the condition fails), and passes every other
request through unchanged. What is stored, and every condition on it, is fake-gcs-server's.

    python3 scripts/gcs/xml_adapter.py LISTEN_PORT UPSTREAM_HOST:PORT

fake-gcs-server must run with `-public-host UPSTREAM_HOST:PORT` (it routes XML requests by host).
scripts/services.sh starts both: the adapter on CRYO_GCS_ENDPOINT, the server behind it on
CRYO_GCS_SERVER_ENDPOINT.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

UPSTREAM = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:4444"
# XML multipart uploads in flight: id -> bucket, key, content type, parts by number.
UPLOADS: dict[str, dict] = {}
LOCK = threading.Lock()
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}
JSON_ROOTS = ("storage", "upload", "download", "batch", "_internal", "b")


def upstream(method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    conn = http.client.HTTPConnection(UPSTREAM, timeout=60)
    sent = dict(headers or {})
    sent["Host"] = UPSTREAM
    conn.request(method, path, body=body, headers=sent)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheaders(), data


class Adapter(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("gcs-xml-adapter: " + (fmt % args) + "\n")

    def body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status: int, data: bytes = b"", headers=()) -> None:
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def forward(self) -> None:
        data = self.body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != "host"}
        with_body = data or self.command in ("PUT", "POST", "PATCH")
        status, answer_headers, out = upstream(self.command, self.path, data if with_body else None, headers)
        self.reply(status, out, [(k, v) for k, v in answer_headers if k.lower() not in HOP and k.lower() != "content-length"])

    def xml_object(self):
        """(bucket, object, query) of an XML-API object request; None for the JSON API's paths."""
        u = urlsplit(self.path)
        parts = u.path.lstrip("/").split("/", 1)
        if len(parts) != 2 or not parts[1] or parts[0] in JSON_ROOTS:
            return None
        return unquote(parts[0]), unquote(parts[1]), parse_qs(u.query, keep_blank_values=True)

    def media_upload(self, bucket: str, key: str, data: bytes, content_type: str, match: str | None):
        query = f"uploadType=media&name={quote(key, safe='')}"
        if match is not None:
            query += f"&ifGenerationMatch={match}"
        path = f"/upload/storage/v1/b/{quote(bucket, safe='')}/o?{query}"
        status, _, out = upstream("POST", path, data, {"Content-Type": content_type, "Content-Length": str(len(data))})
        return status, out

    def answer_object(self, status: int, out: bytes, multipart: bool = False) -> None:
        if status != 200:
            return self.reply(status, out, [("Content-Type", "application/json")])
        o = json.loads(out)
        headers = [
            ("ETag", f'"{o["etag"]}"'),
            ("x-goog-generation", str(o["generation"])),
            ("x-goog-metageneration", str(o.get("metageneration", "1"))),
        ]
        if multipart:
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
                f'<Bucket>{o["bucket"]}</Bucket><Key>{o["name"]}</Key><ETag>"{o["etag"]}"</ETag>'
                "</CompleteMultipartUploadResult>"
            ).encode()
            return self.reply(200, body, [*headers, ("Content-Type", "application/xml")])
        return self.reply(200, b"", headers)

    def do_PUT(self) -> None:
        target = self.xml_object()
        if target is None:
            return self.forward()
        bucket, key, query = target
        match = self.headers.get("x-goog-if-generation-match")
        if "uploadId" in query and "partNumber" in query:  # a part of a multipart upload
            data = self.body()
            with LOCK:
                upload = UPLOADS.get(query["uploadId"][0])
                if upload is None:
                    return self.reply(404, b"NoSuchUpload")
                upload["parts"][int(query["partNumber"][0])] = data
            return self.reply(200, b"", [("ETag", f'"{hashlib.md5(data).hexdigest()}"')])
        source = self.headers.get("x-goog-copy-source")
        if source:  # a copy
            self.body()
            src_bucket, src_key = unquote(source).lstrip("/").split("/", 1)
            path = (
                f"/storage/v1/b/{quote(src_bucket, safe='')}/o/{quote(src_key, safe='')}"
                f"/copyTo/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"
            )
            if match is not None:
                path += f"?ifGenerationMatch={match}"
            status, _, out = upstream("POST", path, b"", {"Content-Length": "0"})
            return self.answer_object(status, out)
        data = self.body()
        status, out = self.media_upload(bucket, key, data, self.headers.get("Content-Type", "application/octet-stream"), match)
        return self.answer_object(status, out)

    def do_POST(self) -> None:
        target = self.xml_object()
        if target is None:
            return self.forward()
        bucket, key, query = target
        if "uploads" in query:  # a multipart upload starts
            self.body()
            upload_id = uuid.uuid4().hex
            content_type = self.headers.get("Content-Type", "application/octet-stream")
            with LOCK:
                UPLOADS[upload_id] = {"bucket": bucket, "key": key, "parts": {}, "content_type": content_type}
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
                f"<Bucket>{bucket}</Bucket><Key>{key}</Key><UploadId>{upload_id}</UploadId>"
                "</InitiateMultipartUploadResult>"
            ).encode()
            return self.reply(200, body, [("Content-Type", "application/xml")])
        if "uploadId" in query:  # a multipart upload completes: its parts in number order
            self.body()
            with LOCK:
                upload = UPLOADS.pop(query["uploadId"][0], None)
            if upload is None:
                return self.reply(404, b"NoSuchUpload")
            data = b"".join(upload["parts"][n] for n in sorted(upload["parts"]))
            status, out = self.media_upload(bucket, key, data, upload["content_type"], None)
            return self.answer_object(status, out, multipart=True)
        return self.forward()

    def do_DELETE(self) -> None:
        target = self.xml_object()
        if target is not None and "uploadId" in target[2]:  # a multipart upload is aborted
            self.body()
            with LOCK:
                UPLOADS.pop(target[2]["uploadId"][0], None)
            return self.reply(204)
        return self.forward()

    do_GET = do_HEAD = do_PATCH = forward


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Adapter).serve_forever()
