#!/usr/bin/env python3
"""A small HTTP proxy for the rest plugin's proxy tests: forwards absolute-form requests (http) and opens
CONNECT tunnels (https), and logs each on stdout.

    logging-proxy.py [--require-auth CREDENTIALS]

Prints its port on the first line, then per request "METHOD TARGET auth=<Proxy-Authorization or ->".
With --require-auth, a request whose Proxy-Authorization is not CREDENTIALS (e.g. "Basic dTpw") is answered
407 Proxy Authentication Required, and its connection closed.
"""
import os, select, socket, sys, threading
from urllib.parse import urlparse

lock = threading.Lock()
required_auth = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--require-auth" else None


def say(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def pipe(a, b):
    sockets = [a, b]
    try:
        while True:
            readable, _, _ = select.select(sockets, [], [], 30)
            if not readable:
                return
            for s in readable:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def serve(conn):
    head, rest = read_head(conn)
    if head is None:
        conn.close()
        return
    lines = head.split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
    auth = next((v.strip() for k, v in headers if k.lower() == "proxy-authorization"), "-")
    say(f"{method} {target} auth={auth}")
    if required_auth is not None and auth != required_auth:
        conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n"
                     b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        conn.close()
        return
    if method == "CONNECT":
        if rest:
            # Strict: the client must wait for the tunnel before it sends through it.
            say("bytes before the tunnel was open")
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()
            return
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection((host.strip("[]"), int(port)))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pipe(conn, upstream)
        return
    url = urlparse(target)
    upstream = socket.create_connection((url.hostname, url.port or 80))
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    kept = [f"{k}:{v}" for k, v in headers if k.lower() not in ("proxy-authorization", "connection")]
    upstream.sendall((f"{method} {path} {version}\r\n" + "\r\n".join(kept + ["Connection: close"]) + "\r\n\r\n").encode("latin-1") + rest)
    # The answer goes back as it comes, then the connection closes (this proxy keeps nothing alive).
    pipe(conn, upstream)


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
say(str(listener.getsockname()[1]))
# Ends when its stdin closes (the test that started it holds the other end), should a kill miss it.
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
