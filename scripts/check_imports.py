#!/usr/bin/env python3
"""The import rules of memlens, in the spirit of Perfetto's tools/check_imports.

Reads every `crate::`/`super::` path in the Rust sources (use lines and inline paths, comments
dropped) and checks:
  1. no circle between the top-level modules of memlens-core (lib.rs, which only declares and
     re-exports, is left out);
  2. no circle between the modules inside each folder of core (layout/, state/, raw/, ...);
  3. no circle between the files of the web app (each file is a module);
  4. rules by layer: core's trace/ imports no other module of core but error; raw/ imports
     only trace and error; in the web app the page side imports no worker module, the worker
     side no page module, and wire/ neither.
Prints each violation with the file that makes it and exits 1 if there is any.
Usage: scripts/check_imports.py [repo root]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
CORE = ROOT / "crates/memlens-core/src"
WEB = ROOT / "web/src"

# Allowed imports by layer: a module of core listed here may import only the modules named.
CORE_ONLY = {
    "trace": {"error"},
    "raw": {"trace", "error"},
}
# Web rooms: a file under the first folder must not import from the second.
WEB_FORBIDDEN = [("page", "worker"), ("worker", "page"), ("wire", "page"), ("wire", "worker")]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"\"(?:\\.|[^\"\\])*\"", '""', text)
    return re.sub(r"//[^\n]*", "", text)


def module_path(src, file):
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts and parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def expand_tree(text):
    """Yields the paths of `crate::`/`super::` references, with `{a, b::c}` groups expanded."""
    for m in re.finditer(r"\b((?:crate|super)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))*)(::\{)?", text):
        head = m.group(1)
        if not m.group(2):
            yield head.split("::")
            continue
        depth, i, start = 1, m.end(), m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[start : i - 1]
        # Top-level items of the group (nested groups keep only their first segment).
        items, depth, cur = [], 0, ""
        for ch in body:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(cur)
                cur = ""
                continue
            if depth == 0:
                cur += ch
        items.append(cur)
        for it in items:
            it = it.strip().split(" as ")[0].strip()
            if it and it != "self":
                yield head.split("::") + [p for p in it.split("::") if p and p != "*"]
            elif it == "self":
                yield head.split("::")


def references(src, file):
    """Module paths (from the crate root) that `file` refers to."""
    here = module_path(src, file)
    out = []
    for path in expand_tree(strip_comments(file.read_text())):
        if path[0] == "crate":
            out.append(path[1:])
            continue
        # `super` is the parent of this file's module (for mod.rs, of its folder's module).
        base, rest = list(here), list(path)
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
        out.append(base + rest)
    return [p for p in out if p]


def files(src):
    return sorted(p for p in src.rglob("*.rs") if "bin" not in p.relative_to(src).parts)


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    nodes = set(edges) | {b for bs in edges.values() for b in bs}

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def report_cycles(label, edges, why):
    bad = []
    for comp in cycles(edges):
        lines = [f"{a} -> {b} ({why[(a, b)]})" for a in comp for b in sorted(edges[a]) if b in comp]
        bad.append(f"{label}: import circle between {', '.join(comp)}:\n    " + "\n    ".join(lines))
    return bad


def check_core():
    bad, top = [], {}
    inner = {d.name: {} for d in sorted(CORE.iterdir()) if d.is_dir() and d.name != "bin"}
    why = {}
    for f in files(CORE):
        here = module_path(CORE, f)
        if not here:
            continue
        rel = f.relative_to(ROOT)
        for ref in references(CORE, f):
            a, b = here[0], ref[0]
            if a != b:
                top.setdefault(a, set()).add(b)
                why.setdefault((a, b), rel)
                allowed = CORE_ONLY.get(a)
                if allowed is not None and b not in allowed:
                    bad.append(f"{rel}: {a}/ may import only {sorted(allowed)}, not crate::{'::'.join(ref[:2])}")
            elif a in inner and len(here) > 1 and len(ref) > 1 and here[1] != ref[1]:
                if (CORE / a / f"{ref[1]}.rs").exists() or (CORE / a / ref[1]).is_dir():
                    inner[a].setdefault(here[1], set()).add(ref[1])
                    why.setdefault((f"{a}::{here[1]}", f"{a}::{ref[1]}"), rel)
    bad += report_cycles("core", top, why)
    for name, edges in inner.items():
        named = {f"{name}::{a}": {f"{name}::{b}" for b in bs} for a, bs in edges.items()}
        bad += report_cycles(f"core {name}/", named, why)
    return bad


def check_web():
    bad, edges, why = [], {}, {}
    known = {tuple(module_path(WEB, f)) for f in files(WEB)}
    for f in files(WEB):
        here = tuple(module_path(WEB, f))
        if not here:
            continue
        rel = f.relative_to(ROOT)
        for ref in references(WEB, f):
            # The longest prefix of the path that is a file of the app.
            target = next((tuple(ref[:k]) for k in range(len(ref), 0, -1) if tuple(ref[:k]) in known), None)
            if target is None or target == here:
                continue
            # A folder's mod.rs declaring its own children is not an import.
            if target[: len(here)] == here and f.stem == "mod":
                continue
            for side, other in WEB_FORBIDDEN:
                if here[0] == side and target[0] == other:
                    bad.append(f"{rel}: the {side} side imports {other} (crate::{'::'.join(target)})")
            a, b = "::".join(here), "::".join(target)
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), rel)
    bad += report_cycles("web", edges, why)
    return bad


def main():
    bad = list(dict.fromkeys(check_core() + check_web()))
    for b in bad:
        print(f"check_imports: {b}")
    if bad:
        sys.exit(1)
    print("check_imports: ok (no circles in core, inside its folders, or in web; layer rules hold)")


if __name__ == "__main__":
    main()
