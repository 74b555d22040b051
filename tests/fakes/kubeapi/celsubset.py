"""A small subset of CEL for webhooks' ``matchConditions`` (see the README, "Admission webhooks").

Supported: the variables ``request``, ``object`` and ``oldObject``; string (single or double quoted),
integer, ``true``/``false``/``null`` and list literals; field selection (``a.b``) and indexing
(``a['k']``, ``a[0]``); ``!``, ``&&``, ``||``, ``==``, ``!=``, ``in`` (a list's elements, a map's keys);
``has(a.b)``; ``size(x)``/``x.size()``; and the string methods ``startsWith``, ``endsWith`` and
``contains``. ``&&`` and ``||`` absorb errors as CEL does (``false && error`` is false, ``true || error``
is true). Anything else (``authorizer``, macros such as ``exists``, arithmetic, comparisons other than
equality) is unsupported: evaluating it raises ``CelError``, which the caller treats as an evaluation
error (by the webhook's failurePolicy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<int>\d+)
      | (?P<op>&&|\|\||==|!=|[!.()\[\],])
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
UNSUPPORTED_VARIABLES = frozenset({"authorizer", "params", "namespaceObject", "variables"})


class CelError(Exception):
    """An expression that cannot be evaluated (or is outside the supported subset)."""


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str


def _tokens(expr: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(expr):
        if expr[pos:].strip() == "":
            break
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            raise CelError(f"unsupported expression: {expr!r} (at {expr[pos:].strip()[:20]!r})")
        kind = m.lastgroup or ""
        out.append(_Tok(kind, m.group(kind)))
        pos = m.end()
    out.append(_Tok("end", ""))
    return out


class _Parser:
    """Recursive descent into a small tree of tuples: ("lit", v), ("var", name), ("sel", x, f),
    ("idx", x, i), ("not", x), ("and", a, b), ("or", a, b), ("eq"|"ne"|"in", a, b),
    ("call", name, target | None, args), ("list", items)."""

    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.toks = _tokens(expr)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self, text: str | None = None) -> _Tok:
        tok = self.toks[self.i]
        if text is not None and tok.text != text:
            raise CelError(f"unsupported expression: {self.expr!r} (expected {text!r})")
        self.i += 1
        return tok

    def parse(self) -> tuple[Any, ...]:
        node = self.disjunction()
        if self.peek().kind != "end":
            raise CelError(f"unsupported expression: {self.expr!r} (at {self.peek().text!r})")
        return node

    def disjunction(self) -> tuple[Any, ...]:
        node = self.conjunction()
        while self.peek().text == "||":
            self.take()
            node = ("or", node, self.conjunction())
        return node

    def conjunction(self) -> tuple[Any, ...]:
        node = self.relation()
        while self.peek().text == "&&":
            self.take()
            node = ("and", node, self.relation())
        return node

    def relation(self) -> tuple[Any, ...]:
        node = self.unary()
        tok = self.peek()
        if tok.text in ("==", "!="):
            self.take()
            return ("eq" if tok.text == "==" else "ne", node, self.unary())
        if tok.kind == "ident" and tok.text == "in":
            self.take()
            return ("in", node, self.unary())
        return node

    def unary(self) -> tuple[Any, ...]:
        if self.peek().text == "!":
            self.take()
            return ("not", self.unary())
        return self.member()

    def member(self) -> tuple[Any, ...]:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok.text == ".":
                self.take()
                name = self.take()
                if name.kind != "ident":
                    raise CelError(f"unsupported expression: {self.expr!r}")
                if self.peek().text == "(":
                    node = ("call", name.text, node, self.arguments())
                else:
                    node = ("sel", node, name.text)
            elif tok.text == "[":
                self.take()
                index = self.disjunction()
                self.take("]")
                node = ("idx", node, index)
            else:
                return node

    def arguments(self) -> list[tuple[Any, ...]]:
        self.take("(")
        args: list[tuple[Any, ...]] = []
        while self.peek().text != ")":
            args.append(self.disjunction())
            if self.peek().text == ",":
                self.take()
        self.take(")")
        return args

    def primary(self) -> tuple[Any, ...]:
        tok = self.take()
        if tok.kind == "str":
            body = tok.text[1:-1]
            return ("lit", re.sub(r"\\(.)", r"\1", body))
        if tok.kind == "int":
            return ("lit", int(tok.text))
        if tok.text == "(":
            node = self.disjunction()
            self.take(")")
            return node
        if tok.text == "[":
            items: list[tuple[Any, ...]] = []
            while self.peek().text != "]":
                items.append(self.disjunction())
                if self.peek().text == ",":
                    self.take()
            self.take("]")
            return ("list", items)
        if tok.kind == "ident":
            if tok.text in ("true", "false", "null"):
                return ("lit", {"true": True, "false": False, "null": None}[tok.text])
            if self.peek().text == "(":
                return ("call", tok.text, None, self.arguments())
            return ("var", tok.text)
        raise CelError(f"unsupported expression: {self.expr!r} (at {tok.text!r})")


def _select(value: Any, field: str) -> Any:
    if not isinstance(value, dict):
        raise CelError(f"no such key: {field}")
    if field not in value:
        raise CelError(f"no such key: {field}")
    return value[field]


def _eval(node: tuple[Any, ...], env: dict[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "var":
        if node[1] in UNSUPPORTED_VARIABLES:
            raise CelError(f"the emulator does not support the variable {node[1]}")
        if node[1] not in env:
            raise CelError(f"undeclared reference to '{node[1]}' (in container '')")
        return env[node[1]]
    if kind == "list":
        return [_eval(item, env) for item in node[1]]
    if kind == "sel":
        return _select(_eval(node[1], env), node[2])
    if kind == "idx":
        target, index = _eval(node[1], env), _eval(node[2], env)
        if isinstance(target, dict) and isinstance(index, str):
            return _select(target, index)
        if isinstance(target, list) and isinstance(index, int) and not isinstance(index, bool):
            if not 0 <= index < len(target):
                raise CelError(f"index out of bounds: {index}")
            return target[index]
        raise CelError("no such overload")
    if kind == "not":
        value = _eval(node[1], env)
        if not isinstance(value, bool):
            raise CelError("no such overload")
        return not value
    if kind in ("and", "or"):
        return _logic(kind, node[1], node[2], env)
    if kind in ("eq", "ne"):
        same = _eval(node[1], env) == _eval(node[2], env)
        return same if kind == "eq" else not same
    if kind == "in":
        item, container = _eval(node[1], env), _eval(node[2], env)
        if isinstance(container, (list, dict)):
            return item in container
        raise CelError("no such overload")
    if kind == "call":
        return _call(node[1], node[2], node[3], env)
    raise CelError(f"unsupported expression node {kind}")


def _logic(kind: str, left: tuple[Any, ...], right: tuple[Any, ...], env: dict[str, Any]) -> bool:
    """CEL's commutative && and ||: a deciding operand wins over an error on the other side."""
    decisive = kind == "or"  # the value that decides: true for ||, false for &&
    error: CelError | None = None
    for operand in (left, right):
        try:
            value = _eval(operand, env)
        except CelError as exc:
            error = error or exc
            continue
        if not isinstance(value, bool):
            error = error or CelError("no such overload")
            continue
        if value is decisive:
            return decisive
    if error is not None:
        raise error
    return not decisive


