"""The processes the worker keeps between evaluations (the kept judge, worker.py; the prepared
candidate process, prepared.py) and how it hands them an evaluation: a length-prefixed JSON
object with the evaluation's sockets and pipes (SCM_RIGHTS). Both ends are the worker's own
processes: nothing here reads what a candidate wrote."""
import json
import os
import signal
import socket

# an evaluation's: nine of its own and four for each further pair of timed processes
MAX_FDS = 64


def send(control, message, fds):
    """Sends `message` with the file descriptors `fds` ({name: socket or fd}); the message
    names them under "fds", in order."""
    names = list(fds)
    if len(names) > MAX_FDS:
        # the receiver would lose the rest without a word
        raise ValueError(f"{len(names)} descriptors in one message; handover takes {MAX_FDS}")
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


class KeptProcess:
    """A child the worker keeps between evaluations, with the worker's end of its control
    socket."""

    def __init__(self, pid, control):
        self.pid = pid
        self.control = control
        self.status = None  # its wait status once it has ended

    def alive(self):
        if self.status is not None:
            return False
        try:
            done, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            done, status = self.pid, 0
        if done:
            self.status = status
        return not done

    def ended(self, status):
        """Its wait status, when the worker reaped it elsewhere (worker._reap_orphans)."""
        self.status = status

    def end(self):
        """Ends its process group (if it still runs), reaps it and closes the worker's end."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.alive():
            try:
                self.status = os.waitpid(self.pid, 0)[1]
            except ChildProcessError:
                self.status = 0
        self.control.close()
