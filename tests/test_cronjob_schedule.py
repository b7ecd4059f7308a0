"""A CronJob's schedule (statemachines/cronjobs/schedule.py) against the cases of its Go sources.

Volcano: `pkg/controllers/cronjob/cronjob_controller_util_test.go` (TestMostRecentScheduleTime,
TestNextScheduleTimeDuration, TestNextScheduleTime, TestGetJobFromTemplate); robfig/cron v3:
`spec_test.go` (TestActivation, TestNext: the 6-field cases whose second is 0, written with five
fields; the daylight-saving ones), `parser_test.go` (TestRange, TestField, TestParseSchedule...).
Zones come from vcbus/cronjobs/zonedata.py, the adapter's reading of the system tz database.
"""

from __future__ import annotations

import datetime as dt

import pytest

from statemachines.cronjobs.schedule import (
    FEW_MISSED,
    MANY_MISSED,
    NONE_MISSED,
    ZERO,
    ConstantDelaySchedule,
    ScheduleError,
    format_schedule,
    job_name,
    most_recent_schedule_time,
    next_due,
    next_schedule_time,
    parse_standard,
    scheduled_timestamp,
)
from statemachines.cronjobs.zones import UTC, Zone, civil_to_unix, lookup
from vcbus.cronjobs.zonedata import zone, zones_for

TOP = int(dt.datetime(2025, 3, 11, 10, tzinfo=dt.UTC).timestamp())  # Volcano's topOfTheHour()
H, M = 3600, 60


def at(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp())


def utc(text: str) -> int:
    return int(dt.datetime.strptime(text, "%a %b %d %H:%M %Y").replace(tzinfo=dt.UTC).timestamp())


def parse(spec: str):
    names = [spec[spec.index("=") + 1:spec.index(" ")]] if spec.startswith(("TZ=", "CRON_TZ=")) else []
    return parse_standard(spec, zones_for(*names))


# ------------------------------------------------------------------ robfig: parsing


