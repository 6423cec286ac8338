"""A test's HTTP server: GET /NAME answers DIR/NAME's bytes (application/json), or 503 when the file does not
exist, so a test makes a source fail or recover by removing or writing a file. Each request's path is appended
to DIR/requests.log. The port (chosen by the system) is written to DIR/port once it listens."""
import http.server
import os
import sys

root = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(root, "requests.log"), "a") as log:
            log.write(self.path + "\n")
        path = os.path.join(root, self.path.lstrip("/"))
        if os.path.isfile(path):
            body = open(path, "rb").read()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        else:
            body = b'{"error": "not there"}'
            self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(root, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(root, "port.tmp"), os.path.join(root, "port"))
server.serve_forever()
