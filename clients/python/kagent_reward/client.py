"""kagentd's reward service over HTTP/1.1: its Unix socket (the default, as `kagent` finds it)
or its TCP address with the bearer token. Standard library only (http.client)."""
import http.client
import json
import os
import socket
import time
import urllib.parse


class DaemonError(RuntimeError):
    """kagentd refused a request (status and its {"error": ...} message) or could not be
    reached."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def default_socket():
    """Where `kagent daemon` listens by default: $KAGENT_SOCKET, $KAGENT_DAEMON_SOCKET, else
    kagentd.sock in $XDG_RUNTIME_DIR/kagent, else /tmp/kagent-UID."""
    for name in ("KAGENT_SOCKET", "KAGENT_DAEMON_SOCKET"):
        if os.environ.get(name):
            return os.environ[name]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = os.path.join(runtime, "kagent") if runtime else f"/tmp/kagent-{os.getuid()}"
    return os.path.join(folder, "kagentd.sock")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._socket_path)


class Client:
    """One kagentd. `target` is a Unix socket path (default: default_socket()) or
    "http://HOST:PORT" (then `token`, else $KAGENT_TOKEN, is sent as the bearer token)."""

    def __init__(self, target=None, token=None, timeout=30.0, poll_seconds=0.2):
        self.target = target or default_socket()
        self.token = token if token is not None else os.environ.get("KAGENT_TOKEN")
        self.timeout = timeout
        self.poll_seconds = poll_seconds

    def _connection(self):
        if self.target.startswith(("http://", "https://")):
            url = urllib.parse.urlsplit(self.target)
            kind = (http.client.HTTPSConnection if url.scheme == "https"
                    else http.client.HTTPConnection)
            return kind(url.hostname, url.port, timeout=self.timeout)
        return _UnixConnection(self.target, self.timeout)

    def request(self, method, path, body=None):
        """The answer's JSON for a 2xx status; DaemonError otherwise."""
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token and self.target.startswith(("http://", "https://")):
            headers["Authorization"] = f"Bearer {self.token}"
        connection = self._connection()
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
        except OSError as error:
            raise DaemonError(f"no answer from kagentd at {self.target}: {error} (start it "
                              f"with `kagent daemon`)") from error
        finally:
            connection.close()
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            answer = {"error": text.strip()}
        if not 200 <= response.status < 300:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise DaemonError(f"kagentd answered {response.status}: {message or text}",
                              response.status)
        return answer

    def health(self):
        return self.request("GET", "/v1/health")

    @staticmethod
    def _problem(problem):
        """A problem is its source text (lines), or a path (one line, made absolute), which
        the daemon reads: over TCP, a path on the daemon's machine."""
        if isinstance(problem, os.PathLike) or (isinstance(problem, str) and
                                                "\n" not in problem):
            return {"problem_path": os.path.abspath(os.fspath(problem))}
        if not isinstance(problem, str):
            raise TypeError("a problem is a path or the problem's source text")
        return {"problem_source": problem}

    def submit(self, problem, candidates, options=None):
        """Queues the candidates (source texts); returns the request's id at once."""
        body = dict(self._problem(problem), candidates=list(candidates), options=options or {},
                    **{"async": True})
        return self.request("POST", "/v1/evaluations", body)["id"]

    def get(self, evaluation_id):
        """A request (its id) or one of its evaluations ("ID-N"): state, verdicts."""
        return self.request("GET", "/v1/evaluations/" + urllib.parse.quote(evaluation_id,
                                                                            safe=""))

    def wait(self, request_id, timeout=None):
        """The finished request: {"verdicts": [...], "states", "seconds", ...}."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            answer = self.get(request_id)
            if answer.get("state") == "done":
                return answer
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"evaluations {request_id} not done after {timeout} s")
            time.sleep(self.poll_seconds)

    def evaluate(self, problem, candidates, options=None, timeout=None):
        """Verdicts in the candidates' order (kagent eval --json's objects: a verdict, or an
        error object with "error" and "message" when no verdict could be made). Submitted
        and polled, so no single HTTP request waits for the whole batch."""
        candidates = list(candidates)
        if not candidates:
            return []
        return self.wait(self.submit(problem, candidates, options), timeout)["verdicts"]
