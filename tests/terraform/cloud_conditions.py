"""Evaluators for the access conditions the GCS and Azure modules write, so the
policy tests can ask "may this principal do this to that name?" of the
conditions terraform renders, as test_terraform_policies.py does for IAM JSON.

Each evaluator understands exactly the subset of the condition language the
modules use and raises on anything else, so a condition written in a form
these tests cannot read fails the tests instead of passing them unread:

- GCS IAM conditions (CEL): ``resource.name.startsWith('x')``,
  ``resource.name.endsWith('x')``, ``resource.name == 'x'``,
  ``api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('x')``,
  joined by ``&&``, ``||``, ``!`` and parentheses.
- Azure role assignment conditions (version 2.0): ``ActionMatches{'a'}``,
  ``SubOperationMatches{'s'}``, ``@Resource[attr]`` / ``@Request[attr]`` with
  ``StringEquals``, ``StringStartsWith`` or ``StringLike``, joined by ``AND``,
  ``OR``, ``NOT``, ``!`` and parentheses. A comparison on an attribute the
  request does not carry is false, as Azure evaluates it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_LITERAL = r"'([^'\\]*)'"


@dataclass(frozen=True)
class GcsRequest:
    """One Cloud Storage call: its permission and the resource it is made on.
    Object calls name projects/_/buckets/<b>/objects/<key>; a list names the
    bucket and carries its prefix."""

    permission: str
    resource_name: str
    list_prefix: str = ""


@dataclass(frozen=True)
class AzureRequest:
    """One blob data action: the action, its suboperation (Blob.List for List
    Blobs), and the request's attributes (path of the blob; prefix of a list)."""

    action: str
    suboperation: str = ""
    resource: Mapping[str, str] = field(default_factory=dict)
    request: Mapping[str, str] = field(default_factory=dict)


Predicate = Callable[[Any], bool]
AtomRule = tuple[re.Pattern[str], Callable[[re.Match[str]], Predicate]]


def _field_is(field_name: str, value: str) -> Predicate:
    return lambda req: getattr(req, field_name) == value


def _list_prefix_startswith(value: str) -> Predicate:
    return lambda req: req.list_prefix.startswith(value)


def _gcs_name(op: str, value: str) -> Predicate:
    checks: dict[str, Callable[[str], bool]] = {
        "startsWith": lambda name: name.startswith(value),
        "endsWith": lambda name: name.endswith(value),
        "==": lambda name: name == value,
    }
    check = checks[op]
    return lambda req: check(req.resource_name)


_GCS_ATOMS: list[AtomRule] = [
    (
        re.compile(r"resource\.name\.(startsWith|endsWith)\(" + _LITERAL + r"\)"),
        lambda m: _gcs_name(m.group(1), m.group(2)),
    ),
    (
        re.compile(r"resource\.name\s*==\s*" + _LITERAL),
        lambda m: _gcs_name("==", m.group(1)),
    ),
    (
        re.compile(
            r"api\.getAttribute\('storage\.googleapis\.com/objectListPrefix',\s*''\)"
            r"\.startsWith\(" + _LITERAL + r"\)"
        ),
        lambda m: _list_prefix_startswith(m.group(1)),
    ),
]


def _azure_compare(source: str, attr: str, op: str, value: str) -> Predicate:
    def check(req: AzureRequest) -> bool:
        attrs = req.resource if source == "Resource" else req.request
        if attr not in attrs:
            return False
        actual = attrs[attr]
        if op == "StringEquals":
            return actual == value
        if op == "StringStartsWith":
            return actual.startswith(value)
        # StringLike: '*' any run of characters, '?' one; nothing else is special.
        regex = fnmatch.translate(value.replace("[", "[[]"))
        return re.fullmatch(regex, actual) is not None

    return check


_AZURE_ATOMS: list[AtomRule] = [
    (
        re.compile(r"ActionMatches\{" + _LITERAL + r"\}"),
        lambda m: _field_is("action", m.group(1)),
    ),
    (
        re.compile(r"SubOperationMatches\{" + _LITERAL + r"\}"),
        lambda m: _field_is("suboperation", m.group(1)),
    ),
    (
        re.compile(
            r"@(Resource|Request)\[([A-Za-z0-9/.:]+)\]\s+"
            r"(StringEquals|StringStartsWith|StringLike)\s+" + _LITERAL
        ),
        lambda m: _azure_compare(m.group(1), m.group(2), m.group(3), m.group(4)),
    ),
]


