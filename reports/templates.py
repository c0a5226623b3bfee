"""The site's HTML from jinja2 templates (``reports/templates/``), autoescaped.

Every value a template receives is escaped unless it is ``Markup``: prose written here with its tags is
``Markup`` and takes data through ``Markup.format``, which escapes each argument; plotly's figures and rendered
templates are ``Markup`` too. So no page builder escapes by hand.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

ENVIRONMENT = Environment(
    loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,  # a name a template uses but is not given is an error, not an empty string
    keep_trailing_newline=True,
)


def render(template: str, **context: object) -> Markup:
    """``template`` rendered with ``context``, as markup to place in another template."""
    return Markup(ENVIRONMENT.get_template(template).render(**context))


def macro(name: str, *args: object, **kwargs: object) -> Markup:
    """One macro of ``macros.html`` (``table``, ``heading``, ``paragraph``) called with ``args``."""
    return Markup(getattr(ENVIRONMENT.get_template("macros.html").module, name)(*args, **kwargs))
