"""Build the static benchmark website from every asv result: the entry point of `make report`.

First ``asv publish`` writes asv's own site into ``reports/site/asv`` (asv's ``html_dir``), so the pages can
link to it for users who know asv; if it fails the site is built without the link. Then
``reports.site.build_site`` writes the pages (overview / which to ship, findings, trends, trade-off,
strategies, machines) into ``reports/site``. Open ``reports/site/index.html`` from disk or serve the folder
(GitHub Pages).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.trees import ROOT
from reports.site import build_site
from unfold_bench.common_args import add_config, command_parser, output_folder


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("report", __doc__)
    parser.add_argument("--results", default=str(ROOT / "results"), help="asv results directory (%(default)s)")
    parser.add_argument(
        "--out",
        type=output_folder,
        default=str(ROOT / "reports" / "site"),
        help="where to write the site (%(default)s)",
    )
    add_config(parser)
    parser.add_argument("--no-asv-publish", action="store_true", help="skip asv's own site")
    args = parser.parse_args(argv)
    if not any(Path(args.results).glob("*/machine.json")):  # before the site it would replace is touched
        parser.error(f"--results {args.results}: no asv results there (no <machine>/machine.json)")

    from asv.config import Config

    asv_results = Path(Config.load(args.config).results_dir).resolve()
    if not args.no_asv_publish and asv_results != Path(args.results).resolve():
        print(f"note: asv publish reads {asv_results}, not {args.results}: no asv site is built")
    elif not args.no_asv_publish:
        publish = [
            sys.executable,
            "-m",
            "asv",
            "--config",
            args.config,
            "publish",
            "--html-dir",
            str(Path(args.out) / "asv"),
        ]
        done = subprocess.run(publish, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"note: asv publish failed, the site is built without a link to it:\n{done.stderr[-2000:]}")
    pages = build_site(args.results, args.out)
    print(f"Site: {pages[0].resolve()} ({len(pages)} pages; open it from disk or serve {Path(args.out).resolve()})")
    print(f"Findings (each claim and target judged from the newest results): {Path(args.out).resolve()}/findings.html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
