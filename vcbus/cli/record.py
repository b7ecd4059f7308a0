"""`vcbus record`: a watch log of every kind vcbus reads, in one file, in the order etcd wrote it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import click

from statemachines.model.timefmt import parse_duration
from vcbus.errors import UserError

HELP = """Record the vcjobs, pods, podgroups, queues, commands and nodes of a cluster into one watch log.

\b
The log is what `vcbus replay` reads: every object as it is now (ADDED), then
every change (ADDED, MODIFIED, DELETED) as it happens, all kinds merged in
resourceVersion order (the order etcd wrote them; kubectl can only watch one
kind at a time). One JSON record per line, flushed as it is written.
Recording stops on Ctrl-C (exit code 0 once everything received is written)
or after --for DURATION. With a terminal on stderr, a live count of records
per kind is shown there.

\b
Examples:
  vcbus record -A -o watch.log                   # all namespaces, until Ctrl-C
  vcbus replay watch.log --job default/my-job --explain
  vcbus record -n team-a --for 30m -o team-a.log
  vcbus record --job default/my-job -o my-job.log   # its vcjob, pods, podgroup, commands
  vcbus record -A --kind vcjobs --kind pods -l app=train
  vcbus record -A | vcbus replay -               # record and follow live

\b
--selector applies to every kind (as kubectl -l does). --job NS/NAME records
that job's vcjob, its pods (label volcano.sh/job-name=NAME), its podgroup (owned
by the vcjob) and the Commands that target it.
Exit codes: 0 recorded (also when stopped by Ctrl-C or SIGTERM: everything
received is written); 2 bad options; 4 the cluster cannot be read (not
reachable, forbidden, a kind it does not serve), with one line saying which.
"""


def register(group: click.Group) -> None:
    group.add_command(record)


def _context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use: the context's, else "default"."""
    try:
        from kubernetes import config

        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        return ((chosen or {}).get("context") or {}).get("namespace") or "default"
    except Exception:  # no kubeconfig (in a pod): the default namespace
        return "default"


def _job_option(value: str) -> str:
    ns, sep, name = value.partition("/")
    if not sep:
        ns, name = "default", value
    if not ns or not name or "/" in name:
        raise UserError(f"--job {value!r}: expected NAMESPACE/NAME (or NAME in namespace default)")
    return f"{ns}/{name}"


class _Output:
    """Where records go: flushed one by one; a closed pipe (`| head`) ends the recording quietly."""

    def __init__(self, path: str | None, stop: threading.Event) -> None:
        self.path = None if path == "-" else path
        self.stop = stop
        self.closed = False
        self.fh = sys.stdout.buffer if self.path is None else None
        if self.path is not None:  # opened at the first record: a failed start leaves no empty log behind
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise UserError(f"-o {path}: no such directory {folder}")
            if os.path.isdir(self.path):
                raise UserError(f"-o {path}: is a directory")
            if not os.access(folder, os.W_OK) or (os.path.exists(self.path) and not os.access(self.path, os.W_OK)):
                raise UserError(f"-o {path}: permission denied")

    def _open(self):
        if self.fh is None and self.path is not None:  # no file yet: there is a path (else stdout)
            try:
                self.fh = open(self.path, "wb")  # closed by close()
            except OSError as err:
                raise UserError(f"-o {self.path}: {err.strerror}") from None
        return self.fh

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        fh = self._open()
        try:
            fh.write(data)
            fh.flush()
        except BrokenPipeError:
            self.closed = True
            self.stop.set()

    def close(self, *, complete: bool) -> None:
        if complete:
            self._open()  # an empty recording is still a log
        if self.fh is not None and self.fh is not sys.stdout.buffer:
            self.fh.close()


class _Counter:
    """The live count on stderr (a terminal only), redrawn at most 4 times a second."""

    def __init__(self, recorder, enabled: bool) -> None:
        self.recorder = recorder
        self.enabled = enabled
        self.shown = 0.0
        self.count = -1

    def tick(self) -> None:
        if not self.enabled or self.recorder.written == self.count:
            return
        now = time.monotonic()
        if now - self.shown < 0.25:
            return
        self.shown, self.count = now, self.recorder.written
        sys.stderr.write(f"\r\x1b[K{self.recorder.written} records: {_counts(self.recorder)}  (Ctrl-C to stop)")
        sys.stderr.flush()


def _counts(recorder) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in recorder.counts.items())


