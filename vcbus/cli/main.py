"""Entry point of the `vcbus` command.

Each command family lives in its own module of this package and exposes
`register(group)`. `COMMANDS` names each top-level command's module and short
help; `LazyGroup` imports a module only when its command is run (or asked for
by `vcbus COMMAND --help`, or walked by `vcbus completion`), so `vcbus --help`,
`--version` and `validate` start without nats, aiohttp, kubernetes or the engine
(tests/test_cli_startup.py). Errors derived from `vcbus.errors.UserError` become
`error: <message>` on stderr and the error's exit code, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from vcbus import exitcodes
from vcbus.cli.examples import share_examples
from vcbus.errors import UserError

# name -> (module, short help). The short help is what `vcbus --help` lists without importing the module;
# it must equal the first sentence of the command's own help (tests/test_cli_startup.py checks every entry).
COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("vcbus.cli.replay",
               "Replay a log of Kubernetes watch events and show what vcbus decides, job by job."),
    "record": ("vcbus.cli.record",
               "Record the vcjobs, pods, podgroups, queues, commands and nodes of a cluster into one watch log."),
    "render": ("vcbus.cli.render",
               "Show every object a vcjob becomes: the job with its defaults, PodGroup, pods, plugin objects."),
    "validate": ("vcbus.cli.validate",
                 "Run Volcano's admission webhooks on vcjob and Queue manifests, without a cluster."),
    "webhook": ("vcbus.cli.webhook",
                "Serve the vcjob and Queue admission webhooks (mutate + validate) over HTTPS."),
    "up": ("vcbus.cli.up",
           "Run vcbus: the decider and the projector; with a cluster also the bridge, the scheduler and the actuator."),
    "scheduler": ("vcbus.cli.scheduler",
                  "Run the scheduler service: Volcano's scheduling sessions over the bus's log, decisions to the bus."),
    "publish": ("vcbus.cli.publish",
                "Publish a recorded watch log into the bus (stream VCBUS_K8S), for the decider to decide."),
    "status": ("vcbus.cli.status",
               "Show job statuses from the bus (the KV bucket vcbus_status), like kubectl get vcjob."),
    "events": ("vcbus.cli.events", "Domain events on the bus."),
    "log": ("vcbus.cli.log", "The bus's log (VCBUS_K8S) to and from JSON lines."),
    "projections": ("vcbus.cli.projections", "The projections (KV views) of the domain events."),
    "divergences": ("vcbus.cli.divergences",
                    "List every divergence between the status recorded on a vcjob and vcbus's decision."),
    "demo": ("vcbus.cli.demo", "Run the whole bus once on embedded defaults and show what it decided."),
    "schedule": ("vcbus.cli.schedule",
                 "Run Volcano scheduling sessions over a snapshot of a cluster, offline, and show the decisions."),
    "why-pending": ("vcbus.cli.why_pending",
                    "Say why a job is not running: its queue, its gang, and why each pending pod fits no node."),
    "poison": ("vcbus.cli.poison", "Records the bus services set aside (record.poison events), and retrying them."),
    "bus": ("vcbus.cli.bus", "The bus's layout: VCBUS_K8S's partitions (one decider each) and repartitioning."),
    "job": ("vcbus.cli.job",
            "Run, list, inspect, suspend, resume and delete vcjobs on a cluster (Volcano's vcctl job)."),
    "queue": ("vcbus.cli.queue",
              "List and inspect Volcano queues, and open or close them (Volcano's vcctl queue)."),
    "completion": ("vcbus.cli.completion", "Print a shell completion script for bash, zsh or fish."),
}


class LazyGroup(click.Group):
    """A group whose commands (`COMMANDS`) are imported when one is asked for, not when the group is built."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self._load(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def _load(self, name: str) -> click.Command:
        module = importlib.import_module(self.lazy[name][0])
        scratch = click.Group()
        module.register(scratch)  # the module adds its command to a group of its own; this one takes it
        try:
            cmd = scratch.commands[name]
        except KeyError:
            raise RuntimeError(f"{self.lazy[name][0]} registers {sorted(scratch.commands)}, not {name!r}") from None
        share_examples(cmd, f"vcbus {name}")  # a subcommand's --help shows its group's examples of it
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with each command not yet imported shortened from `COMMANDS`' short help."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name) or click.Command(name, help=self.lazy[name][1])
            if not cmd.hidden:
                rows.append((name, cmd))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


def _log_format(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`vcbus --log-format json COMMAND`: the default of every command's logs (vcbus.observability.logging)."""
    if value:
        import os

        os.environ["VCBUS_LOG_FORMAT"] = value
    return value


@click.group(cls=LazyGroup, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="vcbus", standalone_mode=False)
    except UserError as err:
        click.echo(f"error: {err}", err=True)
        return err.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return exitcodes.INTERRUPTED
    except click.exceptions.NoArgsIsHelpError as err:  # a bare group: its help, as before
        err.show()
        return err.exit_code
    except click.UsageError as err:  # one line, as kubectl's usage errors: what is wrong, and where help is
        where = err.ctx.command_path if err.ctx is not None else "vcbus"
        click.echo(f"error: {err.format_message()} (see '{where} --help')", err=True)
        return err.exit_code
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