def _call(name: str, target: tuple[Any, ...] | None, args: list[tuple[Any, ...]], env: dict[str, Any]) -> Any:
    if name == "has" and target is None and len(args) == 1 and args[0][0] == "sel":
        holder = _eval(args[0][1], env)
        if not isinstance(holder, dict):
            raise CelError("no such overload")
        return args[0][2] in holder
    if name == "size" and (target is None) == (len(args) == 1) and len(args) <= 1:
        value = _eval(target if target is not None else args[0], env)
        if isinstance(value, (str, list, dict)):
            return len(value)
        raise CelError("no such overload")
    if name in ("startsWith", "endsWith", "contains") and target is not None and len(args) == 1:
        text, arg = _eval(target, env), _eval(args[0], env)
        if not isinstance(text, str) or not isinstance(arg, str):
            raise CelError("no such overload")
        if name == "startsWith":
            return text.startswith(arg)
        if name == "endsWith":
            return text.endswith(arg)
        return arg in text
    if target is not None:
        _eval(target, env)  # the receiver's own error first
    raise CelError(f"the emulator does not support the function {name}()")


def evaluate(expression: str, env: dict[str, Any]) -> Any:
    """The value of ``expression`` over ``env``; ``CelError`` when it cannot be evaluated."""
    return _eval(_Parser(expression).parse(), env)
