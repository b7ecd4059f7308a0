"""A CronJob's schedule: robfig/cron v3's `ParseStandard` and `Next`, and Volcano's run-time rules.

Volcano parses `spec.schedule` with `cron.ParseStandard` (github.com/robfig/cron/v3 v3.0.1,
parser.go, spec.go, constantdelay.go). What it accepts, exactly:

- five fields, minute hour day-of-month month day-of-week (exactly five: `expected
  exactly 5 fields, found 6: [...]`); each a comma list of `*` or `?`, `N`, `N-M`, with an
  optional `/step` (`N/step` is `N-max/step`); month and weekday names (`jan`, `mon`, any
  case); weekday 0-6 (7 is refused); `*` or `?` in day-of-month or day-of-week makes the
  day match both fields, otherwise either;
- the descriptors `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight`
  `@hourly` and `@every <Go duration>` (under a second counts as one second, fractions of
  a second are cut), spelled exactly so (`@daily ` with a trailing space is unrecognized);
- a `TZ=<zone> ` or `CRON_TZ=<zone> ` prefix naming the zone the fields are read in.

Error messages are robfig's. `Next` is robfig's field-by-field search in the schedule's
zone (wall-clock arithmetic as Go's `time.Date`/`AddDate`, its daylight-saving corrections
included), giving up after five years (the zero time, `ZERO`). Times are whole seconds
since the epoch: every time the domain reads is one (`statemachines.model.timefmt`).

Zones come as data (statemachines/cronjobs/zones.py). The volcano side, from
`pkg/controllers/cronjob/cronjob_controller_util.go`: `format_schedule` (a schedule that
mentions `TZ` is used as it is, with a warning; otherwise `spec.timeZone` becomes a `TZ=`
prefix), `most_recent_schedule_time` (missed runs, more than 100 missed, the starting
deadline, schedules less than a second apart), `next_schedule_time`, `next_due` (when
to look again: Volcano's `nextScheduleTimeDuration`, without its 100 ms of padding),
`job_name` and `scheduled_timestamp` (the job's `volcano.sh/cronjob-scheduled-timestamp`).

Where vcbus differs: a `TZ=` prefix without a space after the zone makes Go slice out of
bounds (a panic); here it is the error `provided bad location ...: no schedule after the
time zone`. `Local` is read as UTC.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Union

from msgspec import Struct

from statemachines.cronjobs.zones import UTC, Zone, civil_to_unix, offset_at
from statemachines.model.durations import DurationError, parse_go_duration

ZERO = -62135596800  # Go's zero time.Time, 0001-01-01T00:00:00Z, in seconds since the epoch
STAR = 1 << 63
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_SECOND_NS = 1_000_000_000
MAX_MISSED = 100


class ScheduleError(ValueError):
    """A schedule robfig/cron refuses, or one Volcano cannot run; the message is theirs."""


# ---------------------------------------------------------------------------- bounds


class _Bounds:
    __slots__ = ("min", "max", "names")

    def __init__(self, lo: int, hi: int, names: Mapping[str, int] | None = None) -> None:
        self.min, self.max, self.names = lo, hi, names


SECONDS = _Bounds(0, 59)
MINUTES = _Bounds(0, 59)
HOURS = _Bounds(0, 23)
DOM = _Bounds(1, 31)
MONTHS = _Bounds(1, 12, {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))})
DOW = _Bounds(0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))})


def _bits(lo: int, hi: int, step: int) -> int:
    bits = 0
    for i in range(lo, hi + 1, step):
        bits |= 1 << i
    return bits


def _all(r: _Bounds) -> int:
    return _bits(r.min, r.max, 1) | STAR


# ---------------------------------------------------------------------------- civil time


def _fields(zone: Zone, unix: int) -> tuple[int, int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second, weekday with Sunday 0) of `unix` in `zone`."""
    days, secs = divmod(unix + offset_at(zone, unix), 86400)
    d = _dt.date.fromordinal(_EPOCH_ORDINAL + days)
    return d.year, d.month, d.day, secs // 3600, secs % 3600 // 60, secs % 60, (d.weekday() + 1) % 7


