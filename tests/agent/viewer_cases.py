#!/usr/bin/env python3
"""The web viewer (docs/viewer.md) in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium): kagent daemon --device cpu on a private socket and on TCP
behind a token, its session talking to the scripted model server and judged by the stand-in
evaluator, as tests/agent/daemon_cases.py runs them (its Daemon is reused here).
Checks the viewer's files over TCP (the token, traversal, types), then opens the page as a
person would (/?token=... once) while a session runs: the page loads, every trace record
written after it opened appears on it within 2 s, a rejected candidate shows its reason, a
diff between two variants is shown highlighted, the speedup chart has points, and the browser
logged no error.
KAGENT_VIEWER_SCREENSHOT=FILE saves a screenshot of the page at the end (docs/viewer.png).
Prints TAP ending with a line `N passed, N failed`; skips when Chromium or selenium is missing,
except under KAGENT_REQUIRE_TORCH=1 (CI: .ci/setup installs everything, nothing may skip).
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. .venv/bin/python3 tests/agent/viewer_cases.py"""
import http.client
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_cases  # noqa: E402 - beside this file
from daemon_cases import RELU, TOKEN, Daemon, candidate, chat_reply, free_port  # noqa: E402

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
# A record must show within this many seconds of reaching the trace file.
LIVE_LIMIT = 2.0
# The scripted model's pause before each reply, so that the page sees the session run.
MODEL_DELAY_MS = 1500
REJECTED_NOTE = "drop the max subtraction"


def source(judge, body, note_line):
    """A candidate whose body differs from turn to turn, for a diff worth showing."""
    return candidate(judge).replace("        return torch.relu(x)\n",
                                    f"        # {note_line}\n{body}")


def model_script():
    """Four turns: v1 correct, v2 rejected (incorrect), v3 faster than v1, then finish."""
    v1 = source({"speedup": 1.4}, "        return torch.relu(x)\n", "first")
    v2 = source({"status": "incorrect"}, "        return x.clamp(min=1)\n", "second")
    v3 = source({"speedup": 2.5},
                "        x = x.contiguous()\n        return torch.relu(x)\n", "third")
    return {"by_turn": [
        chat_reply([("evaluate", {"source": v1, "note": "plain relu"})], delay_ms=MODEL_DELAY_MS),
        chat_reply([("evaluate", {"source": v2, "note": REJECTED_NOTE})], delay_ms=MODEL_DELAY_MS),
        chat_reply([("evaluate", {"source": v3, "note": "relu in two steps"})],
                   delay_ms=MODEL_DELAY_MS),
        chat_reply([("finish", {"summary": "v3 is the fastest"})], delay_ms=MODEL_DELAY_MS)]}


