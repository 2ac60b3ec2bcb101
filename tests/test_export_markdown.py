"""The exported page shows a message's markdown as a reader expects it, and no message
text can put markup or script into the page."""

from __future__ import annotations

from tempi.cli.export_markdown import render_markdown


def test_emphasis_code_and_headings_render() -> None:
    html = render_markdown("## Plan\n\nThe script prints **hello**, *plainly*, with `echo` and ~~sed~~.")
    assert "<h2>Plan</h2>" in html
    assert "<strong>hello</strong>" in html
    assert "<em>plainly</em>" in html
    assert "<code>echo</code>" in html
    assert "<del>sed</del>" in html


def test_fenced_code_keeps_its_text_and_language() -> None:
    html = render_markdown("Run:\n\n```sh\nprintf '**not bold** <b>'\n\n  indented\n```\nafter")
    assert (
        '<pre><code class="language-sh">printf &#x27;**not bold** &lt;b&gt;&#x27;\n\n  indented</code></pre>'
        in html
    )
    assert "<p>after</p>" in html


def test_lists_nest_and_number() -> None:
    html = render_markdown("- one\n- two\n  - inner\n\n3. third\n4. fourth")
    assert html.startswith("<ul><li>one</li><li>two<ul><li>inner</li></ul></li></ul>")
    assert '<ol start="3"><li>third</li><li>fourth</li></ol>' in html


def test_tables_quotes_and_rules() -> None:
    html = render_markdown("| colour | code |\n|---|---:|\n| green | 32 |\n\n> quoted **text**\n\n---")
    assert '<table><thead><tr><th>colour</th><th style="text-align:right">code</th></tr></thead>' in html
    assert '<td style="text-align:right">32</td>' in html
    assert "<blockquote><p>quoted <strong>text</strong></p></blockquote>" in html
    assert html.endswith("<hr>")


def test_line_breaks_inside_a_paragraph_are_kept() -> None:
    # Models write one item per line without list markers; joining them would garble it.
    assert render_markdown("first line\nsecond line") == "<p>first line<br>\nsecond line</p>"


def test_message_text_cannot_inject_markup() -> None:
    hostile = (
        "<script>alert(1)</script> <img src=x onerror=alert(2)> "
        '[click](javascript:alert(3)) [ok](https://example.com/?a=1&b="2") `</code><script>`'
    )
    html = render_markdown(hostile)
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # A javascript: link stays text; a web link becomes a link with its quote escaped.
    assert 'href="javascript' not in html
    assert "[click](javascript:alert(3))" in html
    assert '<a href="https://example.com/?a=1&amp;b=&quot;2&quot;" rel="noopener noreferrer">ok</a>' in html
    assert "<code>&lt;/code&gt;&lt;script&gt;</code>" in html
