"""API server failures that explain themselves: denied, unreachable, refused for good.

Three kinds of failure, three answers:

- **denied** (401 Unauthorized, and a 403 Forbidden of RBAC: the API server's
  message says `User "..." cannot <verb> resource "<resource>" in API group
  "<group>"`, or names no reason at all): retrying cannot help, so the
  component stops with `PermissionDenied`, whose message names the verb and the
  resource the API server refused and what to grant.
- **unreachable** (connection refused or reset, a timeout, 5xx, 429): retried
  with jittered exponential backoff (`vcbus.retries.API`, tenacity's waits), each retry
  logged with how long until the next try (`unreachable_retry`).
- **refused for good** (any other 4xx but 409 Conflict: 400, 404 of a
  namespace gone, 422 Invalid, a webhook's denial, and a 403 of admission: a
  ResourceQuota exceeded, a PodSecurity violation, a webhook answering 403):
  `refused()` says so; the actuator records the command as refused (a REFUSED
  record on the bus, a Warning Event on the job) and goes on with the next
  command. The object was refused, vcbus's role is not short of a verb.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import tenacity
import urllib3.exceptions

from vcbus import exitcodes, retries
from vcbus.errors import UserError
from vcbus.observability import metrics as m

log = logging.getLogger("vcbus.k8s")

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_CANNOT = re.compile(r'cannot (\w+) resource "([^"]+)"(?: in API group "([^"]*)")?(?: in the namespace "([^"]+)")?')
# RBAC's own 403: `<resource> is forbidden: User "<name>" cannot <verb> resource "<resource>" ...`
# (`cannot <verb> path "<url>"` for a non-resource URL); an admission plugin's 403 says
# `<kind> "<name>" is forbidden: exceeded quota: ...` or `...: violates PodSecurity "restricted:latest": ...`
_RBAC = re.compile(r'\bcannot \w+ (?:resource|path) "|\b(?:User|Group|ServiceAccount) "[^"]*" cannot \w+')
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "GET": "get"}


class PermissionDenied(UserError):
    """The API server refused our credentials (401) or a verb on a resource (403): stop, do not retry."""

    exit_code = exitcodes.CLUSTER


def status_of(err: BaseException) -> int:
    return int(getattr(err, "status", 0) or 0)


def _status_body(err: BaseException) -> dict | None:
    body = getattr(err, "body", None)
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    return body if isinstance(body, dict) else None


def status_reason(err: BaseException) -> str:
    """The Status `reason` of the API server's answer (Forbidden, Invalid, AlreadyExists...), or ""."""
    body = _status_body(err)
    return str(body.get("reason") or "") if body is not None else ""


def _message(err: BaseException) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return str(body)[:300]
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or "")
    return str(getattr(err, "reason", "") or err)


def denied(err: BaseException) -> bool:
    """401, or a 403 that is RBAC's (or says nothing): our credentials or role, not the object."""
    status = status_of(err)
    return status == 401 or (status == 403 and not admission_refusal(err))


def admission_refusal(err: BaseException) -> bool:
    """A 403 Forbidden about the object, not about vcbus's role: an admission plugin's answer (a
    ResourceQuota exceeded, a PodSecurity violation, a webhook's 403), whose message is not RBAC's
    `User "..." cannot <verb> resource ...`. A 403 with no message is taken for RBAC's."""
    if status_of(err) != 403:
        return False
    body = _status_body(err)
    text = str(body.get("message") or "") if body is not None else ""
    return bool(text) and _RBAC.search(text) is None


def refused(err: BaseException) -> bool:
    """A final answer: a 4xx other than 409 Conflict and the transient ones (408, 429), and not 401 or
    RBAC's 403 (`denied`): an admission plugin's 403 is a refusal of the object."""
    status = status_of(err)
    return 400 <= status < 500 and status != 409 and status not in TRANSIENT_STATUSES and not denied(err)


def transient(err: BaseException) -> bool:
    """Worth retrying: the server is away (connection errors, timeouts) or said so (5xx, 429, 408)."""
    if isinstance(err, (OSError, urllib3.exceptions.HTTPError, TimeoutError)) and not status_of(err):
        return True
    return status_of(err) in TRANSIENT_STATUSES


def permission_denied(err: BaseException, *, component: str, doing: str = "", method: str = "") -> PermissionDenied:
    """The one-line stop message of a 401/403: who, which verb on which resource, what to grant."""
    text = _message(err)
    found = _CANNOT.search(text)
    if status_of(err) == 401:
        return PermissionDenied(
            f"{component}: the API server rejected the credentials (401 Unauthorized) while {doing or 'calling it'}; "
            "check the kubeconfig or the service account token"
        )
    if found:
        verb, resource, group, namespace = found.groups()
        where = f' in namespace "{namespace}"' if namespace else ""
        api = f'{resource}.{group}' if group else resource
        return PermissionDenied(
            f"{component}: permission denied: cannot {verb} {api}{where} (403 Forbidden: {text}); "
            f"grant verb {verb!r} on resource {resource!r} (apiGroup {group!r}) to vcbus's role (deploy/rbac)"
        )
    verb = _METHOD_VERBS.get(method.upper(), "use")
    return PermissionDenied(
        f"{component}: permission denied (403 Forbidden) while {doing or 'calling the API server'}: {text}; "
        f"grant verb {verb!r} on that resource to vcbus's role (deploy/rbac)"
    )


def refused_stop(err: BaseException, *, component: str, doing: str) -> UserError:
    """The one-line stop message of an answer refused for good where the component cannot go on without
    it (the leader Lease): what was refused, the API server's words, exit code 4."""
    reason = status_reason(err)
    return UserError(f"{component}: the API server refused {doing} ({status_of(err)}{' ' + reason if reason else ''}: "
                     f"{_message(err)})", exit_code=exitcodes.CLUSTER)


def unreachable_retry(component: str, *, initial: float = retries.API.initial, maximum: float = retries.API.maximum,
                      attempts: int | None = None, logger: logging.Logger | None = None) -> dict[str, Any]:
    """tenacity arguments: retry transient errors with `vcbus.retries`' jittered exponential waits, logging each.

    Use as `tenacity.Retrying(**unreachable_retry("actuator"))` or the Async variant.
    """
    logger = logger or log

    def before_sleep(state: tenacity.RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        m.API_RETRY_WAIT.labels(component).inc()
        what = "API server unreachable" if err is not None and transient(err) else "API call failed"
        logger.warning("%s: %s (%s); attempt %d failed, next try in %.1fs",
                       component, what, err or "error", state.attempt_number, wait)

    return {
        "retry": tenacity.retry_if_exception(transient),
        "wait": retries.Policy(initial, maximum).wait(),
        "stop": tenacity.stop_after_attempt(attempts) if attempts else tenacity.stop_never,
        "before_sleep": before_sleep,
        "reraise": True,
    }
