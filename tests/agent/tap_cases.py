"""The TAP runner shared by the end-to-end suites tests/agent/*_cases.py: each case is a
(name, scenario) pair whose scenario returns a list of problems (empty: it passed) or a
string (skipped, and why); an exception is a failed case. Prints the plan, one ok / not ok
line per case with its time and its problems as comments, and a summary line."""
import sys
import time
import traceback


class Tap:
    """TAP lines as results come. With a plan, it is printed first; without one (a suite that
    learns its cases as it goes), finish() prints it last."""

    def __init__(self, planned=None):
        self.number = 0
        self.failures = 0
        self.planned = planned
        if planned is not None:
            print(f"1..{planned}")
            sys.stdout.flush()

    def report(self, ok, name, problems=(), seconds=None, lines=40, tail=False):
        """One result; each problem's first (or with tail, last) lines become comments."""
        self.number += 1
        self.failures += 0 if ok else 1
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        print(f"{'ok' if ok else 'not ok'} {self.number} - {name}{took}")
        for problem in problems:
            text = str(problem).splitlines()
            for line in text[-lines:] if tail else text[:lines]:
                print(f"# {line}")
        sys.stdout.flush()

    def skip(self, name, why):
        self.number += 1
        print(f"ok {self.number} - {name} # SKIP {why}")
        sys.stdout.flush()

    def finish(self):
        """The summary (and the plan, if it was not printed first); the exit status."""
        if self.planned is None:
            print(f"1..{self.number}")
        print(f"# {self.number - self.failures} passed, {self.failures} failed")
        sys.stdout.flush()
        return 1 if self.failures else 0


def run_cases(cases, *arguments, lines=40):
    """Runs each case's scenario(*arguments) in order; the exit status."""
    tap = Tap(len(cases))
    for name, scenario in cases:
        started = time.monotonic()
        try:
            problems = scenario(*arguments)
        except Exception as error:  # noqa: BLE001 - a broken case is a failed case
            problems = [f"{type(error).__name__}: {error}", traceback.format_exc()]
        if isinstance(problems, str):
            tap.skip(name, problems)
            continue
        tap.report(not problems, name, problems, time.monotonic() - started, lines)
    return tap.finish()