def tcp_request(port, path, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def read_records(path):
    """The whole lines of a trace being written (a line still being written is skipped)."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except OSError:
        return []


def start_daemon():
    daemon = Daemon(model_script(), max_sessions=1)
    port = free_port()
    token_file = os.path.join(daemon.folder, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    daemon.environment["KAGENT_VIEWER_DIR"] = os.path.join(
        daemon_cases.SOURCE, "agent", "daemon", "viewer")
    daemon.start("--listen", f"127.0.0.1:{port}", "--token-file", token_file)
    return daemon, port


# ---- scenarios: each returns a list of problems (empty: passed) ----

def files_over_tcp():
    """The page and its files over TCP: 401 without the token, the cookie from ?token=, the
    right types, Debian's libraries, 404 for traversals and unknown names."""
    problems = []
    daemon, port = start_daemon()
    try:
        status, headers, _ = tcp_request(port, "/")
        if status != 401:
            problems.append(f"/ without the token: {status}")
        status, headers, _ = tcp_request(port, f"/?token={TOKEN}")
        cookie = headers.get("set-cookie", "")
        if status != 303 or headers.get("location") != "/" or "HttpOnly" not in cookie:
            problems.append(f"/?token=: {status} {headers}")
        cookie_header = {"Cookie": cookie.split(";")[0]}
        expected = {"/": ("text/html", b"viewer.js"),
                    "/viewer/viewer.js": ("text/javascript", b"EventSource"),
                    "/viewer/viewer.css": ("text/css", b"#timeline"),
                    "/viewer/lib/chart.js": ("text/javascript", b"Chart"),
                    "/viewer/lib/highlight.js": ("text/javascript", b"hljs"),
                    "/viewer/lib/highlight.css": ("text/css", b".hljs")}
        for path, (content_type, needle) in expected.items():
            status, headers, body = tcp_request(port, path, cookie_header)
            if status != 200 or not headers.get("content-type", "").startswith(content_type) \
                    or needle not in body or "default-src 'self'" not in \
                    headers.get("content-security-policy", ""):
                problems.append(f"{path}: {status} {headers} {body[:80]!r}")
        for path in ("/viewer/..%2F..%2F..%2Fetc%2Fpasswd", "/viewer/..", "/viewer/.hidden.js",
                     "/viewer/lib/..%2Fjquery%2Fjquery.js", "/viewer/lib/jquery.js",
                     "/viewer/../../etc/passwd", "/viewer/index.html%00.js",
                     "/viewer/nothing.js"):
            status, _, body = tcp_request(port, path, cookie_header)
            if status not in (400, 404) or b"root:" in body:
                problems.append(f"{path}: {status} {body[:120]!r}")
        # The socket needs no token.
        status, _ = daemon.request("GET", "/viewer/viewer.css")
        if status != 200:
            problems.append(f"/viewer/viewer.css over the socket: {status}")
    finally:
        daemon.close()
    return problems


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1400,1500"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait_until(check, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    return check()


def live_session():
    """The page on a running session: records appear live, the rejected candidate's reason,
    a highlighted diff, the chart, no console error."""
    from selenium.webdriver.common.by import By

    problems = []
    daemon, port = start_daemon()
    driver = None
    try:
        # The browser starts first: on a slow machine its start could outlast the session.
        driver = browser()
        driver.get(f"http://127.0.0.1:{port}/?token={TOKEN}")
        if "token" in driver.current_url:
            problems.append(f"the token stayed in the address: {driver.current_url}")
        status, created = daemon.post_batch([RELU], max_turns=6)
        if status != 201:
            return [f"POST /v1/batches: {status} {created}"]
        session = daemon.wait_running(created["batch"])[0]
        trace = session["trace_path"]
        driver.get(f"http://127.0.0.1:{port}/#/session/{session['id']}")
        # Every record the page should show, as it reaches the trace, within LIVE_LIMIT.
        seen_at = {}
        late = []
        shown = set()
        started = time.monotonic()
        while time.monotonic() - started < 90:
            now = time.monotonic()
            for record in read_records(trace):
                if record["type"] in ("request", "stream"):
                    continue
                seen_at.setdefault(record["seq"], now)
            on_page = set(driver.execute_script(
                "return Array.from(document.querySelectorAll('#timeline [data-seq]'))"
                ".map(function (e) { return Number(e.dataset.seq); });"))
            now = time.monotonic()
            for seq, at in seen_at.items():
                if seq in on_page and seq not in shown:
                    shown.add(seq)
                    # Records already written when the page loaded arrive in its replay.
                    if at - started > 0.5 and now - at > LIVE_LIMIT:
                        late.append(f"record {seq} showed {now - at:.2f} s after it was written")
                elif seq not in on_page and now - at > LIVE_LIMIT and seq not in shown:
                    late.append(f"record {seq} not on the page {now - at:.2f} s after it was "
                                f"written")
                    shown.add(seq)
            ended = any(r["type"] == "final" for r in read_records(trace))
            if ended and seen_at.keys() <= shown:
                break
            time.sleep(0.05)
        live = [seq for seq, at in seen_at.items() if at - started > 0.5]
        if len(live) < 10:
            problems.append(f"only {len(live)} records were written while the page was open")
        problems += late
        if not any(r["type"] == "final" for r in read_records(trace)):
            problems.append("the session did not end in 90 s")
        # The rejected candidate: its verdict's reason, under its variant.
        verdicts = [r for r in read_records(trace) if r["type"] == "verdict" and
                    r["purpose"] == "evaluate" and r["status"] != "correct"]
        if not verdicts:
            problems.append("the trace has no rejected candidate")
        else:
            rejected = verdicts[0]
            text = wait_until(lambda: driver.execute_script(
                "var e = document.querySelector('#variant-tree [data-variant=\"' + "
                "arguments[0] + '\"] > .reason'); return e && e.textContent;",
                rejected["variant"]), 3)
            if not text or text != rejected["reason"]:
                problems.append(f"{rejected['variant']}'s reason: {text!r}, expected "
                                f"{rejected['reason']!r}")
            elif not driver.find_element(
                    By.CSS_SELECTOR, f'#variant-tree [data-variant="{rejected["variant"]}"] '
                    f'> .reason').is_displayed():
                problems.append(f"{rejected['variant']}'s reason is not visible")
        # A diff: the page shows the latest variant against its parent, highlighted.
        diff = wait_until(lambda: driver.execute_script(
            "return {added: document.querySelectorAll('#diff tr.added').length,"
            " removed: document.querySelectorAll('#diff tr.removed').length,"
            " highlighted: document.querySelectorAll('#diff td.code span[class^=hljs-]').length,"
            " stats: document.getElementById('diff-stats').textContent,"
            " text: document.getElementById('diff').textContent};"), 3)
        if not diff["added"] or not diff["removed"] or not diff["highlighted"] or \
                "x.contiguous()" not in diff["text"]:
            problems.append(f"the diff: {diff['stats']!r} {diff}")
        elif not driver.find_element(By.CSS_SELECTOR, "#diff tr.added").is_displayed():
            problems.append("the diff is not visible")
        points = driver.execute_script(
            "var c = Chart.getChart('speedup-chart'); return c ? c.data.datasets[0].data : null;")
        if not points or max((p or 0) for p in points) < 2.0:
            problems.append(f"the speedup chart: {points}")
        tree = driver.execute_script(
            "return Array.from(document.querySelectorAll('#variant-tree li.variant'))"
            ".map(function (e) { return [e.dataset.variant,"
            " e.parentElement.closest('li.variant') ? "
            "e.parentElement.closest('li.variant').dataset.variant : null]; });")
        if sorted(tree) != [["v1", None], ["v2", "v1"], ["v3", "v1"]]:
            problems.append(f"the variant tree: {tree}")
        state = wait_until(lambda: driver.execute_script(
            "var e = document.querySelector('#session-summary dd'); return e && e.textContent;")
            in ("done",), 10)
        if not state:
            problems.append("the session's state never showed done")
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        if errors:
            problems.append(f"console errors: {errors}")
        screenshot = os.environ.get("KAGENT_VIEWER_SCREENSHOT")
        if screenshot:
            driver.save_screenshot(screenshot)
    finally:
        if driver is not None:
            driver.quit()
        daemon.close()
    return problems


CASES = [
    ("the viewer's files over TCP: token cookie, types, libraries, no traversal",
     files_over_tcp),
    ("the page on a running session in Chromium: live records, rejected reason, diff, chart, "
     "no console error", live_session),
]


def main():
    missing = [name for name, found in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER))
               if not found]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (tests/requirements.txt)")
    if missing:
        if os.environ.get("KAGENT_REQUIRE_TORCH") == "1":
            print(f"1..1\nnot ok 1 - missing {', '.join(missing)} (.ci/setup installs them)")
            return 1
        print(f"1..0 # SKIP missing {', '.join(missing)}")
        return 0
    daemon_cases.CASES = CASES
    return daemon_cases.main()


if __name__ == "__main__":
    sys.exit(main())
