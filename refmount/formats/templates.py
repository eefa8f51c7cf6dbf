"""Version 1 templates, rendered by jinja2's sandbox with a fast path for plain ``{{ name }}``."""

from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from refmount.errors import ReferenceFormatError

if TYPE_CHECKING:
    import jinja2

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

_SPECIAL_NAMES = frozenset(keyword.kwlist) | {"true", "false", "none", "self"}
"""Names jinja does not look up as plain variables (constants, operators, ``self``)."""

_MAX_RESULT_ITEMS = 1 << 20
"""The largest string or list a template may build with ``*``."""

_MAX_POWER_BITS = 1 << 16
"""The largest integer (in bits) a template may build with ``**``."""

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

    __slots__ = ("_context", "_jinja_context", "_plain", "_plans", "_replace", "_source")

    def __init__(self, source: str, templates: Mapping[str, object]) -> None:
        self._source = source
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
        try:
            template = compile_template(text)
            # What Template.render does, minus copying the environment's globals (a ChainMap)
            # on every call: they are already in ``context``. It halves the time gen spends.
            return "".join(template.root_render_func(template.new_context(context, shared=True)))
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


@functools.lru_cache(maxsize=4096)
def compile_template(text: str) -> jinja2.Template:
    """Return ``text`` compiled by the shared sandboxed environment (compiled once per text)."""
    return _environment().from_string(text)


@functools.lru_cache(maxsize=1)
def environment_globals() -> dict[str, object]:
    """Return the names every template sees besides the variables (``range``, ``dict`` …)."""
    return dict(_environment().globals)


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """Return the sandbox: undefined names are errors, and huge ``*``/``**`` results refused."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    class Sandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(
            self, context: jinja2.runtime.Context, operator: str, left: object, right: object
        ) -> object:
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

    return Sandbox(undefined=jinja2.StrictUndefined, autoescape=False)


def _check_binop(operator: str, left: object, right: object) -> None:
    """Refuse a ``*`` or ``**`` whose result would be absurdly large (a denial of service)."""
    from jinja2.exceptions import SecurityError

    if operator == "**":
        if (
            type(left) is int
            and type(right) is int
            and abs(left) > 1
            and left.bit_length() * right > _MAX_POWER_BITS
        ):
            raise SecurityError(f"{left} ** {right} is too large")
        return
    for sequence, count in ((left, right), (right, left)):
        if (
            isinstance(sequence, str | bytes | list | tuple)
            and type(count) is int
            and len(sequence) * count > _MAX_RESULT_ITEMS
        ):
            raise SecurityError(f"a sequence of {len(sequence)} items * {count} is too large")
