"""Version 1 templates: a fast path for plain ``{{ name }}``, jinja2's sandbox (``sandbox``) for
the rest, under a time budget per reference file."""

from __future__ import annotations

import keyword
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from refmount.errors import ReferenceFormatError
from refmount.formats.sandbox import (
    CLOCK,
    RENDER_SECONDS,
    RenderLimitError,
    bounded_join,
    compile_template,
    environment_globals,
)

if TYPE_CHECKING:
    pass

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

_SPECIAL_NAMES = frozenset(keyword.kwlist) | {"true", "false", "none", "self"}
"""Names jinja does not look up as plain variables (constants, operators, ``self``)."""

TOTAL_RENDER_SECONDS = 600.0
"""The longest all the jinja renderings of one reference file may take together."""

_MISSING = object()

_Plan = tuple[str, tuple[tuple[str, str], ...]]
"""A text's leading literal, then each placeholder's name with the literal after it."""


class _NotPlain(Exception):
    """A placeholder names something other than a plain-string template."""


class TemplateFunction:
    """A template whose value contains ``{{``: called with keyword arguments, like ``f(c='x')``.

    It is rendered in the sandbox with only its arguments defined.
    """

    __slots__ = ("name", "text")

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text

    def __call__(self, *args: object, **kwargs: object) -> str:
        """Render the template with ``kwargs`` as its variables."""
        if args:
            raise TypeError(f"template {self.name!r} takes keyword arguments only")
        return compile_template(self.text).render(kwargs)

    def __str__(self) -> str:
        """Refuse to be printed uncalled: ``{{ f }}`` is a mistake for ``{{ f(x=...) }}``."""
        raise TypeError(f"template {self.name!r} must be called, like {self.name}(name=value)")


