#!/usr/bin/env python3
"""Checks the sizes STYLE.md and issue 56 ask of kolo's C++ sources: a class (or struct) of at
most 40 members, 35 in core/loop; a source file of at most 500 lines; a function of at most 60
lines. Run by ctest as `source_sizes` (label `lint`); tools/check_sizes.allow lists what may be
bigger, each entry with its reason and its ceiling.

Usage: tools/check_sizes.py [--allowlist FILE] [SOURCE_ROOT | FILE...]
  SOURCE_ROOT: the checkout to check (default: the one this script is in); FILE...: check
  only these files (paths relative to the current directory), for a quick look or a test.

What is counted, as issue 56 counts it:
- A class's members: the methods and data members declared in its body, constructors,
  destructor, overloads, static members and `= default` ones included; `= delete`d functions,
  nested types, `using`/`typedef`, `friend`s, `static_assert`s and access labels are not.
  A nested class is a class of its own ("Outer::Inner"); so is one defined out of line
  ("class Outer::Impl {" in a .cc).
- A function's lines: from the line of its name to the line of its closing brace. Every
  function with a body counts: free functions, methods defined in or out of their class,
  Catch2 TEST_CASEs; a lambda counts as part of the function it is in.
  Functions in tests/ and fuzz/ (scenarios read top to bottom) are not checked.
- A file's lines: its newlines.
The parser is a tokenizer (comments, string and raw-string literals, character literals and
preprocessor lines are skipped) and a brace matcher that knows C++ declarations well enough for
kolo: templates, attribute macros (KOLO_GUARDED_BY(...) and any ALL_CAPS(...) after a
declarator), [[attributes]], constructor initializer lists, brace initializers and lambdas in
member initializers. Python sources are not checked (yet). Exit status: 0 clean, 1 violations
(or a stale allowlist entry), 2 usage or parse error. Standard library only.
"""
import os
import re
import sys

CLASS_LIMIT = 40
LOOP_CLASS_LIMIT = 35  # core/loop: the background loop's rooms stay smaller (issue 56)
LOOP_FOLDER = "core/loop/"
FILE_LIMIT = 500
FUNCTION_LIMIT = 60
# A test's or a fuzzer's function is a scenario read top to bottom: its length is not checked
# (its file's and its classes' are).
FUNCTION_EXEMPT = ("tests/", "fuzz/")

SOURCE_EXTS = (".h", ".hpp", ".cc", ".cpp", ".c", ".cu", ".cuh")
TOP_FOLDERS = ("controller", "core", "examples", "fuzz", "launcher", "libtorch", "ops", "python",
               "runtime", "tests", "tools", "transport")
SKIP_DIRS = {"fuzz/corpus", "tests/tools/data", "examples/data"}
DEFAULT_ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_sizes.allow")


class ParseError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Tokens

class Token:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind = kind  # "id", "num", "str", "char", "punct"
        self.text = text
        self.line = line

    def __repr__(self):
        return f"{self.text}@{self.line}"


PUNCT3 = ("<<=", ">>=", "...", "->*")
PUNCT2 = ("::", "->", "++", "--", "&&", "||", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=",
          "%=", "&=", "|=", "^=", "<<", ".*", "##")
