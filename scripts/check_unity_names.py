#!/usr/bin/env python3
"""keel's sources compile in unity batches (CMakeLists.txt, KEEL_UNITY_BUILD): several .cpp files
of src/ become one translation unit, and which files meet depends on the order of the whole list.
Names private to a file (at the top of an anonymous namespace, or `static` at namespace scope)
then share one scope with the other files' private names of the same enclosing namespace. Two
helpers of one name would at best fail to compile in some batch, and at worst meet as overloads,
so that a call in one file silently picks the other file's function. This check lists every
private name that two files of src/ define in the same enclosing namespace; it exits 1 when there
is one. Identical type aliases (`using json = nlohmann::json;`) may repeat.

    python3 scripts/check_unity_names.py [SOURCE_ROOT]      (default: the checkout's src/)
"""
import collections
import os
import re
import sys

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "alignas", "static_assert",
            "operator", "catch", "noexcept", "throw", "new", "delete"}


def strip(code):
    """The code without comments, string and character literals (their text could hold braces)."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        elif c == "R" and code.startswith('R"', i) and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            m = re.match(r'R"([^(]*)\(', code[i:])
            end = code.find(")" + m.group(1) + '"', i) if m else -1
            out.append('""')
            i = n if end < 0 else end + len(m.group(1)) + 2
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def private_names(code):
    """(enclosing namespace, name, declaration text) for each private name of one file."""
    code = strip(code)
    code = "\n".join(line for line in code.split("\n") if not line.lstrip().startswith("#"))
    found = []
    stack = []  # per open brace: the namespace it opens ("" anonymous), or None
    statement = []  # text at the current brace level since the last ; { or }

    def flush(text, scope):
        s = " ".join(text.split())
        if not s:
            return
        s = re.sub(r"template\s*<.*?>\s*", "", s)
        m = re.match(r"(?:struct|class|union|enum(?:\s+class|\s+struct)?)\s+(\w+)", s)
        if m:
            found.append((scope, m.group(1), "type"))
            return
        m = re.match(r"using\s+(\w+)\s*=\s*(.*)$", s)
        if m:
            found.append((scope, m.group(1), "alias " + m.group(2)))
            return
        if s.startswith(("using ", "namespace ", "extern ", "friend ", "typedef ")):
            return
        head = s.split("=")[0] if "(" not in s.split("=")[0] or "=" not in s else s[: s.index("=")] if s.index("=") < s.index("(") else s
        m = re.search(r"(\w+)\s*\((.*)\)[^()]*$", head)
        if m and m.group(1) not in KEYWORDS:
            found.append((scope, m.group(1), "function"))
            return
        m = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*(?:=.*|\{\})?$", s)
        if m and m.group(1) not in KEYWORDS:
            found.append((scope, m.group(1), "variable"))

    def scope_of(anonymous_only):
        names = [x for x in stack if x is not None and x != "="]
        if anonymous_only and (not stack or stack[-1] != ""):
            return None
        if any(x is None for x in stack):
            return None  # inside a function, class or initializer
        return "::".join(x for x in names if x)

    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "{" and "=" in "".join(statement).replace("==", "").replace("operator=", ""):
            stack.append("=")  # a braced initializer inside a statement: the statement goes on
            statement.append(c)
        elif c == "}" and stack and stack[-1] == "=":
            stack.pop()
            statement.append(c)
        elif c == "{":
            text = "".join(statement)
            m = re.search(r"\bnamespace\s*([\w:]*)\s*$", text)
            scope = scope_of(True)
            if m:
                if scope is not None:
                    pass  # a named namespace inside an anonymous one: not expected in src/
                stack.append(m.group(1))
            else:
                if scope is not None:
                    flush(text, scope)
                elif not stack or all(x is not None for x in stack):
                    st = re.match(r"\s*static\s+", text)
                    if st and "(" in text:
                        flush(text[st.end():], scope_of(False))
                stack.append(None)
            statement = []
        elif c == "}":
            if stack:
                stack.pop()
            statement = []
        elif c == ";" and stack and stack[-1] == "=":
            statement.append(c)  # inside a lambda of an initializer
        elif c == ";":
            text = "".join(statement)
            scope = scope_of(True)
            if scope is not None:
                flush(text, scope)
            elif all(x is not None for x in stack):
                st = re.match(r"\s*static\s+", text)
                if st:
                    flush(text[st.end():], scope_of(False))
            statement = []
        else:
            statement.append(c)
        i += 1
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    where = collections.defaultdict(lambda: collections.defaultdict(set))  # (scope, name) -> kind -> files
    for folder, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".cpp"):
                continue
            path = os.path.join(folder, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for scope, name, kind in private_names(fh.read()):
                    where[(scope, name)][kind].add(os.path.relpath(path, root))
    clashes = []
    for (scope, name), kinds in sorted(where.items()):
        files = set().union(*kinds.values())
        if len(files) < 2:
            continue
        if len(kinds) == 1 and next(iter(kinds)).startswith("alias "):
            continue  # the same alias repeated
        clashes.append(f"{scope or '(global)'}::{name}: {', '.join(sorted(files))}")
    for line in clashes:
        print(line)
    if clashes:
        print(f"{len(clashes)} private name(s) defined in more than one file of {os.path.normpath(root)}: "
              "give each a distinct name, or move the shared helper into one header", file=sys.stderr)
        return 1
    print(f"unity names: every private name of {os.path.normpath(root)} is defined once per namespace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
