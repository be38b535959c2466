#!/usr/bin/env python3
"""Import cycles between tlsperf's modules.

Builds the module → module graph from the `crate::` and `super::` paths in src/ (unit-test
modules left out; a child naming its own parent is Rust's module tree, not an import) and
prints the cycles between top-level modules, and between files of one top-level module.
Exits 1 when there is one. Usage: scripts/module-cycles.py [SRC_DIR]
"""
import os, re, sys, itertools
root = sys.argv[1] if len(sys.argv) > 1 else 'src'
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3]
            parts = rel.split('/')
            if parts[-1] in ('mod', 'lib', 'main'): parts = parts[:-1]
            files['::'.join(parts)] = open(p).read()
mods = set(files)
def strip_tests(src):
    i = src.find('#[cfg(test)]\nmod tests')
    return src if i < 0 else src[:i]
def resolve(path):
    parts = path.split('::')
    best = None
    for i in range(1, len(parts)+1):
        m = '::'.join(parts[:i])
        if m in mods: best = m
    return best
edges = {}
for m, src in files.items():
    src = strip_tests(src)
    src = re.sub(r'//[^\n]*', '', src)
    tgts = set()
    # expand `crate::a::{b, c::d}` groups roughly
    for mt in re.finditer(r'\bcrate::([A-Za-z_][\w:]*)(::\{([^}]*)\})?', src):
        base = mt.group(1).rstrip(':')
        if mt.group(3):
            for item in re.split(r'[,\s]+', mt.group(3)):
                item = item.strip()
                if not item or item == 'self': tgts.add(base); continue
                item = re.split(r'[{ ]', item)[0]
                tgts.add(base + '::' + item.strip(':'))
        tgts.add(base)
    parent = m.rsplit('::', 1)[0] if '::' in m else ''
    for mt in re.finditer(r'\bsuper::([A-Za-z_][\w:]*)', src):
        # super relative to file module
        p = mt.group(1).rstrip(':')
        tgts.add((parent + '::' + p) if parent else p)
    res = set()
    for t in tgts:
        r = resolve(t)
        if r and r != m and not m.startswith(r + '::'):
            res.add(r)
    edges[m] = res
def top(m): return m.split('::')[0]
def cycles(g):
    # Tarjan SCC
    idx, low, st, on, out, c = {}, {}, [], set(), [], [0]
    def sc(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in idx: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in list(g): 
        if v not in idx: sc(v)
    return out
tg = {}
for m, ts in edges.items():
    for t in ts:
        if top(t) != top(m): tg.setdefault(top(m), set()).add(top(t))
print('top-level cycles:')
for comp in cycles(tg):
    print('  ', comp)
    for a in comp:
        for b in comp:
            if b in tg.get(a, ()):
                why = sorted(f'{m}->{t}' for m, ts in edges.items() for t in ts if top(m)==a and top(t)==b)
                print('      ', a, '->', b, ':', ', '.join(why[:6]))
# file level within a top module
fg = {m: {t for t in ts if top(t)==top(m)} for m, ts in edges.items()}
print('file-level cycles (within one top module):')
file_cycles = cycles(fg)
for comp in file_cycles:
    print('  ', comp)
sys.exit(1 if cycles(tg) or file_cycles else 0)