class Templates:
    """The ``templates`` of one Version 1 reference file, ready to render text with."""

    __slots__ = (
        "_context",
        "_jinja_context",
        "_plain",
        "_plans",
        "_replace",
        "_source",
        "_spent",
    )

    def __init__(self, source: str, templates: Mapping[str, object]) -> None:
        self._source = source
        self._spent = 0.0  # seconds spent rendering with jinja so far
        self._plain: dict[str, str] = {}
        context: dict[str, object] = {}
        for name, value in templates.items():
            if not isinstance(value, str):
                raise ReferenceFormatError(
                    source, None, f"template {name!r} must be a string, not {type(value).__name__}"
                )
            if "{{" in value:
                context[name] = TemplateFunction(name, value)
            else:
                self._plain[name] = value
                context[name] = value
        self._context = context
        self._jinja_context: dict[str, object] | None = None
        self._plans: dict[str, _Plan | None] = {}
        lookup = {k: v for k, v in self._plain.items() if k not in _SPECIAL_NAMES}.get

        def replace(match: re.Match[str]) -> str:
            value = lookup(match[1])
            if value is None:
                raise _NotPlain
            return value

        self._replace = replace

    def __contains__(self, name: object) -> bool:
        """Return True when a template is called ``name``."""
        return name in self._context

    def render(
        self,
        key: str | None,
        text: str,
        variables: Mapping[str, object] | None = None,
        field: str = "URL",
    ) -> str:
        """Return ``text`` rendered with the templates and ``variables``.

        Raises ``ReferenceFormatError`` naming ``key`` and ``field`` on a syntax error, an
        undefined name or any other failure while rendering.
        """
        if variables is None:
            rendered = self._substitute_plain(text)
            if rendered is not None:
                return rendered
            plan = _plan(text)
        else:
            # gen renders the same few texts once per combination: remember their plans.
            try:
                plan = self._plans[text]
            except KeyError:
                plan = self._plans[text] = _plan(text)
        if plan is not None:
            rendered = self._substitute(plan, variables)
            if rendered is not None:
                return rendered
        return self._render_jinja(key, text, variables, field)

    def pieces(self, text: str, names: Sequence[str]) -> tuple[str | int, ...] | None:
        """Return ``text`` as literals and variable numbers (positions in ``names``) when
        plain substitution renders it, with the plain templates folded into the literals;
        None when it takes jinja.

        ``render`` with variables ``names`` gives the same text, each variable's value
        written with ``str``: the literals and values joined in order.
        """
        plan = _plan(text)
        if plan is None:
            return None
        first, placeholders = plan
        numbers = {name: number for number, name in enumerate(names)}
        out: list[str | int] = [first]
        for name, literal in placeholders:
            number = numbers.get(name)
            if number is not None:
                out.append(number)
            elif name in self._plain:
                out.append(self._plain[name])
            else:
                return None  # an undefined name or a template function: jinja says which
            out.append(literal)
        merged: list[str | int] = []
        for piece in out:
            if isinstance(piece, str) and merged and isinstance(merged[-1], str):
                merged[-1] += piece
            elif piece != "":
                merged.append(piece)
        return tuple(merged)

    def _substitute_plain(self, text: str) -> str | None:
        """Render ``text`` by substitution when it is literals and plain templates, else None.

        The same rule as ``_plan``, checked faster: a million refs URLs may come this way.
        """
        if "\r" in text or text.endswith("\n"):
            return None
        try:
            rendered, count = _PLACEHOLDER.subn(self._replace, text)
        except _NotPlain:
            return None
        if text.count("{") != 2 * count:
            return None  # a brace outside the placeholders: let _plan look closer
        return rendered

    def _substitute(self, plan: _Plan, variables: Mapping[str, object] | None) -> str | None:
        """Render a plain ``literal {{ name }} literal`` text by substitution, or return None."""
        first, placeholders = plan
        if not placeholders:
            return first
        pieces = [first]
        plain = self._plain
        for name, literal in placeholders:
            value: object
            if variables is not None and name in variables:
                value = variables[name]
            else:
                value = plain.get(name, _MISSING)
                if value is _MISSING:
                    return None
            pieces.append(value if isinstance(value, str) else str(value))
            pieces.append(literal)
        return "".join(pieces)

    def _render_jinja(
        self, key: str | None, text: str, variables: Mapping[str, object] | None, field: str
    ) -> str:
        from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError

        context = self._jinja_context
        if context is None:
            context = self._jinja_context = {**environment_globals(), **self._context}
        if variables:
            context = {**context, **variables}
        started = time.monotonic()
        left = TOTAL_RENDER_SECONDS - self._spent
        try:
            if left <= 0:
                raise RenderLimitError(
                    f"rendering took more than {TOTAL_RENDER_SECONDS:g} s in all, the limit"
                )
            CLOCK.deadline = started + min(RENDER_SECONDS, left)
            template = compile_template(text)
            # What Template.render does, minus copying the environment's globals (a ChainMap)
            # on every call: they are already in ``context``. It halves the time gen spends.
            return bounded_join(
                template.root_render_func(template.new_context(context, shared=True))
            )
        except RenderLimitError as exc:
            problem = f"refused to render {field} {text!r}: {exc}"
            raise ReferenceFormatError(self._source, key, problem) from exc
        except TemplateSyntaxError as exc:
            problem = f"template syntax error in {field} {text!r}: {exc.message}"
            raise ReferenceFormatError(self._source, key, problem) from exc
        except UndefinedError as exc:
            problem = f"undefined name in {field} {text!r}: {exc.message}"
            raise ReferenceFormatError(self._source, key, problem) from exc
        except SecurityError as exc:
            problem = f"refused to render {field} {text!r}: {exc}"
            raise ReferenceFormatError(self._source, key, problem) from exc
        except Exception as exc:
            problem = f"cannot render {field} {text!r}: {type(exc).__name__}: {exc}"
            raise ReferenceFormatError(self._source, key, problem) from exc
        finally:
            self._spent += time.monotonic() - started
            CLOCK.deadline = float("inf")  # a template function called later starts afresh


def _plan(text: str) -> _Plan | None:
    """Split ``text`` into literals and ``{{ name }}`` placeholders, if jinja would do no more.

    Returns None when the text needs jinja: other expressions, statements, comments, carriage
    returns or a trailing newline (jinja normalises and strips those), or a special name.
    """
    if "\r" in text or text.endswith("\n"):
        return None
    parts = _PLACEHOLDER.split(text)
    literals = parts[0::2]
    names = parts[1::2]
    if not _SPECIAL_NAMES.isdisjoint(names):
        return None
    if text.count("{") != 2 * len(names):  # some brace is not part of a placeholder
        last = len(literals) - 1
        for index, literal in enumerate(literals):
            if "{{" in literal or "{%" in literal or "{#" in literal:
                return None
            if index < last and literal.endswith("{"):
                return None
    return literals[0], tuple(zip(names, literals[1:], strict=True))
