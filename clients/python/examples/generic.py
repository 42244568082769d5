"""kagent_reward from any trainer that can call a function: completions in, floats out, and
the verdicts for logging. python3 generic.py PROBLEM.py COMPLETION.txt [COMPLETION.txt ...]"""
import json
import sys

from kagent_reward import Client, score


def main(problem, completion_files):
    completions = []
    for path in completion_files:
        with open(path) as handle:
            completions.append(handle.read())
    client = Client()
    print(json.dumps(client.health()["evaluations"]), file=sys.stderr)
    rewards, verdicts = score(problem, completions, client=client)
    for path, value, verdict in zip(completion_files, rewards, verdicts):
        status = "no code" if verdict is None else verdict.get("status", verdict.get("error"))
        print(f"{value:6.3f}  {status:14}  {path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