@pytest.mark.parametrize(("spec", "message"), [
    # parser_test.go TestRange / TestField / TestNormalizeFields / TestStandardSpecSchedule errors
    ("", "empty spec string"),
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]"),
    ("65 * * * *", "end of range (65) above maximum (59): 65"),
    ("* 5-25 * * *", "end of range (25) above maximum (23): 5-25"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("* * * 13 *", "end of range (13) above maximum (12): 13"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
    ("10-5 * * * *", "beginning of range (10) beyond end of range (5): 10-5"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("*/2/3 * * * *", "too many slashes: */2/3"),
    ("a * * * *", 'failed to parse int from a: strconv.Atoi: parsing "a": invalid syntax'),
    ("-1 * * * *", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
    ("* * * * mon-x", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("@unrecognized", "unrecognized descriptor: @unrecognized"),
    ("@daily ", "unrecognized descriptor: @daily "),
    (" @daily", "expected exactly 5 fields, found 1: [@daily]"),
    ("@every Xm", 'failed to parse duration @every Xm: time: invalid duration "Xm"'),
    ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
    ("TZ=Nowhere/City * * * * *", "provided bad location Nowhere/City: unknown time zone Nowhere/City"),
])
def test_schedules_robfig_refuses_are_refused_with_its_message(spec, message):
    with pytest.raises(ScheduleError) as err:
        parse(spec)
    assert str(err.value) == message


@pytest.mark.parametrize(("spec", "minute", "hour", "dom", "month", "dow"), [
    # parser_test.go TestParseSchedule / TestStandardSpecSchedule: the bits of each field
    ("5 * * * *", 1 << 5, None, None, None, None),
    ("5,10 * * * *", (1 << 5) | (1 << 10), None, None, None, None),
    ("5-7 * * * *", 0b111 << 5, None, None, None, None),
    ("0/20 * * * *", 1 | 1 << 20 | 1 << 40, None, None, None, None),
    ("* * * jan-Mar SUN,sat", None, None, None, 0b1110, 1 | 1 << 6),
    ("* * ? * ?", None, None, "star", None, "star"),
])
def test_fields_are_the_bits_robfig_sets(spec, minute, hour, dom, month, dow):
    s = parse(spec)
    star = 1 << 63
    if minute is not None:
        assert s.minute == minute
    if month is not None:
        assert s.month == month
    if dow == "star":
        assert s.dow & star and s.dom & star
    elif dow is not None:
        assert s.dow == dow
    assert s.second == 1  # the standard parser's seconds default to 0


def test_every_rounds_down_to_whole_seconds_and_up_to_one():
    # constantdelay_test.go TestConstantDelayNext: sub-second delays are a second, fractions are cut
    assert parse("@every 1h30m") == ConstantDelaySchedule(delay=5400)
    assert parse("@every 1.9s") == ConstantDelaySchedule(delay=1)
    assert parse("@every 500ms") == ConstantDelaySchedule(delay=1)
    assert parse("@every -5s") == ConstantDelaySchedule(delay=1)
    assert parse("TZ=UTC @every 5s") == ConstantDelaySchedule(delay=5)


# ------------------------------------------------------------------ robfig: Next


@pytest.mark.parametrize(("when", "spec", "active"), [
    # spec_test.go TestActivation
    ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
    ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
    ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
    ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
    ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
    ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
    ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
    ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True),
    ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True),
    ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False),
    ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False),
    ("Mon Jul 9 15:00 2012", "@hourly", True),
    ("Mon Jul 9 15:04 2012", "@hourly", False),
    ("Mon Jul 9 15:00 2012", "@daily", False),
    ("Mon Jul 9 00:00 2012", "@daily", True),
    ("Mon Jul 9 00:00 2012", "@weekly", False),
    ("Sun Jul 8 00:00 2012", "@weekly", True),
    ("Sun Jul 8 01:00 2012", "@weekly", False),
    ("Sun Jul 8 00:00 2012", "@monthly", False),
    ("Sun Jul 1 00:00 2012", "@monthly", True),
    ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
    ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
    ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True),
    ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),
    ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
    ("Mon Jul 9 00:00 2012", "* * 1,15 * *", False),
    ("Sun Jul 15 00:00 2012", "* * 1,15 * *", True),
    ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
])
def test_activation(when, spec, active):
    t = utc(when)
    assert (parse(spec).next(t - 1) == t) is active


NY = "TZ=America/New_York "


