"""The documentation site (mkdocs.yml, docs/) builds strictly, its generated pages cover the code, and every
``/docs/`` link of the service's templates names a page that the build made."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .build import build_site

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "src" / "unpooled" / "service"
pytestmark = pytest.mark.xdist_group("docs-site")  # one build per test process


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return build_site(tmp_path_factory.mktemp("docs-site"))


def page_file(site: Path, url: str) -> Path:
    path = url.split("#", 1)[0].split("?", 1)[0][len("/docs/"):]
    target = site / path
    return target / "index.html" if path == "" or path.endswith("/") else target


def test_site_builds_strictly_with_every_page(site):
    for page in ("index.html", "getting-started/submitters/index.html", "getting-started/annotators/index.html",
                 "getting-started/organisers/index.html", "method/index.html", "method/regimes/index.html",
                 "formats/submissions/index.html", "diagnostics/index.html", "reference/cli/index.html",
                 "reference/api/index.html", "deployment/index.html", "scaling/index.html", "security/index.html"):
        assert (site / page).is_file(), page


def test_formulas_are_mathml_not_script(site):
    method = (site / "method" / "index.html").read_text(encoding="utf-8")
    assert method.count("<math") > 10
    assert "arithmatex" not in method, "every formula was converted to MathML when the site was built"


def test_cli_page_has_every_command(site):
    from unpooled.cli.main import build_parser

    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, parser in sub.choices.items():
        assert f'id="unpooled-{name}"' in page, name
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in page, (name, option)


@pytest.mark.engine_neutral
@pytest.mark.django_db
def test_api_page_has_every_served_endpoint(site, client):
    schema = client.get("/api/openapi.json").json()
    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for path, item in schema["paths"].items():
        for method in item:
            assert f"{method.upper()} {path}" in page, (method, path)
    for name in schema["components"]["schemas"]:
        assert f'id="schema-{name.lower()}"' in page, name


def template_docs_links() -> dict[str, set[str]]:
    links: dict[str, set[str]] = {}
    for path in TEMPLATES.rglob("templates/**/*.html"):
        for url in re.findall(r'href="(/docs/[^"]*)"', path.read_text(encoding="utf-8")):
            links.setdefault(url, set()).add(str(path.relative_to(ROOT)))
    return links


def test_every_docs_link_of_the_templates_is_a_built_page(site):
    links = template_docs_links()
    assert "/docs/method/" in links, "the About page links the method page"
    missing = {url: sorted(where) for url, where in links.items() if not page_file(site, url).is_file()}
    assert not missing, f"/docs/ links to pages the site does not have: {missing}"
    for url in links:
        if "#" in url:
            anchor = url.split("#", 1)[1]
            assert f'id="{anchor}"' in page_file(site, url).read_text(encoding="utf-8"), url


def test_readme_links_exist():
    """The README is short and points into docs/: each relative link names a file of the repository."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 160
    first_block = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert readme.index("```sh") < readme.index("\n\n", readme.index("# unpooled")) + 3, "the commands come first"
    assert [ln.split()[:2] for ln in first_block] == [["./dev", "up"], ["./dev", "test"]]
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme):
        assert (ROOT / target).exists(), target


def test_every_variable_the_code_reads_is_on_the_settings_page():
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    sources = [p for p in (ROOT / "src" / "unpooled").rglob("*.py")] + [ROOT / "dev"]
    names = {n for p in sources for n in re.findall(r"\bUNPOOLED_[A-Z0-9_]*[A-Z0-9]\b", p.read_text(encoding="utf-8"))}
    assert len(names) > 30
    missing = sorted(n for n in names if n not in page)
    assert not missing, f"on docs/reference/settings.md: {missing}"


def page_text(site: Path, path: str) -> str:
    """The words of a built page, tags stripped and white space collapsed."""
    html = (site / path / "index.html").read_text(encoding="utf-8")
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_submitters_page_describes_the_status_page_as_it_is(site):
    """The status page's counts and states (issue 25 #6, #5) as the docs say them: the label origins in parts that
    add up, a time left unknown while nobody works the queue, draws with replacement, the provisional state; and
    the error analysis's box on where its labels come from."""
    from unpooled.service.evaluations.status import IDLE_MINUTES, LEVEL_STATE_LABELS

    text = page_text(site, "getting-started/submitters")
    for part in ("new (items this submission asked for", "reused (labelled already", "joined (an open item",
                 "not asked (over the budget", "parts that add up"):
        assert part in text, part
    assert "It is unknown when nobody of the corpus's backend works its queue" in text
    assert f"in the last {IDLE_MINUTES} minutes" in text
    assert "with replacement" in text and LEVEL_STATE_LABELS["provisional"] in text
    assert "Where these labels come from" in text


def test_the_annotators_page_gives_the_clustering_keys_of_the_task(site):
    """The clustering task's keys (issue 25 #8) as its instructions give them: the cursor stays on the line, Enter
    reviews, Enter again sends, Esc goes back, a draft is kept in the browser."""
    from unpooled.service.annotation.guidelines import INSTRUCTIONS

    rules = " ".join(INSTRUCTIONS["clusters"]["rules"])
    assert "the cursor stays on the line" in rules and "Esc goes back" in rules
    text = page_text(site, "getting-started/annotators")
    for said in ("leaves the cursor on its line", "Enter shows the groups for review", "Enter again sends them",
                 "Esc goes back to editing", "kept as a draft in this browser",
                 "Every task page (verify, entities, relations, clustering) keeps a draft", "can no longer be undone"):
        assert said in text, said
