"""A stand-in for a CLI model, run by the command backend's tests.

    fake_model.py echo [WORDS...]      answer "you said: ..." (WORDS, or stdin), word by word
    fake_model.py hang PIDFILE [--ignore-term]   write its pid, then never answer
    fake_model.py fail                 write ten lines to stderr and exit 3
    fake_model.py env NAME             say whether NAME is set (never its value)
"""

import os
import signal
import sys
import time


def main(argv: list[str]) -> int:
    mode, rest = argv[0], argv[1:]
    if mode == "echo":
        words = (" ".join(rest) if rest else sys.stdin.read()).split()
        out = ["you", "said:", *words]
        for i, word in enumerate(out):
            sys.stdout.write(word if i == 0 else " " + word)
            sys.stdout.flush()
            time.sleep(0.05)
        return 0
    if mode == "hang":
        with open(rest[0], "w") as file:
            file.write(str(os.getpid()))
        if "--ignore-term" in rest:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("thinking...", flush=True)
        while True:
            time.sleep(60)
    if mode == "fail":
        for i in range(1, 11):
            print(f"error line {i}", file=sys.stderr)
        return 3
    if mode == "env":
        print(f"{rest[0]} is {'set' if os.environ.get(rest[0]) else 'unset'}")
        return 0
    print(f"unknown mode {mode}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
