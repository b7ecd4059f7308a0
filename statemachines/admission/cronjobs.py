"""Volcano's CronJob validating webhook: `pkg/webhooks/admission/cronjobs/validate/admit_cronjob.go`.

CREATE and UPDATE run the same checks (validateCronJob): the spec's, then the name's, each
message trimmed and the two joined with `; `. The spec's messages are Volcano's, run together
as its code concatenates them: an empty schedule; a schedule that mentions `TZ` (the zone
belongs in `timeZone`); one robfig's ParseStandard refuses; an empty `timeZone`; a zone part
that is `.`, `..`, starts with `-` or is not 1-14 of `A-Za-z.-_0-9+` (once per part); `Local`
(any case); a zone Go's LoadLocation cannot load. The name: at most 52 characters (the job
name suffix needs 11 of 63), and a qualified name. Zones come as data, resolved by the caller
(statemachines/cronjobs/zones.py), so this stays pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from statemachines.admission.fields import is_qualified_name
from statemachines.cronjobs.schedule import ScheduleError, load_location, parse_standard
from statemachines.cronjobs.zones import Zone

_ZONE_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")
MAX_TOTAL_LENGTH = 63
MAX_SUFFIX_LENGTH = 11
MAX_BASE_NAME_LENGTH = MAX_TOTAL_LENGTH - MAX_SUFFIX_LENGTH


def validate_spec(spec: Mapping[str, Any], zones: Mapping[str, Zone]) -> str:
    """validateCronjobSpec's message ("" if the spec is fine)."""
    msg = ""
    schedule = spec.get("schedule") or ""
    if not schedule:
        msg += " schedule is required, but got empty"
    elif "TZ" in schedule:
        msg += " schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"
    else:
        try:
            parse_standard(schedule)
        except ScheduleError:
            msg += "schedule is not a valid cron expression"
    zone = spec.get("timeZone")
    if zone is not None:
        if not zone:
            msg += " timeZone must be nil or non-empty string, got empty string"
        else:
            for part in zone.split("/"):
                if part in (".", "..") or part.startswith("-") or not _ZONE_PART.fullmatch(part):
                    msg += " unknown timeZone"
            if zone.lower() == "local":
                msg += " timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"
            else:
                try:
                    load_location(zone, zones)
                except ScheduleError:
                    msg += " invalid timeZone"
    return msg


def validate_name(name: str) -> str:
    """validateCronJobName's message ("" if the name is fine)."""
    if len(name) > MAX_BASE_NAME_LENGTH:
        return (f"cronJob name must be no more than {MAX_BASE_NAME_LENGTH} characters to accommodate job name "
                f"suffix (max {MAX_TOTAL_LENGTH} total)")
    errs = is_qualified_name(name)
    if errs:
        return f'invalid cronJob name "{name}": ' + "; ".join(errs)
    return ""


def validate_cronjob(cronjob: Mapping[str, Any], zones: Mapping[str, Zone]) -> str:
    """validateCronJob: "" when admitted, else the denial's message (CREATE and UPDATE alike)."""
    meta = cronjob.get("metadata") or {}
    errs = [m for m in (validate_spec(cronjob.get("spec") or {}, zones).strip(),
                        validate_name(str(meta.get("name") or "")).strip()) if m]
    return "; ".join(errs)
