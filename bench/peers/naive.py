"""A naive Python fingerprint of a tool call: `json.loads` of the argument text (empty
text meaning `{}`), `json.dumps(..., sort_keys=True)` of `{"args": args, "tool": tool}`
and `hashlib.sha256`, as lowercase hex. It is not RFC 8785 (default separators with
spaces, ASCII escapes, Python's float spelling, code-point key order), so its digests
differ from the reference's; it is here for its speed.

A peer of `runtime/benches/checksum.rs`, which starts it and drives it over stdin:

    python3 bench/peers/naive.py TOOL NAME=FILE...

It prints `checksum NAME HEX` for each fixture, then `ready`; then, for each line
`NAME ITERATIONS` it reads, it computes that fixture's fingerprint ITERATIONS times and
prints the nanoseconds they took. It stops at the end of its input.
"""

import hashlib
import json
import sys
import time


def fingerprint(tool, args_json):
    args = {} if args_json == "" else json.loads(args_json)
    text = json.dumps({"args": args, "tool": tool}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main(argv):
    if len(argv) < 2:
        print("usage: python3 naive.py TOOL NAME=FILE...", file=sys.stderr)
        return 2
    tool, specs = argv[0], argv[1:]
    fixtures = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        with open(path, encoding="utf-8") as file:
            fixtures[name] = file.read()
        print(f"checksum {name} {fingerprint(tool, fixtures[name])}", flush=True)
    print("ready", flush=True)
    for line in sys.stdin:
        name, _, count = line.strip().partition(" ")
        text = fixtures.get(name)
        if text is None or not count.isdigit() or int(count) < 1:
            print(f"naive.py: bad request {line!r}", file=sys.stderr)
            return 2
        start = time.perf_counter_ns()
        for _ in range(int(count)):
            fingerprint(tool, text)
        print(time.perf_counter_ns() - start, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
