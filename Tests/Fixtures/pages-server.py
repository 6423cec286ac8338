#!/usr/bin/env python3
"""A list of PAGES pages of two numbers each (argv[1], default 4), linked by `Link: <…>; rel="next"`, on a
free port of 127.0.0.1: `/items?page=N` answers [2N-1, 2N], every page after the first DELAY seconds late
(argv[2], default 0).

Prints the port on its first line, then serves until its stdin closes: the test that started it holds the
other end, so the server cannot outlive the test, however the test ends.
"""
import http.server
import json
import os
import sys
import threading
import time

PAGES = int(sys.argv[1]) if len(sys.argv) > 1 else 4
DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0


class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        page = int(self.path.split("page=")[1]) if "page=" in self.path else 1
        if page > 1 and DELAY > 0:
            time.sleep(DELAY)
        body = json.dumps([2 * page - 1, 2 * page]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if page < PAGES:
            self.send_header("Link", f'<http://127.0.0.1:{self.server.server_port}/items?page={page + 1}>; rel="next"')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
print(server.server_port, flush=True)


def exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
server.serve_forever()