@pytest.mark.parametrize(("when", "spec", "expected"), [
    # spec_test.go TestNext, the cases at second 0 in five fields
    ("2012-07-09T14:45:00+00:00", "0/15 * * * *", "2012-07-09T15:00:00+00:00"),
    ("2012-07-09T14:59:59+00:00", "0/15 * * * *", "2012-07-09T15:00:00+00:00"),
    ("2012-07-09T15:45:00+00:00", "20-35/15 * * * *", "2012-07-09T16:20:00+00:00"),
    ("2012-07-09T23:46:00+00:00", "*/15 * * * *", "2012-07-10T00:00:00+00:00"),
    ("2012-07-09T23:45:00+00:00", "20-35/15 * * * *", "2012-07-10T00:20:00+00:00"),
    ("2012-07-09T23:35:00+00:00", "0 0 9 Apr-Oct ?", "2012-08-09T00:00:00+00:00"),
    ("2012-07-09T23:35:00+00:00", "0 0 */5 Apr,Aug,Oct Mon", "2012-08-01T00:00:00+00:00"),
    ("2012-07-09T23:35:00+00:00", "0 0 */5 Oct Mon", "2012-10-01T00:00:00+00:00"),
    ("2012-07-09T23:35:00+00:00", "0 0 * Feb Mon", "2013-02-04T00:00:00+00:00"),
    ("2012-07-09T23:35:00+00:00", "0 0 * Feb Mon/2", "2013-02-01T00:00:00+00:00"),
    ("2012-12-31T23:59:45+00:00", "* * * * *", "2013-01-01T00:00:00+00:00"),
    ("2012-07-09T23:35:00+00:00", "0 0 29 Feb ?", "2016-02-29T00:00:00+00:00"),
    # daylight saving time 2am EST (-5) -> 3am EDT (-4)
    ("2012-03-11T00:00:00-05:00", NY + "30 2 11 Mar ?", "2013-03-11T02:30:00-04:00"),
    ("2012-03-11T00:00:00-05:00", NY + "0 * * * ?", "2012-03-11T01:00:00-05:00"),
    ("2012-03-11T01:00:00-05:00", NY + "0 * * * ?", "2012-03-11T03:00:00-04:00"),
    ("2012-03-11T03:00:00-04:00", NY + "0 * * * ?", "2012-03-11T04:00:00-04:00"),
    ("2012-03-11T01:00:00-05:00", "CRON_TZ=America/New_York 0 * * * ?", "2012-03-11T03:00:00-04:00"),
    ("2012-03-11T00:00:00-05:00", NY + "0 1 * * ?", "2012-03-11T01:00:00-05:00"),
    ("2012-03-11T01:00:00-05:00", NY + "0 1 * * ?", "2012-03-12T01:00:00-04:00"),
    ("2012-03-11T00:00:00-05:00", NY + "0 2 * * ?", "2012-03-12T02:00:00-04:00"),  # 2am skipped
    # 2am EDT (-4) -> 1am EST (-5)
    ("2012-11-04T00:00:00-04:00", NY + "30 2 04 Nov ?", "2012-11-04T02:30:00-05:00"),
    ("2012-11-04T01:45:00-04:00", NY + "30 1 04 Nov ?", "2012-11-04T01:30:00-05:00"),
    ("2012-11-04T00:00:00-04:00", NY + "0 * * * ?", "2012-11-04T01:00:00-04:00"),
    ("2012-11-04T01:00:00-04:00", NY + "0 * * * ?", "2012-11-04T01:00:00-05:00"),
    ("2012-11-04T01:00:00-05:00", NY + "0 * * * ?", "2012-11-04T02:00:00-05:00"),
    ("2012-11-04T01:00:00-04:00", NY + "0 1 * * ?", "2012-11-04T01:00:00-05:00"),  # 1am runs twice
    ("2012-11-04T01:00:00-05:00", NY + "0 1 * * ?", "2012-11-05T01:00:00-05:00"),
    ("2012-11-04T00:00:00-04:00", NY + "0 2 * * ?", "2012-11-04T02:00:00-05:00"),
    ("2012-11-04T02:00:00-05:00", NY + "0 2 * * ?", "2012-11-05T02:00:00-05:00"),
    ("2012-11-04T00:00:00-04:00", NY + "0 3 * * ?", "2012-11-04T03:00:00-05:00"),
    ("2012-11-04T00:00:00-04:00", NY + "0 3 3 * ?", "2012-12-03T03:00:00-05:00"),
    # midnight not a valid time (robfig/cron#157)
    ("2018-10-17T05:00:00-04:00", "TZ=America/Sao_Paulo 0 9 10 * ?", "2018-11-10T06:00:00-05:00"),
    ("2018-02-14T05:00:00-05:00", "TZ=America/Sao_Paulo 0 9 22 * ?", "2018-02-22T07:00:00-05:00"),
])
def test_next(when, spec, expected):
    assert parse(spec).next(at(when)) == at(expected)


def test_unsatisfiable_schedules_have_no_next_time():
    # spec_test.go TestNext "Unsatisfiable"
    for spec in ("0 0 30 Feb ?", "0 0 31 Apr ?", "59 23 31 2 *"):
        assert parse(spec).next(utc("Mon Jul 9 23:35 2012")) == ZERO
    assert parse(", * * * *").next(TOP) == ZERO  # no minute at all


def test_zone_lookup_is_gos_period_lookup():
    z = Zone(name="X", first_offset=3600, transitions=((1000, 7200), (2000, 3600)))
    assert lookup(z, 999) == (3600, -(1 << 63), 1000)
    assert lookup(z, 1000) == (7200, 1000, 2000)
    assert lookup(z, 5000) == (3600, 2000, (1 << 63) - 1)
    assert civil_to_unix(UTC, 42) == 42


