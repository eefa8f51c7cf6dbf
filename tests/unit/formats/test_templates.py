"""Version 1 templates: the jinja2 sandbox, strict names, and the substitution fast path."""

from __future__ import annotations

import time
from collections.abc import Mapping

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import SandboxedEnvironment

from refmount.errors import ReferenceFormatError
from refmount.formats.templates import TemplateFunction, Templates

SOURCE = "refs.json"


def render(
    templates: Mapping[str, object], text: str, variables: dict[str, object] | None = None
) -> str:
    return Templates(SOURCE, templates).render("k", text, variables)


def problem_of(templates: Mapping[str, object], text: str) -> str:
    with pytest.raises(ReferenceFormatError) as caught:
        render(templates, text)
    assert caught.value.source == SOURCE
    assert caught.value.key == "k"
    return caught.value.problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://{{u}}/x", "http://host/x"),  # J29
        ("http://{{ u }}/x", "http://host/x"),  # J29b: fsspec's simple mode fails here
        ("http://{{u}}/{x}", "http://host/{x}"),  # J29c: literal single braces stay
        ("http://{u}/a", "http://{u}/a"),  # no {{: nothing to render
        ("{{u}}{{u}}", "hosthost"),
        ("{{u|upper}}/{{ 'a' ~ 'b' }}", "HOST/ab"),
        ("{{ u }}}", "host}"),
        ("a}}b{{u}}", "a}}bhost"),
        ("{{u}}\n", "host"),  # jinja drops one trailing newline
        ("{{u}}\r\nx", "host\nx"),  # and normalises newlines
    ],
)
def test_render(text: str, expected: str) -> None:
    assert render({"u": "host"}, text) == expected


def test_template_function_called_with_keywords() -> None:
    templates = {"u": "server.domain/path", "f": "{{c}}"}
    assert render(templates, "http://{{f(c='text')}}") == "http://text"
    assert render(templates, "{{ f(c=u) }}") == "server.domain/path"


def test_template_function_sees_only_its_arguments() -> None:
    problem = problem_of({"u": "host", "g": "{{u}}/{{c}}"}, "{{ g(c='x') }}")
    assert "undefined name" in problem
    assert "'u' is undefined" in problem


def test_template_function_must_be_called() -> None:
    assert "must be called" in problem_of({"f": "{{c}}"}, "http://{{f}}")


def test_template_function_takes_keywords_only() -> None:
    assert "keyword arguments only" in problem_of({"f": "{{c}}"}, "{{ f('x') }}")


def test_template_function_object() -> None:
    function = TemplateFunction("f", "<{{ c }}>")
    assert function(c="x") == "<x>"
    with pytest.raises(TypeError, match="keyword arguments only"):
        function("x")


def test_undefined_name_is_an_error_not_an_empty_string() -> None:
    # J29d: fsspec's jinja mode renders "http:///a"; an undefined name is a mistake.
    problem = problem_of({"u": "host"}, "http://{{missing}}/a")
    assert problem == ("undefined name in URL 'http://{{missing}}/a': 'missing' is undefined")


def test_undefined_name_without_any_templates() -> None:
    # J30: fsspec leaves the URL alone when there are no templates; we render every "{{".
    assert "'u' is undefined" in problem_of({}, "http://{{u}}")


@pytest.mark.parametrize("text", ["http://{{u", "{{ u }", "{{ u + }}", "{% if %}", "{{{u}}"])
def test_syntax_error_names_the_text_and_jinja_message(text: str) -> None:
    problem = problem_of({"u": "host"}, text)
    assert problem.startswith(f"template syntax error in URL {text!r}: ")
    with pytest.raises(jinja2.TemplateSyntaxError) as caught:
        SandboxedEnvironment().from_string(text)
    assert problem.endswith(caught.value.message or "")


def test_runtime_error_is_reported() -> None:
    assert "ZeroDivisionError" in problem_of({}, "{{ 1 / 0 }}")


def test_template_values_must_be_strings() -> None:
    with pytest.raises(ReferenceFormatError, match="template 'n' must be a string, not int"):
        Templates(SOURCE, {"n": 5})


