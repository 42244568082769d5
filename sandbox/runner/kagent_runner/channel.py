"""Framed messages between the judge and the candidate child.

A frame is a 4-byte big-endian length, one kind byte and the body. The judge may send
b"p" frames (pickles: trusted data flowing into the sandbox, e.g. CUDA IPC handles); the
candidate may only send b"j" frames (JSON), so the judge never unpickles anything the
candidate controls.
"""
import json
import pickle
import select
import socket
import struct
import time

MAX_FRAME = 64 << 20


class ChannelClosed(Exception):
    """The peer closed the connection or died."""


class ChannelTimeout(Exception):
    """The peer did not answer within the deadline."""


class ChannelProtocolError(Exception):
    """The peer sent something that is not a valid message."""


class Channel:
    def __init__(self, sock: socket.socket, accept_pickles: bool):
        self.sock = sock
        self.accept_pickles = accept_pickles
        self.buffer = bytearray()

    def send_json(self, message):
        self._send(b"j", json.dumps(message).encode())

    def send_pickle(self, message, pickler=None):
        body = pickler(message) if pickler is not None else pickle.dumps(message)
        self._send(b"p", bytes(body))

    def _send(self, kind, body):
        try:
            self.sock.sendall(struct.pack(">I", len(body)) + kind + body)
        except OSError as error:
            raise ChannelClosed(str(error)) from None

    def _fill(self, count, deadline, watch=None):
        while len(self.buffer) < count:
            if deadline is not None or watch is not None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise ChannelTimeout("no answer in time")
                descriptors = [self.sock] + ([watch[0]] if watch is not None else [])
                ready, _, _ = select.select(descriptors, [], [], remaining)
                if not ready:
                    raise ChannelTimeout("no answer in time")
                if watch is not None and watch[0] in ready:
                    if not watch[1]():
                        watch = None
                    if self.sock not in ready:
                        continue
            try:
                chunk = self.sock.recv(max(65536, count - len(self.buffer)))
            except OSError as error:
                raise ChannelClosed(str(error)) from None
            if not chunk:
                raise ChannelClosed("connection closed")
            self.buffer += chunk

    def receive(self, timeout=None, watch=None):
        """The next message. watch, when given, is (descriptor, handler): while waiting, the
        handler is called whenever the descriptor is readable, and stops being watched once
        it returns False (the judge's side of the device gate)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._fill(5, deadline, watch)
        (length,) = struct.unpack(">I", self.buffer[:4])
        kind = bytes(self.buffer[4:5])
        if length > MAX_FRAME:
            raise ChannelProtocolError(f"frame of {length} bytes exceeds {MAX_FRAME}")
        self._fill(5 + length, deadline, watch)
        body = bytes(self.buffer[5:5 + length])
        del self.buffer[:5 + length]
        if kind == b"j":
            try:
                message = json.loads(body)
            except ValueError as error:
                raise ChannelProtocolError(f"invalid JSON: {error}") from None
            if not isinstance(message, dict):
                raise ChannelProtocolError("message is not a JSON object")
            return message
        if kind == b"p" and self.accept_pickles:
            return pickle.loads(body)
        raise ChannelProtocolError(f"unexpected frame kind {kind!r}")
