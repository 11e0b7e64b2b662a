"""Driving the `inspo` command line in tests, as users and CI scripts do: `invoke` runs it in-process (Typer's
CliRunner, stdout and stderr apart), `assert_one_line_error` checks the promise every bad input keeps: exit code 2,
one `error: ...` line on stderr, no traceback."""

from __future__ import annotations

from typer.testing import CliRunner

from inspo_cli.cli import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