def test_variables_and_the_field_name_in_messages() -> None:
    templates = Templates(SOURCE, {"u": "host"})
    assert templates.render("k", "{{u}}/{{i}}.{{j}}", {"i": 3, "j": None}) == "host/3.None"
    assert templates.render("k", "{{ (i + 1) * 1000 }}", {"i": 4}) == "5000"
    with pytest.raises(ReferenceFormatError) as caught:
        templates.render(None, "{{ i + }}", {"i": 1}, field="gen item 0 offset")
    assert caught.value.key is None
    assert caught.value.problem.startswith("template syntax error in gen item 0 offset")


def test_contains() -> None:
    templates = Templates(SOURCE, {"u": "host", "f": "{{c}}"})
    assert "u" in templates
    assert "f" in templates
    assert "c" not in templates


# --- the fast path gives exactly what jinja gives ------------------------------------------

PLAIN = {
    "u": "s3://bucket/path",
    "v": "{v}",
    "w": "",
    "true": "T",
    "self": "S",
    "if": "I",
    "not": "N",
    "range": "R",
    "loop": "L",
}
NAMES = [*PLAIN, "f", "missing", "i", "x_1"]

_literal = st.text(alphabet="ab/{}%#- \n\r\t\u00e9", max_size=6)
_placeholder = st.builds(
    lambda left, name, right: "{{" + left + name + right + "}}",
    st.sampled_from(["", " ", "\t", "\n", "-"]),
    st.sampled_from(NAMES),
    st.sampled_from(["", " ", "\n", "-"]),
)
_texts = st.lists(st.one_of(_literal, _placeholder), max_size=6).map("".join)
_values = st.one_of(
    st.integers(-5, 10**6), st.text(alphabet="xy{}", max_size=3), st.none(), st.booleans()
)


def _jinja(text: str, context: dict[str, object]) -> str | None:
    environment = SandboxedEnvironment(undefined=jinja2.StrictUndefined)
    try:
        return environment.from_string(text).render(context)
    except Exception:
        return None


@settings(max_examples=600, deadline=None)
@given(text=_texts, i=_values)
def test_fast_path_agrees_with_jinja(text: str, i: object) -> None:
    templates = Templates(SOURCE, {**PLAIN, "f": "{{c}}"})
    function = TemplateFunction("f", "{{c}}")
    for variables in (None, {"i": i, "x_1": "X"}):
        context: dict[str, object] = {**PLAIN, "f": function, **(variables or {})}
        expected = _jinja(text, context)
        if expected is None:
            with pytest.raises(ReferenceFormatError):
                templates.render("k", text, variables)
        else:
            assert templates.render("k", text, variables) == expected


@settings(max_examples=400, deadline=None)
@given(text=_texts, i=st.integers(0, 10**6))
def test_pieces_agree_with_rendering(text: str, i: int) -> None:
    # What a gen grid computes when asked is what rendering gives (jinja decides the rest).
    templates = Templates(SOURCE, {**PLAIN, "f": "{{c}}"})
    pieces = templates.pieces(text, ["x_1", "i"])
    if pieces is None:
        return
    values = ("X", i)
    computed = "".join(p if isinstance(p, str) else str(values[p]) for p in pieces)
    assert computed == templates.render("k", text, {"x_1": "X", "i": i})
    expected = _jinja(text, {**PLAIN, "x_1": "X", "i": i})
    assert computed == expected


def test_pieces_fold_plain_templates_and_number_the_variables() -> None:
    templates = Templates(SOURCE, {"p": "pre", "f": "{{c}}"})
    assert templates.pieces("{{p}}/{{i}}.{{ j }}", ["i", "j"]) == ("pre/", 0, ".", 1)
    assert templates.pieces("{{j}}{{i}}", ["i", "j"]) == (1, 0)
    assert templates.pieces("{{p}}", ["i"]) == ("pre",)
    assert templates.pieces("{{ i + 1 }}", ["i"]) is None
    assert templates.pieces("{{f}}", ["i"]) is None  # a template function
    assert templates.pieces("{{nowhere}}", ["i"]) is None  # undefined: rendering says so


def test_the_clock_of_one_rendering_does_not_outlive_it(monkeypatch: pytest.MonkeyPatch) -> None:
    render({}, "{% for i in range(3) %}{{ i }}{% endfor %}")
    later = time.monotonic() + 3600
    monkeypatch.setattr(time, "monotonic", lambda: later)  # (what templates reads)
    assert TemplateFunction("f", "{% for i in range(2) %}{{ x }}{% endfor %}")(x="a") == "aa"
