"""Lifecycle-policy validation (validate/util.go validatePolicies): event, exitCode and action rules."""

from __future__ import annotations

import pytest

from statemachines.admission.policies import multierror, policy_errors

P = "spec.policies"

CASES = [
    ("event_and_exit_code_together", [{"event": "PodFailed", "exitCode": 1, "action": "RestartJob"}],
     ["must not specify event and exitCode simultaneously"]),
    ("events_and_exit_code_together", [{"events": ["PodFailed"], "exitCode": 1}], ["must not specify event and exitCode simultaneously"]),
    ("neither_event_nor_exit_code", [{"action": "RestartJob"}], ["either event and exitCode should be specified"]),
    ("internal_event_rejected", [{"event": "OutOfSync", "action": "RestartJob"}], ['spec.policies: Invalid value: "OutOfSync": invalid policy event']),
    ("unknown_event_rejected", [{"event": "Nope", "action": "RestartJob"}], ['spec.policies: Invalid value: "Nope": invalid policy event']),
    ("empty_action_rejected", [{"event": "PodFailed"}], ['spec.policies: Invalid value: "": invalid policy action']),
    ("internal_action_rejected", [{"event": "PodFailed", "action": "EnqueueJob"}], ['spec.policies: Invalid value: "EnqueueJob": invalid policy action']),
    ("duplicate_event_across_policies_two_spaces", [{"event": "PodFailed", "action": "RestartJob"}, {"events": ["PodFailed"], "action": "AbortJob"}],
     ["duplicate event PodFailed  across different policy"]),
    ("duplicate_event_within_one_policy_is_deduplicated", [{"events": ["PodFailed", "PodFailed"], "event": "PodFailed", "action": "RestartJob"}], []),
    ("exit_code_zero", [{"exitCode": 0, "action": "RestartJob"}], ["0 is not a valid error code"]),
    ("duplicate_exit_code", [{"exitCode": 1, "action": "RestartJob"}, {"exitCode": 1, "action": "AbortJob"}], ["duplicate exitCode 1"]),
    ("exit_code_action_not_validated", [{"exitCode": 3, "action": "Bogus"}], []),
    ("any_with_other_event", [{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
     ["if there's * here, no other policy should be here"]),
    ("any_check_runs_after_a_stop", [{"events": ["*", "PodFailed"], "action": "RestartJob"}, {"exitCode": 0}],
     ["0 is not a valid error code", "if there's * here, no other policy should be here"]),
    ("any_alone_with_exit_codes_is_fine", [{"event": "*", "action": "RestartJob"}, {"exitCode": 2, "action": "AbortJob"}], []),
    ("restart_partition_allowed", [{"event": "PodEvicted", "action": "RestartPartition"}], []),
    ("job_updated_allowed_timeout_not_checked", [{"event": "JobUpdated", "action": "ResumeJob", "timeout": "bogus"}], []),
]


@pytest.mark.parametrize(("policies", "errors"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_rule(policies, errors):
    assert policy_errors(policies, P) == errors


def test_first_error_stops_the_list():
    policies = [{"exitCode": 0}, {"event": "Nope", "action": "RestartJob"}]
    assert policy_errors(policies, P) == ["0 is not a valid error code"]


def test_multierror_formats():
    assert multierror(["a"]) == "1 error occurred:\n\t* a\n\n"
    assert multierror(["a", "b"]) == "2 errors occurred:\n\t* a\n\t* b\n\n"
