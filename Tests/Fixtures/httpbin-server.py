#!/usr/bin/env python3
"""httpbin (Debian's python3-httpbin), the service HTTP clients are tried against, on a free port of 127.0.0.1.

Prints the port on its first line, then serves until its stdin closes: the test that started it holds the
other end, so the server cannot outlive the test, however the test ends.
"""
import os
import sys
import threading

try:
    from httpbin import app
    from werkzeug.serving import make_server
except ImportError as error:
    sys.exit(f"httpbin-server.py: {error}; install Debian's python3-httpbin (apt-get install python3-httpbin)")

server = make_server("127.0.0.1", 0, app, threaded=True)
print(server.server_port, flush=True)


def exit_when_stdin_closes():
    sys.stdin.buffer.read()
    os._exit(0)


threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
server.serve_forever()