@click.command(help=HELP)
@click.option("--namespace", "-n", metavar="NS", help="Record this namespace (default: the context's, else default).")
@click.option("--all-namespaces", "-A", "all_namespaces", is_flag=True, help="Record every namespace.")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only these kinds (repeatable; vcjobs, pods, podgroups, queues, commands, nodes, priorityclasses, "
                   "namespaces, persistentvolumeclaims, persistentvolumes, storageclasses, csinodes, "
                   "volumeattachments, services, "
                   "replicationcontrollers, replicasets, statefulsets, daemonsets, batchjobs, cronjobs, jobflows, jobtemplates; "
                   "or "
                   "their kubectl "
                   "short names).")
@click.option("--selector", "-l", metavar="SELECTOR", help="A label selector, for every kind (e.g. app=train).")
@click.option("--job", "job", metavar="NS/NAME", help="Only this job's vcjob, pods, podgroup and commands.")
@click.option("--output", "-o", "output", metavar="FILE", help="Write the log here (default: standard output).")
@click.option("--for", "duration", metavar="DURATION", help="Stop after this long (e.g. 30s, 10m, 1h); default: Ctrl-C.")
@click.option("--kubeconfig", metavar="PATH", help="The cluster's kubeconfig (default: $KUBECONFIG, ~/.kube/config).")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")
def record(
    namespace: str | None,
    all_namespaces: bool,
    kinds: tuple[str, ...],
    selector: str | None,
    job: str | None,
    output: str | None,
    duration: str | None,
    kubeconfig: str | None,
    context: str | None,
) -> int:
    from vcbus.k8s.recording import DEFAULT_KINDS, JOB_KINDS, Recorder, Scope, resource_kind

    if namespace and all_namespaces:
        raise UserError("give --namespace or --all-namespaces (-A), not both")
    seconds = None
    if duration is not None:
        try:
            seconds = parse_duration(duration)
        except ValueError:
            raise UserError(f"--for {duration!r}: expected a duration such as 30s, 10m, 1h") from None
        if seconds <= 0:
            raise UserError("--for must be positive")
    names = tuple(dict.fromkeys(resource_kind(k).name for k in kinds)) or DEFAULT_KINDS
    job_key = None
    if job is not None:
        job_key = _job_option(job)
        if namespace or all_namespaces:
            raise UserError("--job NS/NAME names the namespace: leave out --namespace / -A")
        names = tuple(k for k in names if k in JOB_KINDS)
        if not names:
            raise UserError(f"--job records only {', '.join(JOB_KINDS)}; none of them is in --kind")
    if job_key is None and not all_namespaces and not namespace:
        namespace = _context_namespace(kubeconfig, context)
    scope = Scope(namespace=None if all_namespaces else namespace, selector=selector or None, job=job_key)

    from vcbus.k8s.cluster import api_client_for

    api = api_client_for(kubeconfig, context=context)
    stop = threading.Event()
    out = _Output(output, stop)
    warn = _quiet_watch_logs()
    recorder = Recorder(api, names, scope=scope, write=out.write, warn=warn)
    counter = _Counter(recorder, sys.stderr.isatty())
    where = f"job {job_key}" if job_key else "all namespaces" if scope.namespace is None else f"namespace {namespace}"
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    started = False
    try:
        recorder.snapshot()
        started = True
        recorder.start()
        click.echo(
            f"recording {', '.join(names)} in {where} from resourceVersion {recorder.revision} "
            f"({recorder.written} objects listed) to {output or 'standard output'}"
            + (f" for {duration}" if duration else "; Ctrl-C to stop"),
            err=True,
        )
        deadline = time.monotonic() + seconds if seconds is not None else None
        try:
            recorder.run(stop, deadline=deadline, on_tick=counter.tick)
        except KeyboardInterrupt:
            pass  # run() wrote everything it had before returning
    finally:
        signal.signal(signal.SIGTERM, previous)
        recorder.stop()
        out.close(complete=started)
    if counter.enabled:
        sys.stderr.write("\r\x1b[K")
    click.echo(f"recorded {recorder.written} records ({_counts(recorder)}) to {output or 'standard output'}", err=True)
    return 0


def _quiet_watch_logs():
    """Watch retries and relists as one `warning:` line on stderr each, not log records."""
    import logging

    def warn(message: str) -> None:
        click.echo(f"warning: {message}", err=True)

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warn(record.getMessage())

    for name in ("vcbus.k8s.watching", "vcbus.record"):
        logger = logging.getLogger(name)
        logger.handlers = [_Handler(logging.WARNING)]
        logger.propagate = False
    return warn
