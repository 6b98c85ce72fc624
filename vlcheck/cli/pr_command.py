"""`vlcheck pr`: what a pull-request workflow runs (the templates it copies, the pins of each end,
the comment and job summary it posts)."""

from __future__ import annotations

import sys
from importlib import resources

TEMPLATES = {"action": "action.yml", "workflow": "workflow.yml", "gitlab": "gitlab-ci.yml"}
EXIT_CODES = {
    "template": [(0, "ok", "the template printed")],
    "pins": [(0, "ok", "the pins printed, one `PREFIX_NAME=VERSION` line each"),
             (2, "bad input", "the file cannot be read or pins no vllm==X (the message names it)")],
    "comment": [(0, "ok", "the comment (and the summary) written")],
}


def template_text(name: str) -> str:
    return resources.files("vlcheck.pr_gate").joinpath("templates", TEMPLATES[name]).read_text(encoding="utf-8")


def cmd_template(args) -> int:
    print(template_text(args.name), end="")
    return 0


def cmd_pins(args) -> int:
    from vlcheck.pr_gate.pins import NoPin, as_outputs, read_pins

    try:
        print(as_outputs(read_pins(args.file), args.prefix), end="")
    except (OSError, NoPin) as err:
        print(f"vlcheck pr pins: {err}", file=sys.stderr)
        return 2
    return 0


def cmd_comment(args) -> int:
    from vlcheck.pr_gate import comment

    with open(args.output, "w", encoding="utf-8") as out:
        out.write(comment.body(args.diff_json, args.diff_markdown, args.reports_url))
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as out:
            out.write(comment.summary(args.diff_json))
    return 0


def register(sub) -> None:
    from vlcheck.cli.command_group import add_group

    actions = add_group(sub, "pr", "the gate on a pull request: the workflow to copy, and what its steps run "
                                   "(docs/pull-requests.md)",
                        "The gate where an upgrade is decided: a GitHub Actions workflow and action (or a GitLab job) "
                        "that run `vlcheck check` on both ends of a pull request that changes the pins, `vlcheck "
                        "diff`, and post the verdict as one comment updated in place.")
    q = actions.add_parser("template", help="print a template to copy: the GitHub workflow, its action, or a GitLab job")
    q.add_argument("name", choices=list(TEMPLATES), help="workflow: .github/workflows/vlcheck.yml; action: "
                                                         ".github/actions/vlcheck-gate/action.yml; gitlab: a job")
    q.set_defaults(func=cmd_template)
    q = actions.add_parser("pins", help="the vllm / transformers / torch versions a requirements file pins, as "
                                        "PREFIX_NAME=VERSION lines ($GITHUB_OUTPUT, a shell's eval)")
    q.add_argument("file", help="a requirements or constraints file (name==version lines)")
    q.add_argument("--prefix", default="pinned", help="the lines' prefix, e.g. baseline or candidate (default: %(default)s)")
    q.set_defaults(func=cmd_pins)
    q = actions.add_parser("comment", help="the pull-request comment (and job summary) of a `vlcheck diff --json "
                                           "--markdown` pair: a marker to find it again, the verdict, the diff")
    q.add_argument("diff_json", metavar="DIFF_JSON", help="`vlcheck diff --json`'s file")
    q.add_argument("diff_markdown", metavar="DIFF_MARKDOWN", help="`vlcheck diff --markdown`'s file")
    q.add_argument("--output", metavar="FILE", required=True, help="write the comment's body here")
    q.add_argument("--summary", metavar="FILE", help="append the verdict table here (GitHub: $GITHUB_STEP_SUMMARY)")
    q.add_argument("--reports-url", metavar="URL", help="where the full reports are (the run's page)")
    q.set_defaults(func=cmd_comment)
