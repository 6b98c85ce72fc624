"""A media server on loopback that behaves as real ones do on a bad day: slow to answer, stalling
mid-body, redirecting, mislabelling its content type, missing the file, cutting the body short.

vLLM's media connector fetches an `http://` image or video URL itself (aiohttp, in the API
process); these are the answers it meets in production from CDNs, object stores and users' own
servers. Each path names its behaviour (`Route`); the server counts the requests each path got,
so a case can show that vLLM fetched it (and how often: retries) rather than failing earlier.
Only 127.0.0.1 is bound.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Route:
    body: bytes
    content_type: str
    delay_s: float = 0.0
    """Seconds before the status line (a slow origin)."""

    stall_s: float = 0.0
    """Seconds of silence after half the body, before the connection closes (a stalled transfer)."""

    status: int = 200
    redirect_to: str = ""
    """A path on this server: answered 302 with it as the Location."""

    short_by: int = 0
    """Bytes of the body not sent although Content-Length counts them (a cut connection)."""


class MediaServer:
    """`with MediaServer(routes) as server:` serves each route at `server.url(path)`."""

    def __init__(self, routes: dict[str, Route]):
        self.routes = dict(routes)
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="vlcheck-media-server", daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def __enter__(self) -> MediaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()  # a stalled answer ends now, not after its stall
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # the request counts say what was fetched
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                with server._lock:
                    server.hits[path] += 1
                route = server.routes.get(path)
                if route is None:
                    self._answer(404, b"not found", "text/plain")
                    return
                if route.delay_s and server._stop.wait(route.delay_s):
                    return
                if route.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.url(route.redirect_to))
                    self.send_header("Content-Length", "0")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    return
                if route.stall_s:
                    self._head(route.status, len(route.body), route.content_type)
                    self._write(route.body[: len(route.body) // 2])
                    server._stop.wait(route.stall_s)
                    return
                self._head(route.status, len(route.body), route.content_type)
                self._write(route.body[: len(route.body) - route.short_by])

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self._head(status, len(body), content_type)
                self._write(body)

            def _head(self, status: int, length: int, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(length))
                self.send_header("Connection", "close")
                self.end_headers()

            def _write(self, data: bytes) -> None:
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first: its answer says so
                    pass

        return Handler