def go_date(zone: Zone, year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    """Go's `time.Date(year, month, day, hour, minute, second, 0, zone)`, out-of-range fields normalized."""
    m = month - 1
    year += m // 12
    m %= 12
    days = _dt.date(year, m + 1, 1).toordinal() - _EPOCH_ORDINAL + day - 1
    return civil_to_unix(zone, days * 86400 + hour * 3600 + minute * 60 + second)


# ---------------------------------------------------------------------------- schedules


class SpecSchedule(Struct, frozen=True):
    """robfig's SpecSchedule: one bit per allowed value (STAR if the field was `*`/`?`)."""

    second: int
    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    zone: Zone = UTC

    def day_matches(self, day: int, weekday: int) -> bool:
        dom_match = (1 << day) & self.dom > 0
        dow_match = (1 << weekday) & self.dow > 0
        if self.dom & STAR or self.dow & STAR:
            return dom_match and dow_match
        return dom_match or dow_match

    def next(self, t: int) -> int:
        """The first activation after `t` (robfig's `Next`), or ZERO if none within five years."""
        if t <= ZERO or not (self.second & ~STAR and self.minute & ~STAR and self.hour & ~STAR):
            return ZERO  # an empty field never matches: robfig searches its five years and gives up
        zone = self.zone
        t += 1  # the earliest possible time: the upcoming second
        added = False
        year_limit = _fields(zone, t)[0] + 5
        while True:  # WRAP
            y, mo, d, h, mi, s, wd = _fields(zone, t)
            if y > year_limit:
                return ZERO
            wrapped = False
            while not (1 << mo) & self.month:
                if not added:
                    added = True
                    t = go_date(zone, y, mo, 1, 0, 0, 0)
                    y, mo, d, h, mi, s, wd = _fields(zone, t)
                t = go_date(zone, y, mo + 1, d, h, mi, s)  # AddDate(0, 1, 0)
                y, mo, d, h, mi, s, wd = _fields(zone, t)
                if mo == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self.day_matches(d, wd):
                if not added:
                    added = True
                    t = go_date(zone, y, mo, d, 0, 0, 0)
                    y, mo, d, h, mi, s, wd = _fields(zone, t)
                t = go_date(zone, y, mo, d + 1, h, mi, s)  # AddDate(0, 0, 1)
                h = _fields(zone, t)[3]
                if h != 0:  # midnight did not exist (daylight saving): robfig's correction
                    t += (24 - h) * 3600 if h > 12 else -h * 3600
                y, mo, d, h, mi, s, wd = _fields(zone, t)
                if d == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            for bits, i, step in ((self.hour, 3, 3600), (self.minute, 4, 60), (self.second, 5, 1)):
                f = _fields(zone, t)
                while not (1 << f[i]) & bits:
                    if not added:  # the hour's start (time.Date), or the minute's or second's (Truncate)
                        added = True
                        t = go_date(zone, f[0], f[1], f[2], f[3], 0, 0) if i == 3 else t - t % step
                    t += step
                    f = _fields(zone, t)
                    if f[i] == 0:
                        wrapped = True
                        break
                if wrapped:
                    break
            if wrapped:
                continue
            return t


class ConstantDelaySchedule(Struct, frozen=True):
    """`@every <duration>`: whole seconds, at least one."""

    delay: int  # seconds

    def next(self, t: int) -> int:
        return t + self.delay


Schedule = Union[SpecSchedule, ConstantDelaySchedule]


def every(duration_ns: int) -> ConstantDelaySchedule:
    """robfig's `Every`: under a second is a second; fractions of a second are cut."""
    if duration_ns < _SECOND_NS:
        duration_ns = _SECOND_NS
    return ConstantDelaySchedule(delay=(duration_ns - duration_ns % _SECOND_NS) // _SECOND_NS)


# ---------------------------------------------------------------------------- parsing


def _is_go_space(c: str) -> bool:
    """Go's unicode.IsSpace (Python's isspace also counts the separators U+001C..U+001F)."""
    return c.isspace() and c not in "\x1c\x1d\x1e\x1f"


def go_fields(text: str) -> list[str]:
    """Go's strings.Fields."""
    out: list[str] = []
    word: list[str] = []
    for c in text:
        if _is_go_space(c):
            if word:
                out.append("".join(word))
                word = []
        else:
            word.append(c)
    if word:
        out.append("".join(word))
    return out


def go_trim_space(text: str) -> str:
    i, j = 0, len(text)
    while i < j and _is_go_space(text[i]):
        i += 1
    while j > i and _is_go_space(text[j - 1]):
        j -= 1
    return text[i:j]


def _strconv_quote(text: str) -> str:
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\x{ord(c):02x}"))
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


def _atoi(expr: str) -> int:
    """Go's strconv.Atoi (base 10, an optional sign, int64)."""
    body = expr[1:] if expr[:1] in ("+", "-") else expr
    if not body or not all("0" <= c <= "9" for c in body):
        raise ScheduleError(f"strconv.Atoi: parsing {_strconv_quote(expr)}: invalid syntax")
    value = int(expr)
    if not -(1 << 63) <= value < (1 << 63):
        raise ScheduleError(f"strconv.Atoi: parsing {_strconv_quote(expr)}: value out of range")
    return value


def _must_parse_int(expr: str) -> int:
    try:
        num = _atoi(expr)
    except ScheduleError as err:
        raise ScheduleError(f"failed to parse int from {expr}: {err}") from None
    if num < 0:
        raise ScheduleError(f"negative number ({num}) not allowed: {expr}")
    return num


def _parse_int_or_name(expr: str, names: Mapping[str, int] | None) -> int:
    if names is not None:
        named = names.get(expr.lower())
        if named is not None:
            return named
    return _must_parse_int(expr)


def _get_range(expr: str, r: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = r.min, r.max, STAR
    else:
        start = _parse_int_or_name(low_and_high[0], r.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _parse_int_or_name(low_and_high[1], r.names)
        else:
            raise ScheduleError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _must_parse_int(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = r.max
        if step > 1:
            extra = 0
    else:
        raise ScheduleError(f"too many slashes: {expr}")
    if start < r.min:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({r.min}): {expr}")
    if end > r.max:
        raise ScheduleError(f"end of range ({end}) above maximum ({r.max}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ScheduleError(f"step of range should be a positive number: {expr}")
    return _bits(start, end, step) | extra


def _get_field(field: str, r: _Bounds) -> int:
    bits = 0
    for expr in field.split(","):
        if expr:  # strings.FieldsFunc drops the empty ones
            bits |= _get_range(expr, r)
    return bits


_DESCRIPTORS = {
    "@yearly": ("dom1", "month1"),
    "@annually": ("dom1", "month1"),
    "@monthly": ("dom1",),
    "@weekly": ("dow0",),
    "@daily": (),
    "@midnight": (),
    "@hourly": ("hours",),
}
_EVERY = "@every "


def _parse_descriptor(descriptor: str, zone: Zone) -> Schedule:
    shape = _DESCRIPTORS.get(descriptor)
    if shape is not None:
        return SpecSchedule(
            second=1 << SECONDS.min,
            minute=1 << MINUTES.min,
            hour=_all(HOURS) if "hours" in shape else 1 << HOURS.min,
            dom=1 << DOM.min if "dom1" in shape else _all(DOM),
            month=1 << MONTHS.min if "month1" in shape else _all(MONTHS),
            dow=1 << DOW.min if "dow0" in shape else _all(DOW),
            zone=zone,
        )
    if descriptor.startswith(_EVERY):
        try:
            duration = parse_go_duration(descriptor[len(_EVERY):])
        except DurationError as err:
            raise ScheduleError(f"failed to parse duration {descriptor}: {err}") from None
        return every(duration)
    raise ScheduleError(f"unrecognized descriptor: {descriptor}")


def load_location(name: str, zones: Mapping[str, Zone]) -> Zone:
    """Go's `time.LoadLocation` over the zones the record carries; ScheduleError with Go's text."""
    if name in ("", "UTC", "Local"):
        return UTC
    zone = zones.get(name)
    if zone is None:
        raise ScheduleError(f"unknown time zone {name}")
    if zone.error:
        raise ScheduleError(zone.error)
    return zone


def parse_standard(spec: str, zones: Mapping[str, Zone] | None = None) -> Schedule:
    """robfig's `cron.ParseStandard(spec)`; ScheduleError with robfig's message if refused."""
    if not spec:
        raise ScheduleError("empty spec string")
    zone = UTC
    if spec.startswith("TZ=") or spec.startswith("CRON_TZ="):
        i, eq = spec.find(" "), spec.find("=")
        if i < 0:
            raise ScheduleError(f"provided bad location {spec[eq + 1:]}: no schedule after the time zone")
        name = spec[eq + 1:i]
        try:
            zone = load_location(name, zones or {})
        except ScheduleError as err:
            raise ScheduleError(f"provided bad location {name}: {err}") from None
        spec = go_trim_space(spec[i:])
    if spec.startswith("@"):
        return _parse_descriptor(spec, zone)
    fields = go_fields(spec)
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return SpecSchedule(
        second=_get_field("0", SECONDS),
        minute=_get_field(fields[0], MINUTES),
        hour=_get_field(fields[1], HOURS),
        dom=_get_field(fields[2], DOM),
        month=_get_field(fields[3], MONTHS),
        dow=_get_field(fields[4], DOW),
        zone=zone,
    )


# ---------------------------------------------------------------------------- Volcano's rules


def format_schedule(schedule: str, time_zone: str | None, zones: Mapping[str, Zone]) -> tuple[str, bool]:
    """Volcano's formatSchedule: (the spec to parse, whether it warns UnsupportedSchedule)."""
    if "TZ" in schedule:
        return schedule, True
    if time_zone is not None:
        try:
            load_location(time_zone, zones)
        except ScheduleError:
            return schedule, False
        return f"TZ={time_zone} {schedule}", False
    return schedule, False


NONE_MISSED = "none"
FEW_MISSED = "few"
MANY_MISSED = "many"


class Recent(Struct, frozen=True):
    """What mostRecentScheduleTime returns: the time counted from, the run due (or None), missed, error."""

    earliest: int
    most_recent: int | None = None
    missed: str = NONE_MISSED
    error: str = ""


def most_recent_schedule_time(
    *,
    created: int,
    last_schedule: int | None,
    starting_deadline: int | None,
    now: int,
    schedule: Schedule,
    include_deadline: bool,
) -> Recent:
    """Volcano's mostRecentScheduleTime: the latest run due by `now` since the last one (or creation)."""
    earliest = created if last_schedule is None else last_schedule
    if include_deadline and starting_deadline is not None:
        deadline = now - starting_deadline  # nothing before this is scheduled
        if deadline > earliest:
            earliest = deadline
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1)
    if now < t1:
        return Recent(earliest)
    if now < t2:
        return Recent(earliest, t1)
    between = t2 - t1  # e.g. "59 23 31 2 *" never runs: both are the zero time
    if between < 1:
        return Recent(earliest, error="time difference between two schedules is less than 1 second")
    missed_runs = (now - t1) // between + 1  # a rough count, as Volcano's
    most_recent: int | None = None
    t = schedule.next(t1 + (missed_runs - 2) * between)
    while t != ZERO and t <= now:
        most_recent = t
        t = schedule.next(t)
    missed = MANY_MISSED if missed_runs > MAX_MISSED else FEW_MISSED
    return Recent(earliest, most_recent, missed)


def next_schedule_time(
    *, created: int, last_schedule: int | None, starting_deadline: int | None, now: int, schedule: Schedule
) -> Recent:
    """Volcano's nextScheduleTime: the run to start now (`most_recent`, None if none), counted within the deadline.

    `missed == MANY_MISSED` is Volcano's TooManyMissedTimes warning (recorded only when a run is due).
    """
    recent = most_recent_schedule_time(
        created=created, last_schedule=last_schedule, starting_deadline=starting_deadline, now=now,
        schedule=schedule, include_deadline=True,
    )
    if recent.most_recent is None or recent.most_recent > now:
        return Recent(recent.earliest, None, NONE_MISSED, recent.error)
    return recent


def next_due(*, created: int, last_schedule: int | None, now: int, schedule: Schedule) -> int:
    """When Volcano looks again (nextScheduleTimeDuration, as a time, without its 100 ms of padding)."""
    recent = most_recent_schedule_time(
        created=created, last_schedule=last_schedule, starting_deadline=None, now=now, schedule=schedule,
        include_deadline=False,
    )
    if recent.error:
        base = now
    elif recent.most_recent is None:
        base = recent.earliest if recent.missed == NONE_MISSED else now
    else:
        base = recent.most_recent
    return schedule.next(base)


def job_name(cronjob: str, scheduled: int) -> str:
    """Volcano's getJobName: `<cronjob>-<scheduled time in minutes since the epoch>`."""
    return f"{cronjob}-{scheduled // 60}"


def scheduled_timestamp(scheduled: int, zone: Zone) -> str:
    """Go's `scheduledTime.In(zone).Format(time.RFC3339)` (`Z` whenever the offset is zero)."""
    offset = offset_at(zone, scheduled)
    local = _dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=scheduled + offset)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if offset == 0:
        return text + "Z"
    sign = "+" if offset > 0 else "-"
    hours, minutes = divmod(abs(offset) // 60, 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"
