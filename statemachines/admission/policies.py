"""Lifecycle-policy validation (`validatePolicies`), used for job and task policy lists.

Per list, stopping at the first error:

1. event(s) and exitCode both set -> `must not specify event and exitCode simultaneously`;
2. neither -> `either event and exitCode should be specified`;
3. event policies: `events` then `event`, de-duplicated; per event: not an
   allowed event -> `<path>: Invalid value: "<e>": invalid policy event`; else
   the action not allowed -> `<path>: Invalid value: "<a>": invalid policy
   action`; else seen in an earlier policy -> `duplicate event <e>  across
   different policy` (two spaces, as upstream);
4. exitCode policies: 0 -> `0 is not a valid error code`; repeated ->
   `duplicate exitCode <n>` (the action is not checked);
5. after the loop, even after a stop: `*` together with another event ->
   `if there's * here, no other policy should be here`.

The errors are formatted like hashicorp/go-multierror. The allowed lists are
printed in the order of `VALID_EVENTS` / `VALID_ACTIONS` (upstream's Go map
order is random).
"""

from __future__ import annotations

from typing import Any

from statemachines.admission.fields import go_slice, invalid

VALID_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
VALID_ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)


def multierror(errors: list[str]) -> str:
    """hashicorp/go-multierror's default format."""
    if len(errors) == 1:
        return f"1 error occurred:\n\t* {errors[0]}\n\n"
    points = "\n\t".join(f"* {err}" for err in errors)
    return f"{len(errors)} errors occurred:\n\t{points}\n\n"


def event_list(policy: dict[str, Any]) -> list[str]:
    """`events` then `event`, first occurrence kept."""
    events = list(policy.get("events") or [])
    if policy.get("event"):
        events.append(policy["event"])
    unique: list[str] = []
    for event in events:
        if event not in unique:
            unique.append(event)
    return unique


def policy_errors(policies: list[dict[str, Any]] | None, path: str) -> list[str]:
    """The error texts of one policy list (empty when valid)."""
    errors: list[str] = []
    seen_events: list[str] = []
    seen_codes: set[int] = set()
    for policy in policies or []:
        has_events = bool(policy.get("event")) or bool(policy.get("events"))
        exit_code = policy.get("exitCode")
        if has_events and exit_code is not None:
            errors.append("must not specify event and exitCode simultaneously")
            break
        if not has_events and exit_code is None:
            errors.append("either event and exitCode should be specified")
            break
        if has_events:
            stop = False
            for event in event_list(policy):
                if event not in VALID_EVENTS:
                    errors.append(str(invalid(path, event, "invalid policy event")))
                    stop = True
                    break
                action = policy.get("action") or ""
                if action not in VALID_ACTIONS:
                    errors.append(str(invalid(path, action, "invalid policy action")))
                    stop = True
                    break
                if event in seen_events:
                    errors.append(f"duplicate event {event}  across different policy")
                    stop = True
                    break
                seen_events.append(event)
            if stop:
                break
        elif exit_code is not None:  # always, here: without events and exitCode the loop broke above
            code = int(exit_code)
            if code == 0:
                errors.append("0 is not a valid error code")
                break
            if code in seen_codes:
                errors.append(f"duplicate exitCode {code}")
                break
            seen_codes.add(code)
    if "*" in seen_events and len(seen_events) > 1:
        errors.append("if there's * here, no other policy should be here")
    return errors


def validate_policies(policies: list[dict[str, Any]] | None, path: str) -> str:
    """The webhook fragment for one list: the multierror text plus the valid lists, or ``""``."""
    errors = policy_errors(policies, path)
    if not errors:
        return ""
    return (
        multierror(errors)
        + f" valid events are {go_slice(VALID_EVENTS)}, valid actions are {go_slice(VALID_ACTIONS)};"
    )