# ------------------------------------------------------------------ Volcano: formatSchedule, names


def test_format_schedule_a_tz_prefix_wins_over_the_time_zone_field():
    zones = zones_for("Europe/Rome", "Nowhere/City")
    assert format_schedule("TZ=UTC 0 * * * *", "Europe/Rome", zones) == ("TZ=UTC 0 * * * *", True)
    assert format_schedule("0 * * * *", "Europe/Rome", zones) == ("TZ=Europe/Rome 0 * * * *", False)
    assert format_schedule("0 * * * *", "Nowhere/City", zones) == ("0 * * * *", False)
    assert format_schedule("0 * * * *", None, zones) == ("0 * * * *", False)


def test_job_from_template_name_and_scheduled_timestamp():
    # TestGetJobFromTemplate: the name is minutes since the epoch; the annotation is RFC 3339 in the zone
    assert job_name("mycronjob", TOP) == f"mycronjob-{TOP // 60}"
    assert scheduled_timestamp(TOP, UTC) == "2025-03-11T10:00:00Z"
    assert scheduled_timestamp(TOP, zone("Europe/Rome")) == "2025-03-11T11:00:00+01:00"
    assert scheduled_timestamp(TOP, zone("Europe/London")) == "2025-03-11T10:00:00Z"  # Go writes Z at offset 0
    assert scheduled_timestamp(TOP, zone("Asia/Kolkata")) == "2025-03-11T15:30:00+05:30"


# ------------------------------------------------------------------ Volcano: mostRecentScheduleTime


def recent(spec, *, created, now, last=None, deadline=None, sds=False):
    return most_recent_schedule_time(created=created, last_schedule=last, starting_deadline=deadline, now=now,
                                     schedule=parse(spec), include_deadline=sds)


@pytest.mark.parametrize(("name", "spec", "kw", "earliest", "most", "missed"), [
    # TestMostRecentScheduleTime, case by case (name as in Volcano's table)
    ("now before next schedule", "0 * * * *", dict(created=TOP, now=TOP + 30), TOP, None, NONE_MISSED),
    ("now just after next schedule", "0 * * * *", dict(created=TOP, now=TOP + 61 * M), TOP, TOP + H, NONE_MISSED),
    ("missed 5 schedules", "0 * * * *", dict(created=TOP + 10, now=TOP + 301 * M), TOP + 10, TOP + 300 * M,
     FEW_MISSED),
    ("complex schedule", "30 6-16/4 * * 1-5", dict(created=TOP, last=TOP + 30 * M, now=TOP + 24 * H + 31 * M),
     TOP + 30 * M, TOP + 24 * H + 30 * M, FEW_MISSED),
    ("another complex schedule", "30 10,11,12 * * 1-5",
     dict(created=TOP, last=TOP + 30 * M, now=TOP + 30 * H + 30 * M), TOP + 30 * M, None, FEW_MISSED),
    ("complex schedule with longer diff between executions", "30 6-16/4 * * 1-5",
     dict(created=TOP, last=TOP + 30 * M, now=TOP + 96 * H + 31 * M), TOP + 30 * M, TOP + 76 * H + 30 * M,
     FEW_MISSED),
    ("complex schedule with shorter diff between executions", "30 6-16/4 * * 1-5",
     dict(created=TOP, now=TOP + 24 * H + 31 * M), TOP, TOP + 24 * H + 30 * M, FEW_MISSED),
    ("@every schedule", "@every 1h", dict(created=TOP - 59 * M, last=TOP + M, deadline=10, now=TOP + 7 * 24 * H),
     TOP + M, TOP + 6 * 24 * H + 23 * H + M, MANY_MISSED),
    ("earliestTime being CreationTimestamp and LastScheduleTime", "0 * * * *",
     dict(created=TOP, last=TOP, now=TOP + 30), TOP, None, NONE_MISSED),
    ("earliestTime being LastScheduleTime", "*/5 * * * *", dict(created=TOP, last=TOP + 30 * M, now=TOP + 31 * M),
     TOP + 30 * M, None, NONE_MISSED),
    ("earliestTime being LastScheduleTime (within StartingDeadlineSeconds)", "*/5 * * * *",
     dict(created=TOP, last=TOP + 30 * M, deadline=60, now=TOP + 31 * M), TOP + 30 * M, None, NONE_MISSED),
    ("earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)", "*/5 * * * *",
     dict(created=TOP, last=TOP + 30 * M, deadline=60, now=TOP + 32 * M, sds=True), TOP + 31 * M, None,
     NONE_MISSED),
])
def test_most_recent_schedule_time(name, spec, kw, earliest, most, missed):
    got = recent(spec, **kw)
    assert (got.earliest, got.most_recent, got.missed, got.error) == (earliest, most, missed, "")