@dataclass(frozen=True)
class _Syntax:
    atoms: Sequence[AtomRule]
    and_: str
    or_: str
    nots: tuple[str, ...]


_GCS = _Syntax(_GCS_ATOMS, "&&", "||", ("!",))
_AZURE = _Syntax(_AZURE_ATOMS, "AND", "OR", ("!", "NOT"))


def _tokens(text: str, syntax: _Syntax) -> list[Any]:
    """Operators and parentheses as strings, atoms as predicates."""
    out: list[Any] = []
    pos = 0
    fixed = sorted({"(", ")", syntax.and_, syntax.or_, *syntax.nots}, key=len, reverse=True)
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        for rule, build in syntax.atoms:
            match = rule.match(text, pos)
            if match:
                out.append(build(match))
                pos = match.end()
                break
        else:
            op = next((f for f in fixed if text.startswith(f, pos)), None)
            if op is None:
                raise ValueError(f"condition syntax not understood at {text[pos : pos + 40]!r}")
            out.append(op)
            pos += len(op)
    return out


class _Parser:
    """expr := term (OR term)* ; term := factor (AND factor)* ;
    factor := NOT factor | '(' expr ')' | atom"""

    def __init__(self, tokens: list[Any], syntax: _Syntax) -> None:
        self.tokens, self.syntax, self.pos = tokens, syntax, 0

    def peek(self) -> Any:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> Any:
        token = self.peek()
        if token is None:
            raise ValueError("condition ends too early")
        self.pos += 1
        return token

    def expr(self) -> Predicate:
        parts = [self.term()]
        while self.peek() == self.syntax.or_:
            self.take()
            parts.append(self.term())
        return lambda req: any(p(req) for p in parts)

    def term(self) -> Predicate:
        parts = [self.factor()]
        while self.peek() == self.syntax.and_:
            self.take()
            parts.append(self.factor())
        return lambda req: all(p(req) for p in parts)

    def factor(self) -> Predicate:
        token = self.take()
        if isinstance(token, str) and token in self.syntax.nots:
            inner = self.factor()
            return lambda req: not inner(req)
        if token == "(":
            inner = self.expr()
            if self.take() != ")":
                raise ValueError("unbalanced parentheses in condition")
            return inner
        if callable(token):
            return token
        raise ValueError(f"unexpected {token!r} in condition")


def _compile(text: str, syntax: _Syntax) -> Predicate:
    parser = _Parser(_tokens(text, syntax), syntax)
    predicate = parser.expr()
    if parser.peek() is not None:
        raise ValueError(f"trailing {parser.peek()!r} in condition")
    return predicate


def compile_cel(text: str) -> Callable[[GcsRequest], bool]:
    """A GCS IAM condition as a predicate over GcsRequest."""
    return _compile(text, _GCS)


def compile_abac(text: str) -> Callable[[AzureRequest], bool]:
    """An Azure role assignment condition as a predicate over AzureRequest."""
    return _compile(text, _AZURE)


def gcs_allows(
    bindings: Mapping[str, Mapping[str, Any]],
    role_permissions: Mapping[str, Sequence[str]],
    principal: str,
    request: GcsRequest,
) -> bool:
    """Whether any binding of `principal` grants the request: its role holds the
    permission, its bucket is the request's, and its condition holds."""
    bucket = request.resource_name.split("/")[3]
    return any(
        b["principal"] == principal
        and b["bucket"] == bucket
        and request.permission in role_permissions[b["role"]]
        and compile_cel(b["expression"])(request)
        for b in bindings.values()
    )


def azure_allows(
    assignments: Mapping[str, Mapping[str, Any]],
    role_data_actions: Mapping[str, Sequence[str]],
    principal: str,
    scope: str,
    request: AzureRequest,
) -> bool:
    """Whether any assignment of `principal` at `scope` grants the request: its
    role holds the data action and its condition holds."""
    return any(
        a["principal"] == principal
        and a["scope"] == scope
        and request.action in role_data_actions[a["role"]]
        and compile_abac(a["condition"])(request)
        for a in assignments.values()
    )
