"""Messages from the worker to a process it forked earlier, which hand it an evaluation: a
length-prefixed JSON object and the evaluation's sockets and pipes with it (SCM_RIGHTS). The
kept judge (worker.py) and the prepared candidate process (prepared.py) receive theirs so.
Both ends are the worker's own processes: nothing here reads what a candidate wrote."""
import json
import os
import socket

MAX_FDS = 32


def send(control, message, fds):
    """Sends `message` with the file descriptors `fds` ({name: socket or fd}); the message
    names them under "fds", in order."""
    names = list(fds)
    numbers = [item if isinstance(item, int) else item.fileno() for item in fds.values()]
    payload = json.dumps(dict(message, fds=names)).encode()
    data = len(payload).to_bytes(8, "big") + payload
    sent = socket.send_fds(control, [data], numbers)
    # only what is left: sendall sends even nothing once, and a receiver that has read
    # everything may have closed its end already (EPIPE: the prepared process does)
    if sent < len(data):
        control.sendall(data[sent:])


def receive(control):
    """(message, {name: fd}) from the worker, or (None, {}) when it is gone."""
    header, fds, _, _ = socket.recv_fds(control, 8, MAX_FDS)
    while header and len(header) < 8:
        more = control.recv(8 - len(header))
        if not more:
            break
        header += more
    length, payload = int.from_bytes(header, "big") if len(header) == 8 else 0, b""
    while len(header) == 8 and len(payload) < length:
        more = control.recv(min(length - len(payload), 1 << 20))
        if not more:
            break
        payload += more
    if len(header) < 8 or len(payload) < length:
        for fd in fds:
            os.close(fd)
        return None, {}
    message = json.loads(payload)
    return message, dict(zip(message.get("fds", []), fds))
