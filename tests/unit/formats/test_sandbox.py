"""Tests of the sandbox templates render in: unsafe attributes refused, huge values and long
runs cut off, ordinary templates still rendered, compiled texts cached."""

from __future__ import annotations

import pytest

from refmount.errors import ReferenceFormatError
from refmount.formats.sandbox import compile_template
from tests.unit.formats.test_templates import problem_of, render


def test_sandbox_refuses_unsafe_attributes() -> None:
    problem = problem_of({"u": "host"}, "{{ u.__class__.__mro__ }}")
    assert "undefined" in problem or "refused" in problem


@pytest.mark.parametrize(
    "text", ["{{ 'a' * 100000000 }}", "{{ 100000000 * 'a' }}", "{{ 2 ** 100000000 }}"]
)
def test_sandbox_refuses_huge_results(text: str) -> None:
    assert problem_of({}, text).startswith("refused to render")


def test_sandbox_allows_ordinary_arithmetic() -> None:
    assert render({}, "{{ 2 ** 62 }}/{{ 'ab' * 3 }}/{{ 3 * 4 }}") == f"{2**62}/ababab/12"


def test_compiled_templates_are_cached() -> None:
    assert compile_template("{{ a }}-{{ b }}") is compile_template("{{ a }}-{{ b }}")


# ----------------------------------------------------------------------------- hostile templates

HUGE = 10**9


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{{ "x"|center(n) }}', "center would make"),
        ('{{ "x".center(n) }}', "center would make"),
        ('{{ "x".ljust(n) }}', "ljust would make"),
        ('{{ "x".zfill(n) }}', "zfill would make"),
        ('{{ "%1000000000d"|format(1) }}', "format width"),
        ('{{ "%*d"|format(n, 1) }}', "format would make"),
        ('{{ "%1000000000d" % 1 }}', "format width"),
        ('{{ "{:>1000000000}".format(1) }}', "format width"),
        ('{{ "x" * n }}', "too large"),
        ('{{ range(100000)|join("x" * 1000000) }}', "join would make"),
        ('{% set s = "y" * 1000000 %}{{ [s, s]|join }}', "join would make"),
        ("{{ lipsum(100000, False, 100000, 100000) }}", "lipsum would make"),
        ('{{ ("a " * 500000)|wordwrap(1, wrapstring="x" * 1000000) }}', "wordwrap would make"),
        ('{{ ("\n" * 1000000)|indent(1000000) }}', "indent would make"),
        ('{{ ("a" * 1000000)|replace("a", "b" * 1000000) }}', "replace would make"),
        ('{{ ("\t" * 1000000).expandtabs(1000000) }}', "expandtabs would make"),
        ('{% for a in range(100000) %}{{ "x" * 1000 }}{% endfor %}', "output is longer than"),
    ],
)
def test_a_template_that_would_build_a_huge_value_is_refused(text: str, problem: str) -> None:
    with pytest.raises(ReferenceFormatError) as caught:
        render({}, text, {"n": HUGE})
    assert caught.value.key == "k"
    assert problem in caught.value.problem
    assert "refused to render" in caught.value.problem


@pytest.mark.parametrize(
    "text",
    [
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        '{% set s = "x" * 100000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}',
        "{% macro f(n) %}{% if n > 0 %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
        "{{ f(60) }}",
    ],
)
def test_a_template_that_runs_long_is_cut_off(text: str) -> None:
    with pytest.raises(ReferenceFormatError, match="rendering took more than 2 s"):
        render({}, text)


def test_endless_recursion_is_refused() -> None:
    assert "RecursionError" in problem_of({}, "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")


def test_ordinary_filters_loops_and_formats_still_render() -> None:
    text = '{{ "%05d"|format(7) }}/{{ "a" * 3 }}/{{ [1, 2]|join(",") }}/{{ "x".center(5) }}'
    text += "{% for i in range(3) %}{{ i }}{% endfor %}{{ '{:>4}'.format(1) }}"
    assert render({}, text) == "00007/aaa/1,2/  x  012   1"