ID_START = re.compile(r"[A-Za-z_]")
ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.']+)*")
RAW_PREFIX = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(')
STRING_PREFIX = re.compile(r'(?:u8|u|U|L)?"')
CHAR_PREFIX = re.compile(r"(?:u8|u|U|L)?'")


def tokenize(text):
    """C++ tokens of `text`, comments and preprocessor lines left out. `>>` and `<<` stay two
    tokens each so that template brackets can be matched; other operators are whole."""
    tokens = []
    i, line, n = 0, 1, len(text)
    line_start = True  # only whitespace since the last newline: a '#' starts a directive
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and text.startswith("\n", i + 1):
            i += 2
            line += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                # A comment continued by a backslash goes on to the next line.
                if text[i] == "\\" and text.startswith("\n", i + 1):
                    line += 1
                    i += 1
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ParseError(f"line {line}: unterminated /* comment")
            line += text.count("\n", i, end)
            i = end + 2
            continue
        if c == "#" and line_start:
            # A directive, to the end of its line (and of the lines its backslashes join);
            # comments inside it end it as the compiler sees it, near enough.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and text.startswith("\n", i + 1):
                    line += 1
                    i += 1
                elif text.startswith("/*", i):
                    end = text.find("*/", i + 2)
                    if end < 0:
                        raise ParseError(f"line {line}: unterminated /* comment")
                    line += text.count("\n", i, end)
                    i = end + 1
                i += 1
            continue
        line_start = False
        m = RAW_PREFIX.match(text, i)
        if m:
            close = ")" + m.group(1) + '"'
            end = text.find(close, m.end())
            if end < 0:
                raise ParseError(f"line {line}: unterminated raw string")
            tokens.append(Token("str", text[i:end + len(close)], line))
            line += text.count("\n", i, end)
            i = end + len(close)
            continue
        m = STRING_PREFIX.match(text, i) or CHAR_PREFIX.match(text, i)
        if m:
            quote = text[m.end() - 1]
            j = m.end()
            while j < n and text[j] != quote:
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    raise ParseError(f"line {line}: unterminated literal")
                j += 1
            tokens.append(Token("str" if quote == '"' else "char", text[i:j + 1], line))
            i = j + 1
            continue
        if ID_START.match(c):
            m = ID.match(text, i)
            tokens.append(Token("id", m.group(0), line))
            i = m.end()
            continue
        m = NUMBER.match(text, i)
        if m:
            tokens.append(Token("num", m.group(0), line))
            i = m.end()
            continue
        for p in PUNCT3 + PUNCT2:
            if text.startswith(p, i) and p not in ("<<", "<<=", ">>="):
                tokens.append(Token("punct", p, line))
                i += len(p)
                break
        else:
            tokens.append(Token("punct", c, line))
            i += 1
    return tokens


# ---------------------------------------------------------------------------------------------
# Structure

OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = {")", "]", "}"}
# Keywords whose parenthesised operand is not a parameter list.
PAREN_KEYWORDS = {"decltype", "alignas", "noexcept", "sizeof", "alignof", "__attribute__",
                  "__declspec", "throw", "typeof", "__typeof__", "explicit"}
# Declarations in a class body that declare no member.
NOT_MEMBER_FIRST = {"using", "typedef", "static_assert"}
TYPE_KEYS = {"class", "struct", "union"}
MACRO = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")


def match_brackets(tokens):
    """For each opening bracket's index, the index of its closing one."""
    pairs, stack = {}, []
    for index, tok in enumerate(tokens):
        if tok.kind != "punct":
            continue
        if tok.text in OPEN:
            stack.append(index)
        elif tok.text in CLOSE:
            if not stack or OPEN[tokens[stack[-1]].text] != tok.text:
                raise ParseError(f"line {tok.line}: unbalanced '{tok.text}'")
            pairs[stack.pop()] = index
    if stack:
        tok = tokens[stack[-1]]
        raise ParseError(f"line {tok.line}: '{tok.text}' never closed")
    return pairs


class Parser:
    def __init__(self, tokens):
        self.t = tokens
        self.pairs = match_brackets(tokens)
        self.classes = []    # (qualified name, members, line of the keyword, line of the '{')
        self.functions = []  # (qualified name, lines, first line)

    def skip_angles(self, i, end):
        """`tokens[i]` is a template's '<': the index after its '>' (brackets inside are
        skipped whole, so a '>' within parentheses is a comparison)."""
        depth = 0
        while i < end:
            s = self.t[i].text
            if s == "<":
                depth += 1
            elif s == ">":
                depth -= 1
                if depth == 0:
                    return i + 1
            elif s in OPEN:
                i = self.pairs[i]
            elif s in (";", "}", ")"):
                return i  # not a template after all
            i += 1
        return i

    def text(self, i):
        return self.t[i].text if 0 <= i < len(self.t) else ""

    def parse(self):
        self.scope(0, len(self.t), [], in_class=False)
        self.find_local_classes()
        return self

    # A scope is a namespace (or the file), or a class body: a sequence of declarations.
    def scope(self, begin, end, names, in_class):
        """Walks the declarations in tokens[begin:end]; returns the class's member count."""
        members = 0
        i = begin
        while i < end:
            i, count = self.declaration(i, end, names, in_class)
            members += count
        return members

    def skip_prefix(self, i, end):
        """Skips `template <...>`, [[attributes]] and attribute macros before a declaration."""
        while i < end:
            t = self.t[i]
            if t.text == "template" and self.text(i + 1) == "<":
                i = self.skip_angles(i + 1, end)
            elif t.text == "[" and self.text(i + 1) == "[":
                i = self.pairs[i] + 1
            elif (t.kind == "id" and MACRO.match(t.text) and self.text(i + 1) == "("
                  and self.is_prefix_macro(i, end)):
                i = self.pairs[i + 1] + 1
            else:
                return i
        return i

    def is_prefix_macro(self, i, end):
        """A macro call before a declaration (`KOLO_EXPORT void F();`), not a declaration of
        its own (`TEST_CASE("x") {`, `KOLO_DISALLOW_COPY(X);`): another identifier follows."""
        after = self.pairs[i + 1] + 1
        return after < end and self.t[after].kind == "id"

    def declaration(self, i, end, names, in_class):
        """Parses one declaration from `i`; returns (next index, members it declares)."""
        t = self.t
        if t[i].text == ";":
            return i + 1, 0
        if in_class and t[i].text in ("public", "private", "protected") and self.text(i + 1) == ":":
            return i + 2, 0
        if t[i].text == "namespace" or (t[i].text == "extern" and t[i + 1].kind == "str"
                                        and self.text(i + 2) == "{"):
            j = i
            while j < end and t[j].text not in ("{", ";", "="):
                j += 1
            if j < end and t[j].text == "{":
                close = self.pairs[j]
                self.scope(j + 1, close, names, in_class=False)
                return close + 1, 0
            return self.to_semicolon(j, end), 0  # namespace alias, extern "C" declaration
        i = self.skip_prefix(i, end)
        if i >= end:
            return end, 0
        head = t[i].text
        if head in NOT_MEMBER_FIRST or (head == "template" and self.text(i + 1) != "<"):
            return self.to_semicolon(i, end), 0
        if head == "enum":
            return self.to_semicolon(i, end), 0
        if head == "friend":  # may define a function: `friend bool operator==(...) {...}`
            after, _ = self.plain_declaration(i + 1, end, names, in_class)
            return after, 0
        if head in TYPE_KEYS:
            body = self.class_head(i, end)
            if body is not None:
                name, open_brace = body
                close = self.pairs[open_brace]
                qualified = names + [name]
                count = self.scope(open_brace + 1, close, qualified, in_class=True)
                self.classes.append(("::".join(qualified), count, t[i].line, t[open_brace].line))
                # `struct {...} a, b;`: declarators after the body.
                j = close + 1
                declarators = 0
                while j < end and t[j].text != ";":
                    if t[j].kind == "id" and (self.text(j + 1) in (",", ";", "=", "[", "{")):
                        declarators += 1
                    j = self.pairs[j] + 1 if t[j].text in OPEN else j + 1
                return j + 1, declarators if in_class else 0
            j = i + 2  # keyword, name, (:: name)*
            while j + 1 < end and t[j].text == "::" and t[j + 1].kind == "id":
                j += 2
            if t[i + 1].kind == "id" and j < end and t[j].text == ";":
                return j + 1, 0  # a forward declaration: struct Decided;
        return self.plain_declaration(i, end, names, in_class)

    def class_head(self, i, end):
        """`tokens[i]` is class/struct/union: (its name, the index of its '{') when it begins a
        definition, else None (an elaborated type: `struct stat st;`, a forward declaration)."""
        t = self.t
        if i > 0 and t[i - 1].text in ("enum", "friend"):
            return None
        j = i + 1
        name = "(anonymous)"
        while j < end:
            x = t[j]
            if x.text == "[" and self.text(j + 1) == "[":
                j = self.pairs[j] + 1
            elif x.kind == "id" and x.text in ("alignas", "__attribute__", "__declspec"):
                j = self.pairs[j + 1] + 1
            elif x.kind == "id" and MACRO.match(x.text) and self.text(j + 1) == "(":
                j = self.pairs[j + 1] + 1  # class KOLO_CAPABILITY("mutex") Mutex
            elif x.kind == "id" and MACRO.match(x.text) and t[j + 1].kind == "id":
                j += 1  # class KOLO_EXPORT Foo
            else:
                break
        if j < end and t[j].kind == "id" and t[j].text != "final":
            parts = [t[j].text]
            j += 1
            while j < end:
                if t[j].text == "<":
                    j = self.skip_angles(j, end)
                elif t[j].text == "::" and j + 1 < end and t[j + 1].kind == "id":
                    parts.append(t[j + 1].text)
                    j += 2
                else:
                    break
            name = "::".join(parts)
        if j < end and t[j].text == "final":
            j += 1
        if j < end and t[j].text == ":":
            while j < end and t[j].text not in ("{", ";"):
                j = self.pairs[j] + 1 if t[j].text in ("(", "[") else j + 1
        if j < end and t[j].text == "{":
            return name, j
        return None

    def to_semicolon(self, i, end):
        while i < end and self.t[i].text != ";":
            i = self.pairs[i] + 1 if self.t[i].text in OPEN else i + 1
        return i + 1

    def plain_declaration(self, i, end, names, in_class):
        """A variable, data member or function (declared or defined) from `i`."""
        t = self.t
        angle = 0  # depth in template brackets, before any initializer
        declarators = 1
        j = i
        while j < end:
            x = t[j]
            s = x.text
            if s == ";":
                break
            if s == "operator":
                paren = self.operator_paren(j, end)
                if paren is None:
                    raise ParseError(f"line {x.line}: cannot read this operator's declaration")
                return self.function_tail(self.pairs[paren] + 1, end, paren, names, in_class)
            if s == "<" and j > i and (t[j - 1].kind == "id" or t[j - 1].text == ">"):
                angle += 1
            elif s == ">" and angle > 0:
                angle -= 1
            elif s == "," and angle == 0:
                declarators += 1
            elif s == "(":
                prev = t[j - 1] if j > i else None
                if prev is not None and prev.kind == "id" and (
                        prev.text in PAREN_KEYWORDS
                        or (MACRO.match(prev.text) and j - 1 > i)):
                    j = self.pairs[j] + 1  # decltype(x), KOLO_GUARDED_BY(mu_) and the like
                    continue
                if angle == 0 and self.text(j + 1) not in ("*", "&", "^"):
                    return self.function_tail(self.pairs[j] + 1, end, j, names, in_class)
                j = self.pairs[j] + 1
                continue
            elif s in ("=", "{"):
                # An initializer: the rest is an expression or a braced list, to the ';'.
                if angle == 0 or s == "{":
                    k = j
                    while k < end and t[k].text != ";":
                        if t[k].text in OPEN:
                            k = self.pairs[k]
                        elif t[k].text == "," and self.declarator_follows(k, end):
                            declarators += 1
                        k += 1
                    j = k
                    break
            elif s in ("[",):
                j = self.pairs[j] + 1
                continue
            elif s in ("}", ")", "]"):
                raise ParseError(f"line {x.line}: unexpected '{s}'")
            j += 1
        only_macro = (t[i].kind == "id" and MACRO.match(t[i].text) and self.text(i + 1) == "("
                      and self.pairs[i + 1] + 1 == j)
        if only_macro or j == i:
            return j + 1, 0
        return j + 1, declarators if in_class else 0

    def declarator_follows(self, comma, end):
        """After an initializer, `, name =`, `, name;`, `, name{`: another declarator."""
        t = self.t
        return (comma + 2 < end and t[comma + 1].kind == "id"
                and t[comma + 2].text in ("=", ";", "{", "["))

    def operator_paren(self, j, end):
        """The '(' of the parameters of `operator...` at `j`."""
        t = self.t
        k = j + 1
        if k < end and t[k].text == "(" and self.text(k + 1) == ")":
            k += 2  # operator()
        while k < end and t[k].text != "(":
            if t[k].text in (";", "{"):
                return None
            k += 1
        return k if k < end else None

    def function_tail(self, j, end, paren, names, in_class):
        """After a function's parameter list (its '(' at `paren`, `j` past its ')'): its
        qualifiers, `= 0` / `= default` / `= delete`, its initializer list and its body."""
        t = self.t
        in_init_list = False
        while j < end:
            s = t[j].text
            if s == ";":
                return j + 1, 0 if not in_class else 1
            if s == "=" and not in_init_list:
                k = j + 1
                deleted = self.text(k) == "delete"
                j = self.to_semicolon(j, end)
                return j, 0 if (deleted or not in_class) else 1
            if s == ":" and not in_init_list:
                in_init_list = True
                j += 1
                continue
            if s == "{":
                prev = t[j - 1]
                if in_init_list and (prev.kind == "id" or prev.text == ">"):
                    j = self.pairs[j] + 1  # a member's brace initializer: b_{x}
                    continue
                close = self.pairs[j]
                self.record_function(paren, close, names)
                j = close + 1
                if j < end and t[j].text == ";":
                    j += 1
                return j, 1 if in_class else 0
            if s in ("(", "["):
                j = self.pairs[j] + 1
                continue
            if s == "->" or s == "<":
                j = self.skip_angles(j, end) if s == "<" else j + 1
                continue
            j += 1
        return j, 1 if in_class else 0

    def function_name(self, paren):
        t = self.t
        k = paren - 1
        parts = []
        if t[k].text == ">":  # a template's explicit specialization: F<int>(
            depth = 0
            while k >= 0:
                if t[k].text == ">":
                    depth += 1
                elif t[k].text == "<":
                    depth -= 1
                    if depth == 0:
                        k -= 1
                        break
                k -= 1
        # operator(), operator==, operator bool: take everything from `operator`.
        for back in range(k, max(k - 5, -1), -1):
            if t[back].text == "operator":
                parts = ["operator" + "".join(x.text for x in t[back + 1:paren]
                                              if x.text != "operator")]
                k = back - 1
                break
        else:
            if t[k].kind == "id":
                parts = [t[k].text]
                k -= 1
                if k >= 0 and t[k].text == "~":
                    parts[0] = "~" + parts[0]
                    k -= 1
        while k >= 1 and t[k].text == "::" and t[k - 1].kind == "id":
            parts.insert(0, t[k - 1].text)
            k -= 2
        name = "::".join(parts) or "(unnamed)"
        if MACRO.match(name) and t[paren + 1].kind == "str":
            name = f"{name}({t[paren + 1].text})"  # TEST_CASE("what it checks")
        return name, t[k + 1].line if k + 1 < paren else t[paren].line

    def record_function(self, paren, close, names):
        name, line = self.function_name(paren)
        if names and "::" not in name:
            name = "::".join(names) + "::" + name
        self.functions.append((name, self.t[close].line - line + 1, line))

    def find_local_classes(self):
        """Classes defined inside function bodies (the scope walk does not enter those)."""
        seen = {line for _, _, line, _ in self.classes}
        t = self.t
        for i, x in enumerate(t):
            if x.text in TYPE_KEYS and x.line not in seen:
                body = self.class_head(i, len(t))
                if body is None:
                    continue
                name, open_brace = body
                if name == "(anonymous)" and not self.function_body_around(i):
                    continue
                if not self.function_body_around(i):
                    continue
                close = self.pairs[open_brace]
                inner = Parser.__new__(Parser)
                inner.t, inner.pairs = self.t, self.pairs
                inner.classes, inner.functions = [], []
                count = inner.scope(open_brace + 1, close, [name], in_class=True)
                self.classes.append((name, count, x.line, t[open_brace].line))
                seen.add(x.line)

    def function_body_around(self, i):
        """Whether token `i` lies in a function's body (whose lines are counted already)."""
        for _, lines, first in self.functions:
            if first <= self.t[i].line <= first + lines - 1:
                return True
        return False


def analyse(text):
    """(classes, functions, lines) of one source text: classes as (name, members, line),
    functions as (name, lines, first line)."""
    parser = Parser(tokenize(text)).parse()
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    classes = [(name, count, line) for name, count, line, _ in parser.classes]
    return classes, parser.functions, lines


# ---------------------------------------------------------------------------------------------
# The allowlist

class Allowed:
    def __init__(self, kind, path, name, ceiling, why, where):
        self.kind, self.path, self.name, self.ceiling, self.why = kind, path, name, ceiling, why
        self.where = where
        self.used = False


def read_allowlist(path):
    """Entries `KIND PATH NAME CEILING WHY...`: KIND is class, function or file; NAME is `-` for
    a file; CEILING the most members or lines allowed (today's count for what is being
    split, so that it shrinks and never grows); WHY the reason, which every entry must give."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(None, 4)
            where = f"{path}:{number}"
            if (len(fields) < 5 or fields[0] not in ("class", "function", "file")
                    or not fields[3].isdigit()):
                raise ParseError(f"{where}: expected 'class|function|file PATH NAME CEILING "
                                 f"WHY', got {line!r}")
            entries.append(Allowed(fields[0], fields[1], fields[2], int(fields[3]), fields[4],
                                   where))
    return entries


def find_allowed(entries, kind, path, name):
    for entry in entries:
        if entry.kind == kind and entry.path == path and entry.name in (name, "-"):
            return entry
    return None


# ---------------------------------------------------------------------------------------------
# The check

def class_limit(path):
    return LOOP_CLASS_LIMIT if path.startswith(LOOP_FOLDER) else CLASS_LIMIT


def check(root, rel_paths, entries):
    """The violations (one line each) of the files `rel_paths` under `root`."""
    errors = []

    def over(kind, path, name, count, limit, what):
        if count <= limit:
            return
        entry = find_allowed(entries, kind, path, name)
        label = f"{path}: {kind} {name}" if kind != "file" else f"{path}: file"
        if entry is None:
            errors.append(f"{label}: {count} {what}, over the limit of {limit}")
            return
        entry.used = True
        if count > entry.ceiling:
            errors.append(f"{label}: {count} {what}, over its allowlisted ceiling of "
                          f"{entry.ceiling} (limit {limit}; {entry.where}: {entry.why})")

    for rel in rel_paths:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        try:
            classes, functions, lines = analyse(text)
        except ParseError as e:
            raise ParseError(f"{rel}: {e}") from None
        over("file", rel, "-", lines, FILE_LIMIT, "lines")
        for name, count, _ in classes:
            over("class", rel, name, count, class_limit(rel), "members")
        for name, count, _ in functions if not rel.startswith(FUNCTION_EXEMPT) else ():
            over("function", rel, name, count, FUNCTION_LIMIT, "lines")
    return errors


def source_files(root):
    found = []
    for top in TOP_FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            rel_dir = os.path.relpath(dirpath, root)
            dirnames[:] = sorted(d for d in dirnames
                                 if os.path.join(rel_dir, d) not in SKIP_DIRS
                                 and not d.startswith("."))
            found += [os.path.join(rel_dir, name) for name in sorted(filenames)
                      if name.endswith(SOURCE_EXTS)]
    return found


def main(argv):
    args = argv[1:]
    allowlist = DEFAULT_ALLOWLIST
    if args[:1] == ["--allowlist"]:
        if len(args) < 2:
            print(__doc__, file=sys.stderr)
            return 2
        allowlist, args = args[1], args[2:]
    if any(a.startswith("-") for a in args):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        entries = read_allowlist(allowlist)
        if len(args) == 1 and os.path.isdir(args[0]) or not args:
            root = os.path.abspath(args[0] if args else
                                   os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
            if not os.path.isdir(os.path.join(root, "core")):
                print(f"check_sizes: {root} is not kolo's source root", file=sys.stderr)
                return 2
            files = source_files(root)
            whole_tree = True
        else:
            root, files, whole_tree = os.getcwd(), [os.path.normpath(a) for a in args], False
        errors = check(root, files, entries)
    except (ParseError, OSError) as e:
        print(f"check_sizes: {e}", file=sys.stderr)
        return 2
    if whole_tree:
        for entry in entries:
            if not entry.used:
                errors.append(f"{entry.where}: {entry.kind} {entry.path} {entry.name} is within "
                              f"the limits now (or gone): remove its allowlist entry")
    for error in errors:
        print(error)
    if errors:
        print(f"check_sizes: {len(errors)} size(s) over the limits in {len(files)} files "
              f"(classes {CLASS_LIMIT} members, {LOOP_CLASS_LIMIT} in {LOOP_FOLDER}; files "
              f"{FILE_LIMIT} lines; functions {FUNCTION_LIMIT} lines; STYLE.md, issue 56)")
        return 1
    print(f"check_sizes: {len(files)} files within the size limits")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
