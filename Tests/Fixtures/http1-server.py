#!/usr/bin/env python3
"""An HTTP/1.1 server for the rest plugin's client tests: it counts connections and misbehaves on request.

    http1-server.py [--tls CERT KEY] [--idle-timeout SECONDS] [--ipv6]

Prints its port on the first line of stdout, then one line per connection ("connection N") and per request
("request METHOD PATH"). Paths:
    /json               {"connection": N}, kept alive
    /close              the same, with Connection: close (the server leaves the closing to the client)
    /slow               {"connection": N} after 0.2 s
    /connections        {"connections": N}, how many connections were accepted so far
    /gzip?size=N        a JSON string of N "a"s, gzip-compressed (Content-Encoding: gzip)
    /bomb               20 MB of zeros, gzip-compressed (a ratio over 1000)
    /stall-head         reads the request and never answers
    /stall-body         sends a head announcing 100 bytes, 10 of them, then nothing
    /host               {"host": the request's Host header}
--idle-timeout closes a kept-alive connection that stays idle that long. --ipv6 listens on ::1 instead of
127.0.0.1.
"""
import os, gzip, json, socket, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

args = sys.argv[1:]
tls = None
idle_timeout = None
ipv6 = False
while args:
    if args[0] == "--tls":
        tls = (args[1], args[2])
        args = args[3:]
    elif args[0] == "--ipv6":
        ipv6 = True
        args = args[1:]
    elif args[0] == "--idle-timeout":
        idle_timeout = float(args[1])
        args = args[2:]
    else:
        sys.exit("unknown argument " + args[0])

lock = threading.Lock()
connections = 0
BOMB = gzip.compress(b"\0" * (20 << 20), 9)


def say(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = idle_timeout

    def setup(self):
        global connections
        super().setup()
        with lock:
            connections += 1
            self.number = connections
        say(f"connection {self.number}")

    def log_message(self, *args):
        pass

    def send(self, body, content_type="application/json", extra=()):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self.do_GET()

    def do_GET(self):
        url = urlparse(self.path)
        say(f"request {self.command} {url.path}")
        if url.path == "/json":
            self.send(json.dumps({"connection": self.number}).encode())
        elif url.path == "/close":
            self.send(json.dumps({"connection": self.number}).encode(), extra=[("Connection", "close")])
            # Says close but leaves the connection open: a client that pooled it anyway would be answered
            # on it again, which the connection count shows. The client must close it.
            self.close_connection = False
        elif url.path == "/slow":
            time.sleep(0.2)
            self.send(json.dumps({"connection": self.number}).encode())
        elif url.path == "/connections":
            with lock:
                count = connections
            self.send(json.dumps({"connections": count}).encode())
        elif url.path == "/host":
            self.send(json.dumps({"host": self.headers.get("Host")}).encode())
        elif url.path == "/gzip":
            size = int(parse_qs(url.query).get("size", ["100"])[0])
            body = gzip.compress(json.dumps("a" * size).encode())
            self.send(body, extra=[("Content-Encoding", "gzip")])
        elif url.path == "/bomb":
            self.send(BOMB, extra=[("Content-Encoding", "gzip")])
        elif url.path == "/stall-head":
            time.sleep(3600)
        elif url.path == "/stall-body":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b'"aaaaaaaaa')
            self.wfile.flush()
            time.sleep(3600)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


class Server(ThreadingHTTPServer):
    daemon_threads = True


if ipv6:
    Server.address_family = socket.AF_INET6
server = Server(("::1" if ipv6 else "127.0.0.1", 0), Handler)
if tls:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls[0], tls[1])
    server.socket = context.wrap_socket(server.socket, server_side=True)
say(str(server.server_address[1]))
# Ends when its stdin closes (the test that started it holds the other end), should a kill miss it.
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
server.serve_forever()
