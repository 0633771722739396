#!/usr/bin/env python3
"""The fan-out benchmark's driver (scripts/bench-fanout.sh runs it inside a private network namespace).

N real `natter run` processes on the namespace's loopback, discovery on, each a scripted REPL (--json on standard
output, commands on standard input). node0 founds one group of all N once it knows every profile; every member opens
it (members viewing: the node writes read receipts); then K messages from rotating senders, one every --interval
seconds. Each message's arrival is timed as each receiver prints its `message` event. Prints per-delivery and
reached-all latency quantiles, the messages lost (not at every receiver), per-node CPU share during the message phase
and RSS at its end, and the chat's records per message beyond the messages themselves (the receipts).

Every process is started here and stopped here by PID (SIGTERM, then SIGKILL), whatever happens; every wait is
bounded.
"""
import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")
LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def die_with_driver():
    """In each child: SIGKILL when this driver dies, however it dies (prctl PR_SET_PDEATHSIG)."""
    LIBC.prctl(1, signal.SIGKILL)


class Node:
    def __init__(self, index, binary, work):
        self.index = index
        self.name = f"node{index}"
        self.data = os.path.join(work, self.name)
        self.errors = open(os.path.join(work, f"{self.name}.err"), "wb")
        self.process = subprocess.Popen(
            [binary, "run", "--data", self.data, "--listen", "127.0.0.1:0", "--json", "--send-rate", "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, bufsize=0,
            preexec_fn=die_with_driver)
        self.lock = threading.Lock()
        self.port = None
        self.profiles = set()
        self.group = None          # the group's conversation id, once its creation arrived
        self.arrivals = {}         # message text -> monotonic arrival time
        self.shown_own = {}        # own message text -> when this node showed it (written)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for raw in self.process.stdout:
            now = time.monotonic()
            line = raw.decode("utf-8", "replace")
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("type")
            with self.lock:
                if kind == "message" and event.get("change") == "new" and not event.get("own"):
                    self.arrivals.setdefault(event.get("text"), now)
                elif kind == "message" and event.get("change") == "new":
                    self.shown_own.setdefault(event.get("text"), now)
                elif kind == "profile" and event.get("name"):
                    self.profiles.add(event["name"])
                elif kind == "member" and event.get("change") == "created":
                    self.group = event.get("conversation")
                elif kind == "started":
                    self.port = event.get("port")

    def send(self, line):
        self.process.stdin.write((line + "\n").encode())
        self.process.stdin.flush()

    def cpu_seconds(self):
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def rss_mib(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.errors.close()


def wait_until(what, seconds, condition):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {seconds} s waiting for {what}")


def quantiles(values):
    ordered = sorted(values)
    if not ordered:
        return "none"
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return f"p50 {pick(0.5) * 1000:.0f} ms  p99 {pick(0.99) * 1000:.0f} ms  max {ordered[-1] * 1000:.0f} ms"


def chat_records(binary, data):
    """Records held per conversation (feeds of the stopped node's store), the largest first."""
    output = subprocess.run([binary, "debug", "feeds", "--data", data], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    held = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "stored":
            held[parts[0]] = held.get(parts[0], 0) + int(parts[3])
    return held


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--nodes", type=int, default=25)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.5)
    options = parser.parse_args()
    n, k = options.nodes, options.messages
    started = time.monotonic()
    for i in range(n):
        subprocess.run([options.binary, "init", "--data", os.path.join(options.work, f"node{i}"), "--name",
                        f"node{i}"], stdout=subprocess.DEVNULL, timeout=60, check=True)
    nodes = []
    sent = {}
    cpu_before = []
    phase_start = time.monotonic()
    try:
        for i in range(n):
            nodes.append(Node(i, options.binary, options.work))
        founder = nodes[0]
        others = [f"node{i}" for i in range(1, n)]
        wait_until("node0 to know every profile", 120, lambda: set(others) <= founder.profiles)
        print(f"{n} nodes linked by discovery, every profile at node0 after {time.monotonic() - started:.1f} s")
        founder.send("/group create Room " + " ".join(others))
        wait_until("every member to have the group", 120, lambda: all(node.group for node in nodes))
        for node in nodes:
            node.send("/open Room")
        print(f"group of {n} created and opened by every member after {time.monotonic() - started:.1f} s")
        time.sleep(2)  # the founding receipts settle before the measured phase
        cpu_before = [node.cpu_seconds() for node in nodes]
        phase_start = time.monotonic()
        sent = {}
        for m in range(k):
            text = f"fanout {m}"
            nodes[m % n].send(text)
            sent[text] = time.monotonic()
            time.sleep(options.interval)
        wait_until("every message at every member", 10 + options.interval * 4,
                   lambda: all(len(node.arrivals) >= k - sum(1 for m in range(k) if m % n == node.index)
                               for node in nodes))
    except RuntimeError as error:
        print(f"bench-fanout: {error}")
    finally:
        phase_end = time.monotonic()
        cpu_after = [node.cpu_seconds() if node.process.poll() is None else None for node in nodes]
        rss = [node.rss_mib() if node.process.poll() is None else None for node in nodes]
        for node in nodes:
            node.stop()
    if not sent or not cpu_before:
        return 1
    deliveries, reached, lost = [], [], 0
    for m, (text, at) in enumerate(sent.items()):
        receivers = [node for node in nodes if node.index != m % n]
        times = [node.arrivals.get(text) for node in receivers]
        arrived = [t - at for t in times if t is not None]
        deliveries += arrived
        if os.environ.get("FANOUT_SLOW"):  # each delivery over 200 ms: (member, ms)
            slow = [(node.index, round((t - at) * 1000)) for node, t in zip(receivers, times)
                    if t is not None and t - at > 0.2]
            if slow:
                written = nodes[m % n].shown_own.get(text)
                written = "never" if written is None else f"{(written - at) * 1000:.0f} ms"
                print(f"slow: message {m} from node{m % n} at {at - phase_start:.1f} s (written at its sender after "
                      f"{written}) at", slow)
        if len(arrived) < len(receivers):
            lost += 1
        else:
            reached.append(max(arrived))
    seconds = phase_end - phase_start
    shares = [(after - before) / seconds * 100 for before, after in zip(cpu_before, cpu_after) if after is not None]
    if not shares:
        print("bench-fanout: every node stopped before the end of the message phase")
        return 1
    held = chat_records(options.binary, founder.data)
    chat = max(held.values()) if held else 0
    print(f"bench-fanout: {n} nodes, {k} messages, one every {options.interval} s, rotating senders")
    print(f"per delivery    {quantiles(deliveries)}  ({len(deliveries)} deliveries)")
    print(f"reached all     {quantiles(reached)}")
    print(f"lost            {lost} of {k} (not at every member)")
    print(f"CPU per node    median {statistics.median(shares):.1f}% of a core, max {max(shares):.1f}% "
          f"(message phase, {seconds:.1f} s)")
    print(f"RSS per node    median {statistics.median([r for r in rss if r]):.1f} MiB, "
          f"max {max(r for r in rss if r):.1f} MiB")
    print(f"chat records    {chat} at node0: {chat - k} beyond the {k} messages "
          f"({(chat - k) / max(k, 1):.1f} per message: the founding commit and the receipts)")
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
