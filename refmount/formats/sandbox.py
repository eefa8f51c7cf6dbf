"""jinja2's sandbox as Version 1 templates use it: one shared environment where undefined names
are errors and every way to build a huge value or to run long is bounded (sizes checked before
and after each filter, call and operator; a clock checked in loops and calls)."""

from __future__ import annotations

import functools
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

_MAX_RESULT_ITEMS = 1 << 20
"""The largest string or list a template may build along the way (``*``, a filter, a call)."""

MAX_RENDERED = 64 * 1024
"""The most characters one text may render to for one key (a URL, a key, an offset)."""

RENDER_SECONDS = 2.0
"""The longest one text may take to render for one key."""

_MAX_POWER_BITS = 1 << 16
"""The largest integer (in bits) a template may build with ``**``."""


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
    """Return the sandbox: undefined names are errors, and every way to build a huge value or
    to run long is bounded.

    Each filter, call, ``*``, ``**`` and ``%`` has its arguments checked first where its
    result could be much larger than them (a width, a repeat count, a format's padding), and
    its result checked after; every loop checks the clock at each step, as does every call;
    the output of a text is cut off past ``MAX_RENDERED`` (``bounded_join``).
    """
    import jinja2
    from jinja2 import nodes
    from jinja2.sandbox import SandboxedEnvironment

    class Sandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "%"})

        def call_binop(
            self, context: jinja2.runtime.Context, operator: str, left: object, right: object
        ) -> object:
            _check_clock()
            _check_binop(operator, left, right)
            return _checked_result(super().call_binop(context, operator, left, right), operator)

        def call(
            __self,  # (jinja's own signature: the arguments may be called "self")
            __context: jinja2.runtime.Context,
            __obj: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            _check_clock()
            name = getattr(__obj, "__name__", type(__obj).__name__)
            bound = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
            if isinstance(bound, str):  # a str method (format comes wrapped by the sandbox)
                _check_arguments(name, (bound, *args), kwargs)
            elif name == "generate_lorem_ipsum":
                _check_arguments("lipsum", args, kwargs)
            result = SandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
            return _checked_result(result, name)

        def _parse(
            self, source: str, name: str | None, filename: str | None
        ) -> jinja2.nodes.Template:
            tree = super()._parse(source, name, filename)
            for loop in tree.find_all(nodes.For):
                loop.iter = nodes.Filter(loop.iter, _LOOP_FILTER, [], [], None, None)
            return tree

    sandbox = Sandbox(undefined=jinja2.StrictUndefined, autoescape=False)
    sandbox.filters = {name: _guarded(name, f) for name, f in sandbox.filters.items()}
    sandbox.filters[_LOOP_FILTER] = _clocked
    return sandbox


_LOOP_FILTER = "refmount_loop_clock"
"""The filter put around every loop's iterable: it checks the clock at each step."""


class RenderLimitError(Exception):
    """A template went past a limit on its output or its time."""


class Clock:
    """When the text being rendered must be done (``time.monotonic`` seconds)."""

    __slots__ = ("deadline",)

    def __init__(self) -> None:
        self.deadline = float("inf")


CLOCK = Clock()
"""The deadline of the text being rendered: ``Templates`` sets it, calls and loops check it."""


def _check_clock() -> None:
    if time.monotonic() > CLOCK.deadline:
        raise RenderLimitError(f"rendering took more than {RENDER_SECONDS:g} s, the limit")


def _clocked(iterable: Iterable[object]) -> Iterator[object]:
    """Yield what ``iterable`` yields, checking the clock before each item."""
    for item in iterable:
        _check_clock()
        yield item


def bounded_join(pieces: Iterable[str]) -> str:
    """Join a template's output, refusing it once it passes ``MAX_RENDERED`` characters."""
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_RENDERED:
            raise RenderLimitError(
                f"the output is longer than {MAX_RENDERED:,} characters, the limit"
            )
        _check_clock()
        out.append(piece)
    return "".join(out)


def _guarded(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """Return ``function`` (a filter) with its arguments checked first and its result after."""

    from jinja2.utils import _PassArg

    # A filter marked pass_context (or pass_eval_context, pass_environment) gets that first;
    # functools.wraps copies the mark, so jinja still passes it.
    skip = 0 if _PassArg.from_obj(function) is None else 1

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check_clock()
        _check_arguments(name, args[skip:], kwargs)
        return _checked_result(function(*args, **kwargs), name)

    return guarded


def _too_large(what: str, size: int) -> RenderLimitError:
    return RenderLimitError(f"{what} would make {size:,} items, more than {_MAX_RESULT_ITEMS:,}")


def _checked_result(result: Any, what: str) -> Any:
    """Return ``result`` unless it is a string or a collection longer than allowed."""
    if isinstance(result, str | bytes | list | tuple | dict) and len(result) > _MAX_RESULT_ITEMS:
        raise _too_large(what, len(result))
    return result


def _check_arguments(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse a filter or ``str`` method call whose result would be far larger than its input.

    The result's size is estimated from the arguments, before anything is built.
    """
    estimate = _ESTIMATES.get(name)
    if estimate is None or not args:
        return
    try:
        size = estimate(args, kwargs)
    except (TypeError, ValueError, AttributeError, IndexError):
        return  # the call itself will fail, with its own message
    if size > _MAX_RESULT_ITEMS:
        raise _too_large(name, size)


def _number(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> int:
    value = kwargs.get(name, args[index] if len(args) > index else 0)
    return value if type(value) is int else len(str(value))


def _text(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> str:
    value = kwargs.get(name, args[index] if len(args) > index else "")
    return value if isinstance(value, str) else str(value)


def _join_size(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """``sep.join(items)`` as a method (``args[0]`` the separator) or ``items|join(sep)``."""
    if isinstance(args[0], str) and len(args) > 1:  # str.join: (separator, items)
        separator, items = args[0], args[1]
    else:
        items, separator = args[0], _text(args, kwargs, 1, "d")
    items = list(items) if not isinstance(items, str) else items
    if len(items) > _MAX_RESULT_ITEMS:
        return len(items)
    return sum(len(str(item)) for item in items) + len(separator) * max(0, len(items) - 1)


def _lines(value: object) -> int:
    return str(value).count("\n") + 1


_ESTIMATES: dict[str, Callable[[tuple[Any, ...], Mapping[str, Any]], int]] = {
    "center": lambda a, k: _number(a, k, 1, "width"),
    "ljust": lambda a, k: _number(a, k, 1, "width"),
    "rjust": lambda a, k: _number(a, k, 1, "width"),
    "zfill": lambda a, k: _number(a, k, 1, "width"),
    "indent": lambda a, k: _lines(a[0]) * _number(a, k, 1, "width"),
    "expandtabs": lambda a, k: str(a[0]).count("\t") * _number(a, k, 1, "tabsize"),
    "wordwrap": lambda a, k: (
        len(str(a[0])) // max(1, _number(a, k, 1, "width")) * len(_text(a, k, 4, "wrapstring"))
    ),
    "replace": lambda a, k: (
        (str(a[0]).count(_text(a, k, 1, "old")) + 1) * len(_text(a, k, 2, "new"))
    ),
    "join": _join_size,
    "lipsum": lambda a, k: _number(a, k, 0, "n") * _number(a, k, 3, "max") * 16,
    "format": lambda a, k: _format_size(_text(a, k, 0, "value"), a[1:], k),
    "format_map": lambda a, k: _format_size(str(a[0]), (), {}),
}
"""How large each expanding filter's or ``str`` method's result may be, from its arguments."""


def _format_size(template: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """Estimate a ``%`` or ``{}`` format's result: its text, its arguments, its paddings."""
    _check_format(template)
    stars = template.count("*")
    widths = sum(value for value in args if type(value) is int) if stars else 0
    return len(template) + sum(len(str(value)) for value in (*args, *kwargs.values())) + widths


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*)(?:\.(\d*))?")
_DIGITS = re.compile(r"\d+")


def _check_format(template: str) -> None:
    """Refuse a format whose width or precision (``%9999999d``, ``{:>9999999}``) is too large."""
    widest = _widest(template)
    if widest > _MAX_RESULT_ITEMS:
        raise RenderLimitError(f"a format width of {widest:,} is too large")


@functools.lru_cache(maxsize=4096)
def _widest(template: str) -> int:
    """Return the largest width or precision in a ``%`` or ``{}`` format (0 if none)."""
    numbers = [int(n) for width in _PERCENT_SPEC.findall(template) for n in width if n]
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        parsed = []
    for _, _, spec, _ in parsed:
        numbers.extend(int(n) for n in _DIGITS.findall(spec or ""))
    return max(numbers, default=0)


def _check_binop(operator: str, left: object, right: object) -> None:
    """Refuse a ``*``, ``**`` or ``%`` whose result would be absurdly large (denial of service)."""
    from jinja2.exceptions import SecurityError

    if operator == "%":
        if isinstance(left, str):
            values = right if isinstance(right, tuple) else (right,)
            size = _format_size(left, values, {})
            if size > _MAX_RESULT_ITEMS:
                raise _too_large("%", size)
        return
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
