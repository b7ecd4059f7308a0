"""Entry point of the `vcbus` command.

Each command family lives in its own module of this package and exposes
`register(group)`; `COMMAND_MODULES` lists them. Errors derived from
`vcbus.errors.UserError` become `error: <message>` on stderr and the error's
exit code, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from vcbus import exitcodes
from vcbus.errors import UserError

COMMAND_MODULES = [
    "vcbus.cli.replay",
    "vcbus.cli.record",
    "vcbus.cli.render",
    "vcbus.cli.validate",
    "vcbus.cli.webhook",
    "vcbus.cli.up",
    "vcbus.cli.scheduler",
    "vcbus.cli.publish",
    "vcbus.cli.status",
    "vcbus.cli.events",
    "vcbus.cli.log",
    "vcbus.cli.projections",
    "vcbus.cli.divergences",
    "vcbus.cli.demo",
    "vcbus.cli.schedule",
    "vcbus.cli.why_pending",
    "vcbus.cli.poison",
    "vcbus.cli.bus",
    "vcbus.cli.job",
    "vcbus.cli.queue",
    "vcbus.cli.completion",
]


def _log_format(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`vcbus --log-format json COMMAND`: the default of every command's logs (vcbus.observability.logging)."""
    if value:
        import os

        os.environ["VCBUS_LOG_FORMAT"] = value
    return value


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vcbus")
@click.option("--log-format", type=click.Choice(["text", "json"]), expose_value=False, callback=_log_format,
              is_eager=True, help="Log lines as text or JSON objects (every command; default $VCBUS_LOG_FORMAT or text).")
def cli() -> None:
    """vcbus: Volcano Job (vcjob) semantics as an event-sourced state machine on NATS JetStream.

    \b
    Debug a job's history offline:
      vcbus record -A -o watch.log          # Ctrl-C to stop
      vcbus replay watch.log --job default/my-job --explain
    See the whole bus work on embedded defaults:
      vcbus demo
    Check and preview a vcjob before applying it:
      vcbus validate job.yaml && vcbus render job.yaml
    Run the controller on a cluster (or beside Volcano, --observe-only):
      vcbus up --kubeconfig ~/.kube/config

    Run `vcbus COMMAND --help` for the details of each command.
    """


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="vcbus", standalone_mode=False)
    except UserError as err:
        click.echo(f"error: {err}", err=True)
        return err.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return exitcodes.INTERRUPTED
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return exitcodes.INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