def test_most_recent_schedule_time_rogue_cronjob_is_an_error():
    got = recent("59 23 31 2 *", created=TOP + 10, now=TOP + H)
    assert got.most_recent is None
    assert got.error == "time difference between two schedules is less than 1 second"


# ------------------------------------------------------------------ Volcano: nextScheduleTime(Duration)


@pytest.mark.parametrize(("name", "spec", "created", "last", "now", "due"), [
    # TestNextScheduleTimeDuration (Volcano's durations less its 100 ms, as times)
    ("complex schedule skipping weekend", "30 6-16/4 * * 1-5", TOP, TOP + 30 * M, TOP + 24 * H + 31 * M,
     TOP + 24 * H + 31 * M + 3 * H + 59 * M),
    ("another complex schedule skipping weekend", "30 10,11,12 * * 1-5", TOP, TOP + 30 * M, TOP + 30 * H + 30 * M,
     TOP + 30 * H + 30 * M + 18 * H),
    ("once a week cronjob, missed two runs", "0 12 * * 2", TOP, TOP + 2 * H, TOP + 19 * 24 * H + H + 30 * M,
     TOP + 19 * 24 * H + H + 30 * M + 48 * H + 30 * M),
    ("no previous run of a cronjob", "0 12 * * 3", TOP, None, TOP + 6 * H, TOP + 6 * H + 20 * H),
])
def test_next_due(name, spec, created, last, now, due):
    assert next_due(created=created, last_schedule=last, now=now, schedule=parse(spec)) == due


def test_next_schedule_time():
    # TestNextScheduleTime, cases 1-8: "0 * * * ?", T1 the top of the hour, T2 an hour later
    t1, t2 = TOP, TOP + H

    def nst(created, now, last=None, deadline=None, spec="0 * * * ?"):
        return next_schedule_time(created=created, last_schedule=last, starting_deadline=deadline, now=now,
                                  schedule=parse(spec))

    assert nst(t1 - 10 * M, t1 - 7 * M).most_recent is None  # 1: none needed yet
    assert nst(t1 - 10 * M, t1 + 2).most_recent == t1  # 2: one needed
    assert nst(t1 - 10 * M, t1 + 2 * M, last=t1).most_recent is None  # 3: started, none needed
    assert nst(t1 - 10 * M, t2 + 5 * M, last=t1).most_recent == t2  # 4: one needed
    assert nst(t1 - 2 * H, t2 + 5 * M, last=t1 - H).most_recent == t2  # 5: two needed, the latest
    way_ahead = nst(t1 - 2 * H, t2 + 10 * 24 * H, last=t1 - H)  # 6: way ahead, no deadline
    assert way_ahead.most_recent is not None and way_ahead.missed == MANY_MISSED
    short = nst(t1 - 2 * H, t2 + 10 * 24 * H, last=t1 - H, deadline=2 * H)  # 7: a short deadline
    assert short.most_recent is not None and short.missed == FEW_MISSED
    rogue = nst(t1 + 10, t2, spec="59 23 31 2 *")  # 8: the error comes up
    assert rogue.most_recent is None and rogue.error
