"""`pcapstats report`: one self-contained HTML file, read the way people read it -- opened in
headless Chromium, which must load it without a console message, decode every figure and draw
a page that is not blank -- and taken apart here (every data URI a PNG, nothing fetched)."""
import base64
import io
import re
import shutil
import subprocess

import pytest
from tests.helpers.paths import CAPTURES

from pcapstats.cli import main

# every test reads the report of all the shipped captures (made once, ~15 s of CPU)
pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHIPPED = sorted(str(p) for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
IMAGE = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
CHECK = """<script>
window.addEventListener("load", () => {          // every image loaded by now: decoded?
  const images = [...document.images];
  const pre = document.createElement("pre");
  pre.textContent = `images ${images.length} decoded ${images.filter(
    i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100).length}`;
  document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "study.html"
    code = main(["report", *SHIPPED, "--by", "cc,loss", "-o", str(out)])
    assert code == 0
    return out


def _chromium(tmp_path, *args):
    if not shutil.os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (.ci/setup installs it)")
    profile = tmp_path / "profile"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120)


def test_the_file_holds_everything_it_shows(report):
    text = report.read_text()
    from PIL import Image
    images = IMAGE.findall(text)
    # two study figures, and an I/O graph for every capture, a cwnd figure for most
    assert len(images) >= 2 + len(SHIPPED) + 10
    for data in images:
        with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as im:
            im.load()
            assert im.format == "PNG" and im.width > 300 and im.height > 200
    outside = re.findall(r'(?:src|href)="(?!data:|#)([^"]*)"', text)
    assert not outside, f"the report refers to {outside[:3]}"
    assert "<script" not in text and "http://" not in text and "https://" not in text
    for name in ("avg_capture_bps", "peak_bps", "goodput_bps", "ci95_goodput_bps", "jain_index"):
        assert f"<code>{name}</code>" in text, f"{name} not defined"
    for path in SHIPPED:                         # a section a capture, linked from its row
        assert f"<h3>{path}</h3>" in text
    assert text.count('<section class="capture"') == len(SHIPPED)


def test_each_capture_shows_its_protocol_hierarchy(report):
    """A capture's section holds its protocol hierarchy: the rows `pcapstats hierarchy` gives,
    each protocol indented by its depth (kept by the page: white-space pre), with its packets."""
    import html
    import warnings

    import pcapstats as ps
    text = report.read_text()
    assert ".tree{text-align:left;white-space:pre}" in text
    for section in text.split('<section class="capture"')[1:]:
        path = html.unescape(re.search(r"<h3>(.*?)</h3>", section)[1])
        table = section.split("<h4>Protocols</h4>", 1)[1].split("</table>", 1)[0]
        rows = re.findall(r'<tr><td class="tree">(.*?)</td><td class="num">(\d+)</td>', table)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = ps.hierarchy(path).table()
        assert [(html.unescape(p), int(n)) for p, n in rows] == [
            ("  " * d + p, n) for d, p, n in zip(want["depth"], want["protocol"], want["packets"])]
        legend = section.split("<h4>Protocols</h4>", 1)[1].split('<p class="legend">')[1]
        says = "payload: TCP/UDP payload" in legend.split("</p>", 1)[0]
        assert says == ("payload" in list(want["protocol"])), path   # what payload is, if shown


def test_chromium_loads_it_without_a_console_message(report, tmp_path):
    run = _chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom",
                    report.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console[:5]
    assert "Study:" in run.stdout and "Definitions" in run.stdout


def test_chromium_decodes_every_image(report, tmp_path):
    checked = tmp_path / "checked.html"
    checked.write_text(report.read_text().replace("</body>", CHECK + "</body>"))
    run = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", checked.as_uri())
    found = re.search(r"images (\d+) decoded (\d+)", run.stdout)
    assert found, run.stderr[-2000:]
    total, decoded = map(int, found.groups())
    assert total == len(IMAGE.findall(report.read_text())) == decoded


def test_the_screenshot_is_a_page(report, tmp_path):
    shot = tmp_path / "page.png"
    run = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000",
                    report.as_uri())
    assert shot.exists(), run.stderr[-2000:]
    from PIL import Image
    with Image.open(shot) as im:
        rgb = im.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert rgb.size == (1280, 2000)
    assert len(colours) > 50, "the page is (nearly) blank"
    white = max(colours)[0] / (1280 * 2000)
    assert white < 0.95, f"{white:.0%} of the page is one colour"


def test_a_notebook_writes_the_same_report(report, tmp_path):
    """ps.report: the comparison of the command's report, the same sections and figures,
    returned as the Compare a notebook shows."""
    import pcapstats as ps
    out = tmp_path / "study.html"
    result = ps.report(SHIPPED, out, by="cc,loss")
    assert isinstance(result, ps.Compare) and sorted(result.captures) == SHIPPED
    made, cli = out.read_text(), report.read_text()
    assert re.findall(r"<h3>([^<]*)</h3>", made) == re.findall(r"<h3>([^<]*)</h3>", cli)
    assert len(IMAGE.findall(made)) == len(IMAGE.findall(cli))
