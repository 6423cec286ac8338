"""Clicks at X,Y on a headless wlroots compositor (sway): python3 wayland_click.py X Y [BUTTON].
With --hover SECONDS first, moves the pointer to X,Y and keeps it there that long instead (a tooltip shows).

A headless sway has no input device, so its seat has no pointer and a bar never gets a click; `swaymsg seat -
cursor press` goes nowhere. This client adds one through wlr-virtual-pointer-unstable-v1, moves it to X,Y of
the output layout and presses and releases BUTTON (1 left, 2 middle, 3 right; default 1). It speaks the
Wayland wire protocol itself (a few messages, Python's standard library only), because Debian ships no
client that does this (wlrctl is not packaged) and the consumer tests must not need more packages."""
import os
import socket
import struct
import sys
import time

BUTTON_CODES = {1: 0x110, 2: 0x112, 3: 0x111}  # BTN_LEFT, BTN_MIDDLE, BTN_RIGHT (linux/input-event-codes.h)


class Connection:
    def __init__(self):
        runtime = os.environ["XDG_RUNTIME_DIR"]
        display = os.environ.get("WAYLAND_DISPLAY", "wayland-0")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(display if display.startswith("/") else os.path.join(runtime, display))
        self.sock.settimeout(10)
        self.next_id = 2  # 1 is wl_display
        self.buffer = b""

    def new_id(self):
        self.next_id += 1
        return self.next_id - 1

    def send(self, obj, opcode, *args):
        body = b""
        for arg in args:
            if isinstance(arg, str):
                raw = arg.encode() + b"\0"
                body += struct.pack("<I", len(raw)) + raw + b"\0" * (-len(raw) % 4)
            else:
                body += struct.pack("<I", arg)
        self.sock.sendall(struct.pack("<II", obj, (8 + len(body)) << 16 | opcode) + body)

    def events(self):
        """Reads what has come so far: a list of (object, opcode, payload)."""
        self.buffer += self.sock.recv(65536)
        out = []
        while len(self.buffer) >= 8:
            obj, word = struct.unpack("<II", self.buffer[:8])
            size = word >> 16
            if len(self.buffer) < size:
                break
            out.append((obj, word & 0xFFFF, self.buffer[8:size]))
            self.buffer = self.buffer[size:]
        return out

    def roundtrip(self):
        """Waits until the compositor has handled every request sent so far; returns the events meanwhile."""
        callback = self.new_id()
        self.send(1, 0, callback)  # wl_display.sync
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for event in self.events():
                obj, opcode, payload = event
                if obj == 1 and opcode == 0:  # wl_display.error
                    sys.exit(f"wayland_click: protocol error {payload!r}")
                if obj == callback and opcode == 0:
                    return seen
                seen.append(event)
        sys.exit("wayland_click: the compositor did not answer")


def string_at(payload, offset):
    length = struct.unpack_from("<I", payload, offset)[0]
    return payload[offset + 4:offset + 4 + length - 1].decode(), offset + 4 + length + (-length % 4)


def main():
    args = sys.argv[1:]
    hover = None
    if args[0] == "--hover":
        hover = float(args[1])
        args = args[2:]
    x, y = int(args[0]), int(args[1])
    button = BUTTON_CODES[int(args[2]) if len(args) > 2 else 1]
    wl = Connection()
    registry = wl.new_id()
    wl.send(1, 1, registry)  # wl_display.get_registry
    manager = None
    for obj, opcode, payload in wl.roundtrip():
        if obj == registry and opcode == 0:  # wl_registry.global
            name = struct.unpack_from("<I", payload)[0]
            interface, _ = string_at(payload, 4)
            if interface == "zwlr_virtual_pointer_manager_v1":
                manager = wl.new_id()
                wl.send(registry, 0, name, interface, 1, manager)  # wl_registry.bind
    if manager is None:
        sys.exit("wayland_click: the compositor has no zwlr_virtual_pointer_manager_v1")
    pointer = wl.new_id()
    wl.send(manager, 0, 0, pointer)  # create_virtual_pointer(seat: the default)
    wl.roundtrip()
    # The seat now has a pointer; give the bar a moment to bind it before the pointer enters its surface.
    time.sleep(0.5)
    wl.roundtrip()
    width, height = 1 << 16, 1 << 16
    layout_w, layout_h = int(os.environ.get("LAYOUT_WIDTH", "1280")), int(os.environ.get("LAYOUT_HEIGHT", "200"))
    now = lambda: int(time.monotonic() * 1000) & 0xFFFFFFFF
    # motion_absolute: x and y as fractions of the whole layout.
    wl.send(pointer, 1, now(), x * width // layout_w, y * height // layout_h, width, height)
    wl.send(pointer, 4)  # frame
    wl.roundtrip()
    if hover is not None:
        time.sleep(hover)
        return
    time.sleep(0.2)
    wl.send(pointer, 2, now(), button, 1)  # button pressed
    wl.send(pointer, 4)
    wl.roundtrip()
    time.sleep(0.1)
    wl.send(pointer, 2, now(), button, 0)  # released
    wl.send(pointer, 4)
    wl.roundtrip()
    time.sleep(0.2)
    wl.send(pointer, 8)  # destroy
    wl.roundtrip()


main()
