"""A minimal TAP runner shared by the runner's Python tests (tests/runner/test_*.py): register
tests with @test, raise Skip to skip one, and run() prints TAP and returns the exit status."""
import sys
import traceback

TESTS = []


def test(function):
    TESTS.append(function)
    return function


class Skip(Exception):
    pass


def run():
    print(f"1..{len(TESTS)}")
    failures = 0
    for number, function in enumerate(TESTS, 1):
        try:
            function()
            print(f"ok {number} - {function.__name__}")
        except Skip as reason:
            print(f"ok {number} - {function.__name__} # SKIP {reason}")
        except Exception:  # noqa: BLE001 - every failure is reported
            failures += 1
            print(f"not ok {number} - {function.__name__}")
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
        sys.stdout.flush()
    return 1 if failures else 0
