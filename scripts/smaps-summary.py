#!/usr/bin/env python3
"""Summarise /proc/PID/smaps (or a saved copy): RSS per mapped object and permission, split into clean file pages,
private dirty pages and anonymous pages; then RSS per object. Used for the idle-memory figures (docs/performance.md,
docs/decisions/0013-idle-memory.md).

Usage: scripts/smaps-summary.py PID | SMAPS_FILE     (e.g. a file kept by scripts/idle-node.sh --smaps DIR)
"""
import collections
import os
import re
import signal
import sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head

def parse(path):
    maps = []
    cur = None
    head = re.compile(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) (\S+) (\S+) (\d+)\s*(.*)$')
    with open(path) as f:
        for line in f:
            m = head.match(line)
            if m:
                cur = {'range': (int(m[1], 16), int(m[2], 16)), 'perms': m[3], 'name': m[7].strip() or '[anon]'}
                maps.append(cur)
            else:
                k, _, v = line.partition(':')
                v = v.strip()
                if v.endswith(' kB'):
                    cur[k] = int(v[:-3])
    return maps

def main():
    arg = sys.argv[1]
    path = f'/proc/{arg}/smaps' if arg.isdigit() else arg
    maps = parse(path)
    agg = collections.defaultdict(lambda: collections.Counter())
    for m in maps:
        name = os.path.basename(m['name']) if m['name'].startswith('/') else m['name']
        key = (name, m['perms'])
        c = agg[key]
        for k in ('Rss', 'Pss', 'Private_Dirty', 'Shared_Clean', 'Private_Clean', 'Anonymous', 'Size'):
            c[k] += m.get(k, 0)
    tot = collections.Counter()
    for c in agg.values(): tot.update(c)
    print(f"{'mapping':40} {'perms':5} {'Size':>8} {'Rss':>7} {'Clean':>7} {'PrivDirty':>9} {'Anon':>7}  (KiB)")
    for (name, perms), c in sorted(agg.items(), key=lambda kv: -kv[1]['Rss']):
        if c['Rss'] < 64: continue
        print(f"{name[:40]:40} {perms:5} {c['Size']:8} {c['Rss']:7} {c['Shared_Clean']+c['Private_Clean']:7} {c['Private_Dirty']:9} {c['Anonymous']:7}")
    print(f"{'TOTAL':40} {'':5} {tot['Size']:8} {tot['Rss']:7} {tot['Shared_Clean']+tot['Private_Clean']:7} {tot['Private_Dirty']:9} {tot['Anonymous']:7}")
    # by object
    byobj = collections.Counter()
    for (name, perms), c in agg.items(): byobj[name] += c['Rss']
    print("\nRss by object (MiB):", ', '.join(f"{n} {v/1024:.1f}" for n, v in byobj.most_common(14)))
    print(f"file-backed clean {(tot['Shared_Clean']+tot['Private_Clean'])/1024:.1f} MiB, anon {tot['Anonymous']/1024:.1f} MiB, private dirty {tot['Private_Dirty']/1024:.1f} MiB, total {tot['Rss']/1024:.1f} MiB")
main()
